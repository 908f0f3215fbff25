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
    /// A placeholder (children not built, or "… more").
    More(usize, u8),
}
