//! Between the proxy and the views: every event goes to the recorder first, then to the view.
//! Runs on its own thread so neither file I/O nor a slow view ever holds up forwarding; the
//! channels are unbounded, so nothing is dropped.

use std::path::PathBuf;
use std::thread::JoinHandle;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::event::Event;
use crate::record::Recorder;

/// The running hub.
pub struct Hub {
    /// Where the proxy sends events.
    pub input: UnboundedSender<Event>,
    /// What the view reads.
    pub output: Option<UnboundedReceiver<Event>>,
    /// The recording's path, if recording.
    pub recording: Option<PathBuf>,
    thread: Option<JoinHandle<u64>>,
}

impl Hub {
    /// Starts the hub with an optional recorder.
    pub fn start(recorder: Option<Recorder>) -> Self {
        let (input, mut rx) = unbounded_channel::<Event>();
        let (tx, output) = unbounded_channel::<Event>();
        let recording = recorder.as_ref().map(|r| r.path().to_path_buf());
        let thread = std::thread::Builder::new()
            .name("mcpscope-hub".into())
            .spawn(move || {
                let mut recorder = recorder;
                let mut warned = false;
                while let Some(event) = rx.blocking_recv() {
                    if let Some(rec) = recorder.as_mut()
                        && let Err(e) = rec.write(&event)
                        && !warned
                    {
                        tracing::error!("recording to {} failed: {e}", rec.path().display());
                        eprintln!(
                            "mcpscope: recording to {} failed: {e}",
                            rec.path().display()
                        );
                        warned = true;
                    }
                    let _ = tx.send(event);
                }
                recorder.map_or(0, |r| r.events())
            })
            .ok();
        Self {
            input,
            output: Some(output),
            recording,
            thread,
        }
    }

    /// Takes the view's receiver (once).
    pub fn take_output(&mut self) -> Option<UnboundedReceiver<Event>> {
        self.output.take()
    }

    /// Waits until every event sent so far is recorded; returns the number of events recorded.
    /// Every sender (the proxy's sinks) must be dropped first.
    pub fn finish(mut self) -> u64 {
        let thread = self.thread.take();
        drop(self);
        thread.and_then(|t| t.join().ok()).unwrap_or(0)
    }
}
