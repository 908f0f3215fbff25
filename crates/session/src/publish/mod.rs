//! Publishing a running session's events to live viewers (`mcpscope attach`) over a Unix
//! socket in the user's runtime directory ([`place`]). The hub offers each event to every
//! viewer's bounded queue ([`fanout`]); one writer task per viewer sends the lines of the
//! protocol ([`wire`], docs/attach.md) and is cut off when it falls behind.

pub mod fanout;
pub mod place;
pub mod wire;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedReadHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use fanout::{Join, VIEWER_QUEUE_BYTES, ViewerQueue};
use wire::{Hello, SESSION_ENDED, SessionInfo, end_line};

/// How long a viewer's last words (its end line) may take to be written.
const GRACE: Duration = Duration::from_secs(1);

/// How long a joining viewer waits for the hub to take it.
const JOIN_PATIENCE: Duration = Duration::from_secs(5);

/// The most viewers connected at once (joining or attached). Each holds one of the process's
/// file descriptors, which it shares with the proxy's listener and connections; a viewer past
/// the cap is told why and disconnected at once.
pub const MAX_VIEWERS: usize = 32;

/// A session being published; the socket is removed when this is dropped.
#[derive(Debug)]
pub struct Published {
    path: PathBuf,
    viewers: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Published {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Viewers attached now.
    pub fn viewers(&self) -> usize {
        self.viewers.load(Ordering::Relaxed)
    }

    /// Once the hub has finished (its queues let go), waits at most `patience` for the
    /// viewers' writers to send what is queued and their end line, then unpublishes: a session
    /// that ends does not take its last events (the deaths that end it) from its viewers.
    pub async fn finish(self, patience: Duration) {
        let deadline = tokio::time::Instant::now() + patience;
        while self.viewers() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Publishes the session in the user's runtime directory ([`place::runtime_dir`]); `joiner`
/// is the hub's ([`crate::hub::Hub::joiner`]). Must run inside a Tokio runtime.
pub fn start(session: SessionInfo, joiner: UnboundedSender<Join>) -> io::Result<Published> {
    start_in(&place::runtime_dir(), session, joiner)
}

/// Publishes the session in `dir` (created 0700 if missing; refused unless it is the user's own
/// and closed to others) as `<pid>.sock`, mode 0600.
pub fn start_in(
    dir: &Path,
    session: SessionInfo,
    joiner: UnboundedSender<Join>,
) -> io::Result<Published> {
    use std::os::unix::fs::PermissionsExt;
    place::prepare_dir(dir)?;
    let path = place::socket_path(dir, std::process::id());
    // A socket left by an earlier process with this pid (it cannot be live: the pid is ours).
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let viewers = Arc::new(AtomicUsize::new(0));
    let task = tokio::spawn(accept_loop(
        listener,
        Arc::new(session),
        joiner,
        viewers.clone(),
    ));
    Ok(Published {
        path,
        viewers,
        task,
    })
}

async fn accept_loop(
    listener: UnixListener,
    session: Arc<SessionInfo>,
    joiner: UnboundedSender<Join>,
    viewers: Arc<AtomicUsize>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_VIEWERS));
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    refuse(&stream);
                    continue;
                };
                let viewer = Viewer {
                    session: session.clone(),
                    joiner: joiner.clone(),
                    viewers: viewers.clone(),
                };
                tokio::spawn(async move {
                    viewer.serve(stream).await;
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::warn!("attach socket: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Tells a viewer past [`MAX_VIEWERS`] why it is refused, without waiting (the line fits in an
/// empty socket buffer), and drops it: a flood of viewers holds no descriptor longer than this.
fn refuse(stream: &UnixStream) {
    let why = format!(
        "too many viewers: at most {MAX_VIEWERS} may be attached at once; refused (the session goes on)"
    );
    tracing::warn!("attach: {why}");
    let _ = stream.try_write(end_line(&why).as_bytes());
}

/// Counts a viewer while it is attached.
struct Attached(Arc<AtomicUsize>);

impl Drop for Attached {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What one viewer's writer needs.
struct Viewer {
    session: Arc<SessionInfo>,
    joiner: UnboundedSender<Join>,
    viewers: Arc<AtomicUsize>,
}

/// Resolves when the viewer has closed its side (viewers send nothing; anything sent is
/// ignored).
async fn gone(heard: &mut OwnedReadHalf) {
    let mut buf = [0u8; 256];
    while let Ok(1..) = heard.read(&mut buf).await {}
}

/// Writes the last line, if the viewer takes it in time.
async fn say_end(stream: &mut (impl AsyncWriteExt + Unpin), reason: &str) {
    let _ = tokio::time::timeout(GRACE, stream.write_all(end_line(reason).as_bytes())).await;
}

impl Viewer {
    async fn serve(self, mut stream: UnixStream) {
        let peer = stream
            .peer_cred()
            .map_err(|e| format!("the viewer's user cannot be known ({e}): refused"))
            .and_then(|cred| place::check_peer(cred.uid(), place::own_uid()));
        if let Err(why) = peer {
            tracing::warn!("attach: {why}");
            say_end(&mut stream, &why).await;
            return;
        }
        let (lines, mut rx) = unbounded_channel::<Arc<str>>();
        let queued = Arc::new(AtomicUsize::new(0));
        let (cut, mut cut_rx) = oneshot::channel::<String>();
        let (reply, answer) = oneshot::channel();
        let join = Join {
            queue: ViewerQueue {
                lines,
                queued: queued.clone(),
                cut: Some(cut),
                limit: VIEWER_QUEUE_BYTES,
            },
            reply,
        };
        if self.joiner.send(join).is_err() {
            say_end(&mut stream, SESSION_ENDED).await;
            return;
        }
        let Ok(Ok(live_from)) = tokio::time::timeout(JOIN_PATIENCE, answer).await else {
            say_end(&mut stream, SESSION_ENDED).await;
            return;
        };
        let others = self.viewers.fetch_add(1, Ordering::Relaxed);
        let _attached = Attached(self.viewers.clone());
        let hello = Hello {
            mcpscope_attach: wire::VERSION,
            pid: std::process::id(),
            session: (*self.session).clone(),
            live_from,
            viewers: others,
        };
        let Ok(mut text) = serde_json::to_string(&hello) else {
            return;
        };
        text.push('\n');
        if stream.write_all(text.as_bytes()).await.is_err() {
            return;
        }
        let (mut heard, mut stream) = stream.into_split();
        let mut cut_open = true;
        loop {
            let next = tokio::select! {
                biased;
                () = gone(&mut heard) => return,
                why = &mut cut_rx, if cut_open => match why {
                    Ok(why) => Err(why),
                    Err(_) => {
                        // The hub let go of the queue: what is in it is still sent.
                        cut_open = false;
                        continue;
                    }
                },
                line = rx.recv() => Ok(line),
            };
            let line = match next {
                Err(why) => {
                    say_end(&mut stream, &why).await;
                    return;
                }
                Ok(None) => {
                    say_end(&mut stream, SESSION_ENDED).await;
                    return;
                }
                Ok(Some(line)) => line,
            };
            let mut write = Box::pin(stream.write_all(line.as_bytes()));
            let written = tokio::select! {
                biased;
                done = &mut write => Ok(done),
                why = &mut cut_rx, if cut_open => Err(why),
            };
            match written {
                Ok(Ok(())) => {
                    queued.fetch_sub(line.len(), Ordering::Relaxed);
                }
                // The viewer left: dropping the queue's receiver tells the hub.
                Ok(Err(_)) => return,
                Err(Err(_)) => {
                    // The hub let go of the queue (the session ends): finish the line.
                    cut_open = false;
                    if write.await.is_err() {
                        return;
                    }
                    queued.fetch_sub(line.len(), Ordering::Relaxed);
                }
                Err(Ok(why)) => {
                    // Cut off mid-line: finish the line if the viewer reads on, then say why.
                    let finished = tokio::time::timeout(GRACE, &mut write).await;
                    drop(write);
                    if let Ok(Ok(())) = finished {
                        say_end(&mut stream, &why).await;
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::Hub;
    use mcpscope_engine::event::{Event, EventKind};
    use mcpscope_engine::record::{Create, Events, Recorder};
    use mcpscope_engine::redact::Redactor;

    fn note(n: u64) -> Event {
        Event::now(EventKind::Note {
            stream: None,
            text: format!("note {n}"),
        })
    }

    #[test]
    fn a_viewer_joins_at_an_exact_seam_with_the_recording() {
        let dir = tempfile_dir();
        let path = dir.join("rec.jsonl");
        let recorder = Recorder::create(&path, Create::Replace, true).expect("recorder");
        let hub = Hub::start(Some(recorder), Redactor::new()).expect("hub");
        for n in 0..50 {
            hub.input.send(note(n).into()).expect("send");
        }
        // Usually the hub has taken the first events by now: the seam falls among them.
        std::thread::sleep(Duration::from_millis(50));
        let (lines, mut rx) = unbounded_channel();
        let (cut, _cut_rx) = oneshot::channel();
        let (reply, answer) = oneshot::channel();
        let queue = ViewerQueue {
            lines,
            queued: Arc::default(),
            cut: Some(cut),
            limit: VIEWER_QUEUE_BYTES,
        };
        hub.joiner().send(Join { queue, reply }).expect("join");
        for n in 50..80 {
            hub.input.send(note(n).into()).expect("send");
        }
        let live_from = answer.blocking_recv().expect("joined");
        // Everything before the seam is in the file when the viewer hears of it.
        let past: Vec<Event> = Events::open(&path)
            .expect("open")
            .take(usize::try_from(live_from).expect("small"))
            .collect::<Result<_, _>>()
            .expect("read");
        assert_eq!(past.len() as u64, live_from);
        let tally = hub
            .finish_within(Duration::from_secs(10))
            .expect("finished");
        assert_eq!(tally.seen, 80);
        let mut live = Vec::new();
        while let Ok(line) = rx.try_recv() {
            let line: wire::Line = serde_json::from_str(&line).expect("a line");
            live.push(line);
        }
        // The past and the live lines are every event once, in order.
        let texts: Vec<String> = past
            .iter()
            .map(|e| e.kind.clone())
            .chain(live.iter().map(|l| match l {
                wire::Line::Event { event, .. } => event.kind.clone(),
                wire::Line::End { end } => panic!("unexpected end {end}"),
            }))
            .map(|kind| match kind {
                EventKind::Note { text, .. } => text,
                other => panic!("{other:?}"),
            })
            .collect();
        let expected: Vec<String> = (0..80).map(|n| format!("note {n}")).collect();
        assert_eq!(texts, expected);
        let seqs: Vec<u64> = live
            .iter()
            .filter_map(|l| match l {
                wire::Line::Event { seq, .. } => Some(*seq),
                wire::Line::End { .. } => None,
            })
            .collect();
        assert_eq!(seqs, (live_from..80).collect::<Vec<_>>());
        std::fs::remove_dir_all(&dir).ok();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpscope-publish-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }
}
