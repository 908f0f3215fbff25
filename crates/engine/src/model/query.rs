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

    /// The server a call belongs to (its session's; see [`super::Stream::origin`]).
    pub fn call_server(&self, call: &Call) -> Option<&str> {
        self.sessions.get(call.session)?.origin.as_deref()
    }

    /// The servers that sessions with traffic belong to, each once, in the order first seen.
    pub fn servers(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for session in self.sessions.iter().filter(|s| !s.streams.is_empty()) {
            if let Some(origin) = session.origin.as_deref()
                && !seen.contains(&origin)
            {
                seen.push(origin);
            }
        }
        seen
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
