//! The attach protocol, version [`VERSION`]: JSON Lines from the session to each viewer — a
//! [`Hello`], then one [`Line::Event`] per event, then (when the session can still say it) one
//! [`Line::End`]. Documented in docs/attach.md.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use mcpscope_engine::event::Event;

/// The protocol version in every hello.
pub const VERSION: u32 = 1;

/// The `end` text when the session stops.
pub const SESSION_ENDED: &str = "session ended";

/// What a session is, as a viewer and `attach --list` see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// `http` (a proxy) or `stdio` (a shim around a server process).
    pub kind: String,
    /// A name given by the user, if any.
    pub name: Option<String>,
    /// The proxy's listen address (`http`).
    pub listen: Option<String>,
    /// The upstream URL, credentials hidden (`http`).
    pub upstream: Option<String>,
    /// The server command and its arguments (`stdio`).
    pub command: Option<Vec<String>>,
    /// When the session started (RFC 3339).
    pub started: String,
    /// The recording, as an absolute path; `None` when not recording.
    pub recording: Option<PathBuf>,
    /// Calls a view holds in full in memory (the session's `--keep`).
    pub keep_calls: usize,
}

/// The first line a viewer receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol version ([`VERSION`]).
    pub mcpscope_attach: u32,
    /// The session's process id.
    pub pid: u32,
    /// The session.
    #[serde(flatten)]
    pub session: SessionInfo,
    /// The sequence number of the first event this viewer receives live: events before it are
    /// in the recording (its first `live_from` events), or, unrecorded, not available.
    pub live_from: u64,
    /// Other viewers attached when this one joined.
    pub viewers: usize,
}

/// Every line after the hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    /// One event, with its sequence number (its index among the session's events, which is its
    /// index in the recording).
    Event {
        /// From 0, one more for each event.
        seq: u64,
        /// The event, as a version 1 recording line writes it.
        event: Event,
    },
    /// The last line: why the feed stops.
    End {
        /// [`SESSION_ENDED`], or why this viewer was disconnected.
        end: String,
    },
}

/// One event's line, written without copying the event.
#[derive(Serialize)]
pub(crate) struct EventLine<'a> {
    pub(crate) seq: u64,
    pub(crate) event: &'a Event,
}

/// The end line with `reason`, newline included.
pub(crate) fn end_line(reason: &str) -> String {
    let mut line = serde_json::to_string(&Line::End { end: reason.into() })
        .unwrap_or_else(|_| format!("{{\"end\":{reason:?}}}"));
    line.push('\n');
    line
}
