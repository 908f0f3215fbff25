//! One attached session as a feed of events: the recording up to where the live lines begin,
//! then the live lines, in order, each event once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use mcpscope_engine::event::Event;
use mcpscope_engine::record::Events;
use mcpscope_proxy::publish::wire::{Hello, Line};

use super::sessions;

/// How the feed stands, for the status bar and the last words on stderr.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// Why the live feed stopped (`session ended`, or why this viewer was cut off).
    pub ended: Option<String>,
    /// Why the past could not be read from the recording, if it could not.
    pub past_missing: Option<String>,
}

/// An attached session.
pub struct Attached {
    /// What the session said when this viewer joined.
    pub hello: Hello,
    /// Its events: the past from the recording, then live.
    pub events: UnboundedReceiver<Event>,
    /// How the feed stands.
    pub status: Arc<Mutex<Status>>,
}

fn update(status: &Mutex<Status>, change: impl FnOnce(&mut Status)) {
    let mut guard = status
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    change(&mut guard);
}

/// Attaches to the session at `path`.
pub async fn open(path: &Path) -> anyhow::Result<Attached> {
    let stream = sessions::connect(path).await?;
    let mut reader = BufReader::new(stream);
    let hello = sessions::read_hello(&mut reader).await?;
    let (tx, events) = unbounded_channel();
    let (live_tx, live_rx) = unbounded_channel();
    let status = Arc::new(Mutex::new(Status::default()));
    tokio::spawn(read_live(reader, hello.live_from, live_tx, status.clone()));
    let past = match (&hello.session.recording, hello.live_from) {
        (Some(recording), from) if from > 0 => Some((recording.clone(), from)),
        _ => None,
    };
    tokio::spawn(feed(past, live_rx, tx, status.clone()));
    Ok(Attached {
        hello,
        events,
        status,
    })
}

/// Reads the live lines into `live` until the end line or the connection closes.
async fn read_live(
    mut reader: BufReader<tokio::net::UnixStream>,
    live_from: u64,
    live: UnboundedSender<Event>,
    status: Arc<Mutex<Status>>,
) {
    let mut line = String::new();
    let ended = loop {
        line.clear();
        match reader.read_line(&mut line).await {
            Ok(0) => break "the session closed the connection".to_string(),
            Ok(_) => {}
            Err(e) => break format!("the connection failed: {e}"),
        }
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Event { seq, event }) if seq >= live_from => {
                let _ = live.send(event);
            }
            Ok(Line::Event { .. }) => {}
            Ok(Line::End { end }) => break end,
            Err(e) => break format!("a line from the session is not understood: {e}"),
        }
    };
    update(&status, |s| s.ended = Some(ended));
}

/// Sends the past (the recording's first `from` events), then every live event.
async fn feed(
    past: Option<(PathBuf, u64)>,
    mut live: UnboundedReceiver<Event>,
    tx: UnboundedSender<Event>,
    status: Arc<Mutex<Status>>,
) {
    if let Some((recording, from)) = past {
        let sender = tx.clone();
        let read = tokio::task::spawn_blocking(move || read_past(&recording, from, &sender)).await;
        let problem = match read {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => Some(format!("reading the recording stopped: {e}")),
        };
        if let Some(problem) = problem {
            update(&status, |s| s.past_missing = Some(problem));
        }
    }
    while let Some(event) = live.recv().await {
        if tx.send(event).is_err() {
            return;
        }
    }
}

/// Sends the first `count` events of the recording.
fn read_past(recording: &Path, count: u64, tx: &UnboundedSender<Event>) -> Result<(), String> {
    let events = Events::open(recording).map_err(|e| e.to_string())?;
    let mut sent = 0;
    for event in events.take(usize::try_from(count).unwrap_or(usize::MAX)) {
        let event = event.map_err(|e| e.to_string())?;
        if tx.send(event).is_err() {
            return Ok(());
        }
        sent += 1;
    }
    if sent < count {
        return Err(format!(
            "{} holds {sent} of the {count} events before this view joined",
            recording.display()
        ));
    }
    Ok(())
}
