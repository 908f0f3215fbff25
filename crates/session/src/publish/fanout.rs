//! The hub's side of publishing: each viewer's queue, fed without ever waiting. A queue is
//! bounded by bytes; a viewer that falls further behind is cut off (told why, when it reads
//! again), so a slow or vanished viewer costs the session nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use mcpscope_engine::event::Event;

use super::wire::EventLine;

/// Bytes of lines one viewer may have waiting before it is disconnected.
pub const VIEWER_QUEUE_BYTES: usize = 8 << 20;

/// One viewer's queue, held by the hub.
#[derive(Debug)]
pub struct ViewerQueue {
    /// Lines for the viewer's writer, newline included.
    pub(crate) lines: UnboundedSender<Arc<str>>,
    /// Bytes sent on `lines` and not yet written to the socket (the writer subtracts).
    pub(crate) queued: Arc<AtomicUsize>,
    /// Tells the writer why it is cut off.
    pub(crate) cut: Option<oneshot::Sender<String>>,
    /// The most bytes that may wait.
    pub(crate) limit: usize,
}

impl ViewerQueue {
    /// Queues a line; `false` when the viewer is gone or has just been cut off.
    fn offer(&mut self, line: &Arc<str>) -> bool {
        let waiting = self.queued.fetch_add(line.len(), Ordering::Relaxed) + line.len();
        if waiting > self.limit {
            if let Some(cut) = self.cut.take() {
                let _ = cut.send(format!(
                    "too slow: more than {} bytes of events waited for this viewer; disconnected (the session goes on)",
                    self.limit
                ));
            }
            return false;
        }
        self.lines.send(line.clone()).is_ok()
    }
}

/// A viewer asking to join: the hub adds its queue after writing out the recording, and replies
/// with the sequence number of the first event the queue will receive.
#[derive(Debug)]
pub struct Join {
    /// The queue to add.
    pub queue: ViewerQueue,
    /// Where the hub replies.
    pub reply: oneshot::Sender<u64>,
}

/// The viewers' queues, owned by the hub thread.
#[derive(Debug, Default)]
pub(crate) struct Fanout {
    viewers: Vec<ViewerQueue>,
}

impl Fanout {
    /// Adds a viewer whose first event is `next_seq` (unless it stopped waiting).
    pub(crate) fn join(&mut self, join: Join, next_seq: u64) {
        if join.reply.send(next_seq).is_ok() {
            self.viewers.push(join.queue);
        }
    }

    /// Offers event `seq` to every viewer; drops those gone or too far behind. Serialises the
    /// event once, and only when someone is watching.
    pub(crate) fn publish(&mut self, seq: u64, event: &Event) {
        if self.viewers.is_empty() {
            return;
        }
        let mut text = match serde_json::to_string(&EventLine { seq, event }) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!("event {seq} cannot be published: {e}");
                return;
            }
        };
        text.push('\n');
        let line: Arc<str> = text.into();
        self.viewers.retain_mut(|viewer| viewer.offer(&line));
    }

    /// Viewers attached now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.viewers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::event::EventKind;

    fn queue(
        limit: usize,
    ) -> (
        ViewerQueue,
        tokio::sync::mpsc::UnboundedReceiver<Arc<str>>,
        oneshot::Receiver<String>,
    ) {
        let (lines, rx) = tokio::sync::mpsc::unbounded_channel();
        let (cut, cut_rx) = oneshot::channel();
        let queue = ViewerQueue {
            lines,
            queued: Arc::default(),
            cut: Some(cut),
            limit,
        };
        (queue, rx, cut_rx)
    }

    #[test]
    fn a_viewer_that_does_not_read_is_cut_off_and_the_others_go_on() {
        let mut fanout = Fanout::default();
        let (slow, _slow_lines, mut slow_cut) = queue(2_000);
        let (fast, mut fast_lines, _fast_cut) = queue(2_000);
        let fast_queued = fast.queued.clone();
        for queue in [slow, fast] {
            let (reply, answer) = oneshot::channel();
            fanout.join(Join { queue, reply }, 5);
            assert_eq!(answer.blocking_recv().ok(), Some(5));
        }
        let event = Event::now(EventKind::Note {
            stream: None,
            text: "x".repeat(100),
        });
        for seq in 5..100 {
            fanout.publish(seq, &event);
            // The fast viewer's writer keeps up.
            while let Ok(line) = fast_lines.try_recv() {
                fast_queued.fetch_sub(line.len(), Ordering::Relaxed);
                assert!(line.starts_with(&format!("{{\"seq\":{seq},")), "{line}");
            }
        }
        assert_eq!(fanout.len(), 1, "the slow one is gone");
        let why = slow_cut.try_recv().expect("told why");
        assert!(why.contains("too slow"), "{why}");
    }

    #[test]
    fn a_viewer_that_left_is_dropped_and_nothing_is_serialised_without_viewers() {
        let mut fanout = Fanout::default();
        let (gone, lines, _cut) = queue(1 << 20);
        let (reply, _answer) = oneshot::channel();
        fanout.join(Join { queue: gone, reply }, 0);
        drop(lines);
        let event = Event::now(EventKind::Note {
            stream: None,
            text: "n".into(),
        });
        fanout.publish(0, &event);
        assert_eq!(fanout.len(), 0);
        // A join whose asker stopped waiting is not added.
        let (never, _lines, _cut) = queue(1 << 20);
        let (reply, answer) = oneshot::channel();
        drop(answer);
        fanout.join(
            Join {
                queue: never,
                reply,
            },
            1,
        );
        assert_eq!(fanout.len(), 0);
    }
}
