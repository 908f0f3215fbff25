//! Between the proxy and the views: every event goes to the recorder first, then to the view.
//! Runs on its own thread so neither file I/O nor a slow view ever holds up forwarding; the
//! channels are unbounded, so nothing is dropped.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::thread::JoinHandle;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use mcpscope_engine::event::Event;
use mcpscope_engine::record::Recorder;
use mcpscope_engine::redact::Redactor;

use crate::error::ProxyError;

/// How long the hub lets a burst of events gather before taking it (bounds the view's lag).
const COALESCE: std::time::Duration = std::time::Duration::from_micros(500);

/// The most events taken between two flushes.
const MAX_BURST: usize = 4096;

/// Says once that recording failed (disk full, …); forwarding and the view go on.
fn report_failure(recorder: &Recorder, result: std::io::Result<()>, failed: &mut bool) {
    if let Err(e) = result
        && !*failed
    {
        *failed = true;
        tracing::error!("recording to {} failed: {e}", recorder.path().display());
        eprintln!(
            "mcpscope: recording to {} failed: {e}",
            recorder.path().display()
        );
    }
}

/// The running hub.
pub struct Hub {
    /// Where the proxy sends events.
    pub input: UnboundedSender<Event>,
    /// What the view reads.
    pub output: Option<UnboundedReceiver<Event>>,
    /// The recording's path, if recording.
    pub recording: Option<PathBuf>,
    thread: Option<Done>,
}

/// The hub thread, and the signal it sends when it has recorded its last event.
struct Done {
    thread: JoinHandle<()>,
    count: Receiver<u64>,
}

impl Hub {
    /// Starts the hub with an optional recorder; `redactor` hides secrets in every event
    /// before it is recorded or reaches the view. Fails when its thread cannot be started.
    pub fn start(recorder: Option<Recorder>, redactor: Redactor) -> Result<Self, ProxyError> {
        let (input, mut rx) = unbounded_channel::<Event>();
        let (tx, output) = unbounded_channel::<Event>();
        let (done, count) = sync_channel(1);
        let recording = recorder.as_ref().map(|r| r.path().to_path_buf());
        let thread = std::thread::Builder::new()
            .name("mcpscope-hub".into())
            .spawn(move || {
                let mut recorder = recorder;
                let mut failed = false;
                while let Some(first) = rx.blocking_recv() {
                    // Let the rest of the burst arrive, take it whole, then flush once: the
                    // proxy wakes this thread (and the view) once per burst instead of once per
                    // event, a quiet moment still leaves every line on disk, and a busy one
                    // costs one write.
                    std::thread::sleep(COALESCE);
                    let mut next = Some(first);
                    let mut taken = 0;
                    while let Some(mut event) = next.take() {
                        redactor.event(&mut event.kind);
                        if let Some(rec) = recorder.as_mut() {
                            let written = rec.write(&event);
                            report_failure(rec, written, &mut failed);
                        }
                        let _ = tx.send(event);
                        taken += 1;
                        if taken < MAX_BURST {
                            next = rx.try_recv().ok();
                        }
                    }
                    if let Some(rec) = recorder.as_mut() {
                        let flushed = rec.flush();
                        report_failure(rec, flushed, &mut failed);
                    }
                }
                // The waiting side may have given up already: nothing is lost either way.
                let _ = done.send(recorder.map_or(0, |r| r.events()));
            })
            .map_err(ProxyError::HubThread)?;
        Ok(Self {
            input,
            output: Some(output),
            recording,
            thread: Some(Done { thread, count }),
        })
    }

    /// Takes the view's receiver (once).
    pub fn take_output(&mut self) -> Option<UnboundedReceiver<Event>> {
        self.output.take()
    }

    /// Waits until every event sent so far is recorded; returns the number of events recorded.
    /// The proxy's senders should be dropped first; connections still open when `patience`
    /// runs out are left behind (every line written so far is already flushed).
    pub fn finish_within(mut self, patience: std::time::Duration) -> Option<u64> {
        let done = self.thread.take();
        drop(self);
        let Done { thread, count } = done?;
        match count.recv_timeout(patience) {
            Ok(count) => {
                // The thread has sent its last word; it returns at once.
                let _ = thread.join();
                Some(count)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let problem = "the event hub thread stopped without finishing (it panicked)";
                tracing::error!("{problem}");
                eprintln!("mcpscope: {problem}");
                None
            }
        }
    }

    /// Waits until every sender is dropped and every event recorded; returns the count.
    pub fn finish(self) -> u64 {
        self.finish_within(std::time::Duration::MAX).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::event::EventKind;
    use mcpscope_engine::record::Create;

    #[test]
    fn finishing_waits_for_the_last_event_and_gives_up_at_the_deadline() {
        let dir = std::env::temp_dir().join(format!("mcpscope-hub-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rec.jsonl");
        let recorder = Recorder::create(&path, Create::Replace, true).unwrap();
        let hub = Hub::start(Some(recorder), Redactor::new()).unwrap();
        for n in 0..3 {
            let kind = EventKind::Note {
                stream: None,
                text: format!("note {n}"),
            };
            hub.input.send(Event::now(kind)).unwrap();
        }
        let started = std::time::Instant::now();
        assert_eq!(
            hub.finish_within(std::time::Duration::from_secs(10)),
            Some(3)
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));

        let hub = Hub::start(None, Redactor::new()).unwrap();
        let _sender_still_open = hub.input.clone();
        let started = std::time::Instant::now();
        assert_eq!(
            hub.finish_within(std::time::Duration::from_millis(50)),
            None
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        std::fs::remove_dir_all(&dir).ok();
    }
}
