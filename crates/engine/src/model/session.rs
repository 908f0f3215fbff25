//! An MCP session (by `Mcp-Session-Id`), or the session-less traffic.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::event::StreamId;

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SessionEnd {
    /// The server answered 404 to it.
    Expired,
    /// The client deleted it.
    Deleted,
}

/// What `tools/list` said of a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolInfo {
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
    /// `annotations.idempotentHint`.
    pub idempotent: bool,
}

impl ToolInfo {
    /// Whether running it twice is safe by its own annotations.
    pub fn safe_to_retry(&self) -> bool {
        self.read_only || self.idempotent
    }
}

/// One session.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Session {
    /// `Mcp-Session-Id`, or `None` for session-less traffic.
    pub id: Option<String>,
    /// The negotiated (or announced) protocol revision.
    pub revision: Option<String>,
    /// The client's name and version from `initialize`, if seen.
    pub client: Option<String>,
    /// The server's name and version from the `initialize` result, if seen.
    pub server: Option<String>,
    /// When it was first seen.
    pub started_at: DateTime<Utc>,
    /// How and when it ended.
    pub ended: Option<(DateTime<Utc>, SessionEnd)>,
    /// Its streams, in order.
    pub streams: Vec<StreamId>,
    /// Tools by name, from `tools/list` results.
    pub tools: HashMap<String, ToolInfo>,
    /// Whether `session_started` was reported (it waits for the `initialize` result, so that it
    /// can name the negotiated revision).
    pub announced: bool,
}

impl Session {
    /// The id, or `(no session)`.
    pub fn label(&self) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| "(no session)".to_string())
    }

    /// Whether it is alive.
    pub fn is_alive(&self) -> bool {
        self.ended.is_none()
    }
}
