//! The identifiers of the tree's nodes: what a path through the tree (server, session, stream,
//! message) is made of.

use mcpscope_engine::event::StreamId;

/// A tree node identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    /// A server (a hash of its origin; see [`crate::grouping`]): the top level when the tree
    /// groups sessions by server.
    Server(u64),
    /// A session (index).
    Session(usize),
    /// A stream (id).
    Stream(StreamId),
    /// A message (index).
    Message(usize),
    /// A placeholder (children not built, or "… more"): what it stands in for (a session's
    /// index, a stream's id, a message's index) and its kind (the constants below; 0, 2 and 4
    /// are a collapsed session, stream and server).
    More(usize, u8),
}

/// `… N earlier streams`: the stream right before a session's window, by id.
pub(crate) const EARLIER_STREAMS: u8 = 1;
/// `… N later streams`: the stream right after a session's window, by id.
pub(crate) const LATER_STREAMS: u8 = 3;
/// `… N earlier messages`: the message right before an open stream's window, by index.
pub(crate) const EARLIER_MESSAGES: u8 = 5;
/// `… N later messages`: the message right after an open stream's window, by index.
pub(crate) const LATER_MESSAGES: u8 = 6;
