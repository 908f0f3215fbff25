//! One attached session as a feed of events: the recording up to where the live lines begin,
//! then the live lines, in order, each event once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::pace::{Backlog, Pace};
use crate::publish::wire::{Hello, Line};
use mcpscope_engine::event::Event;
use mcpscope_engine::record::Events;

pub mod sessions;

/// How the feed stands, for the status bar and the last words on stderr.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// Why the live feed stopped (`session ended`, or why this viewer was cut off).
    pub ended: Option<String>,
    /// Why the past could not be read from the recording, if it could not.
    pub past_missing: Option<String>,
}

/// Bytes of events ([`EventKind::weight`](mcpscope_engine::event::EventKind::weight)) the feed
/// may hold for its view, and again for the live lines while the past is read: past it, reading
/// the recording (or the session's lines) waits for the view to take what it holds. The
/// session cuts off a viewer that falls too far behind, and says so; nothing is dropped
/// silently.
pub(crate) const FEED_BYTES: usize = Backlog::LIMIT;

/// How often a feed that holds its budget looks again whether its taker made room.
const ROOM_POLL: Duration = Duration::from_millis(1);

/// Waits (asleep) until `held` is at most [`FEED_BYTES`] or `closed` says its taker is gone,
/// then counts `event` as held.
async fn hold(held: &Backlog, event: &Event, closed: impl Fn() -> bool) {
    while held.bytes() > FEED_BYTES && !closed() {
        tokio::time::sleep(ROOM_POLL).await;
    }
    held.add(event.kind.weight());
}

/// [`hold`] for a blocking thread.
fn hold_blocking(held: &Backlog, event: &Event, closed: impl Fn() -> bool) {
    while held.bytes() > FEED_BYTES && !closed() {
        std::thread::sleep(ROOM_POLL);
    }
    held.add(event.kind.weight());
}

/// An attached session.
pub struct Attached {
    /// What the session said when this viewer joined.
    pub hello: Hello,
    /// Its events: the past from the recording, then live. The view tells [`Attached::taken`]
    /// of each event it takes: the feed holds at most [`FEED_BYTES`] of them.
    pub events: UnboundedReceiver<Event>,
    /// Told of each event the view takes from `events`.
    pub taken: Pace,
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
    let live = Paced {
        tx: live_tx,
        budget: Backlog::default(),
    };
    let view = Paced {
        tx,
        budget: Backlog::default(),
    };
    let live_budget = live.budget.clone();
    let released = view.budget.clone();
    tokio::spawn(read_live(reader, hello.live_from, live, status.clone()));
    let past = match (&hello.session.recording, hello.live_from) {
        (Some(recording), from) if from > 0 => Some((recording.clone(), from)),
        _ => None,
    };
    tokio::spawn(feed(past, (live_rx, live_budget), view, status.clone()));
    Ok(Attached {
        hello,
        events,
        taken: Pace::of(released),
        status,
    })
}

/// A channel of events bounded in bytes by its [`Backlog`].
struct Paced {
    tx: UnboundedSender<Event>,
    budget: Backlog,
}

impl Paced {
    /// Sends `event` once there is room; false when the taker is gone.
    async fn send(&self, event: Event) -> bool {
        hold(&self.budget, &event, || self.tx.is_closed()).await;
        self.tx.send(event).is_ok()
    }

    /// [`Paced::send`] for a blocking thread.
    fn send_blocking(&self, event: Event) -> bool {
        hold_blocking(&self.budget, &event, || self.tx.is_closed());
        self.tx.send(event).is_ok()
    }
}

/// Reads the live lines into `live` until the end line or the connection closes.
async fn read_live(
    mut reader: BufReader<tokio::net::UnixStream>,
    live_from: u64,
    live: Paced,
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
                // While the view is behind, the session's lines wait in its socket and its
                // queue for this viewer (which cuts the viewer off when full, and says so).
                live.send(event).await;
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
    (mut live, live_budget): (UnboundedReceiver<Event>, Backlog),
    view: Paced,
    status: Arc<Mutex<Status>>,
) {
    let view = Arc::new(view);
    if let Some((recording, from)) = past {
        let sender = view.clone();
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
        live_budget.release(event.kind.weight());
        if !view.send(event).await {
            return;
        }
    }
}

/// Sends the first `count` events of the recording, as the view makes room for them.
fn read_past(recording: &Path, count: u64, view: &Paced) -> Result<(), String> {
    let events = Events::open(recording).map_err(|e| e.to_string())?;
    let mut sent = 0;
    for event in events.take(usize::try_from(count).unwrap_or(usize::MAX)) {
        let event = event.map_err(|e| e.to_string())?;
        if !view.send_blocking(event) {
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
