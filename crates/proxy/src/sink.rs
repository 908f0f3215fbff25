//! Where the taps send their facts: an unbounded channel, so the proxy never waits and nothing
//! is dropped.

use tokio::sync::mpsc::UnboundedSender;

use mcpscope_engine::event::{Event, EventKind};

/// Timestamps facts and sends them on.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: UnboundedSender<Event>,
}

impl EventSink {
    /// A sink sending into `tx`.
    pub fn new(tx: UnboundedSender<Event>) -> Self {
        Self { tx }
    }

    /// Sends a fact observed now. A closed receiver (shutting down) is not an error.
    pub fn emit(&self, kind: EventKind) {
        let _ = self.tx.send(Event::now(kind));
    }
}
