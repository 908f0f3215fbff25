//! The end of an exchange that never got a response: a client that gave up before the response
//! head (hyper drops the request's future) or an exchange that failed before it. Whichever stage
//! answers takes over the end; otherwise this guard records it when dropped.

use std::sync::Arc;

use crate::shared::Shared;
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};

/// Records a `cancelled` end (client leg) for an exchange dropped before its response.
pub(crate) struct Pending {
    shared: Arc<Shared>,
    stream: StreamId,
    armed: bool,
}

impl Pending {
    /// Guards the exchange `stream` until [`Pending::answered`].
    pub(crate) fn new(shared: Arc<Shared>, stream: StreamId) -> Self {
        Self {
            shared,
            stream,
            armed: true,
        }
    }

    /// A response was handed to hyper: its body (or the stage that made it) records the end.
    pub(crate) fn answered(mut self) {
        self.armed = false;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Faults no longer reach it; an end already recorded (a failure) is kept, not doubled.
        self.shared.unregister(self.stream);
        self.shared.sink.emit(EventKind::StreamEnded {
            stream: self.stream,
            dir: Direction::ServerToClient,
            how: EndHow::Cancelled,
            leg: Leg::Client,
            bytes: 0,
            detail: Some("the client gave up before the response head".into()),
        });
    }
}
