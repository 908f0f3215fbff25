//! Read-only accessors for views: positions, and the messages of a call.

use super::{Call, MessageRec, Model};
use crate::event::StreamId;

impl Model {
    /// The position of a stream among the retained streams ([`super::Store::as_slice`]).
    pub fn stream_pos(&self, id: StreamId) -> Option<usize> {
        self.stream_index
            .get(&id)
            .and_then(|&index| self.streams.rank_of(index))
    }

    /// The request message of a call.
    pub fn request_message(&self, call: &Call) -> Option<&MessageRec> {
        let stream = self.stream(call.request_stream)?;
        stream
            .messages
            .iter()
            .map(|&m| &self.messages[m])
            .find(|m| m.call == Some(call.index) && m.dir == call.dir)
    }

    /// The response message of a call, if one arrived.
    pub fn response_message(&self, call: &Call) -> Option<&MessageRec> {
        let stream = self.stream(call.owner)?;
        stream
            .messages
            .iter()
            .map(|&m| &self.messages[m])
            .find(|m| m.call == Some(call.index) && m.dir != call.dir)
    }
}
