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
    /// The whole definition as `tools/list` gave it (its schemas are checked against each call,
    /// its length is what it costs a host's context), when one was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<super::Body>,
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
    /// The server it belongs to (see [`super::Stream::origin`]): two servers issuing the same
    /// session id have two sessions, and each server has its own session-less traffic.
    #[serde(default)]
    pub origin: Option<String>,
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
    /// A session without an id (traffic before or without one) of the server at `origin` (none:
    /// the only upstream), begun at `t`; no `session_started` is reported for it.
    pub(crate) fn sessionless(origin: Option<&str>, t: DateTime<Utc>) -> Self {
        Self {
            id: None,
            origin: origin.map(str::to_string),
            revision: None,
            client: None,
            server: None,
            started_at: t,
            ended: None,
            streams: Vec::new(),
            tools: Default::default(),
            announced: true,
        }
    }

    /// The id, or `(no session)`.
    pub fn label(&self) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| "(no session)".to_string())
    }

    /// Whether it is the session-less traffic of its server.
    pub fn is_sessionless(&self) -> bool {
        self.id.is_none()
    }

    /// Whether it is alive.
    pub fn is_alive(&self) -> bool {
        self.ended.is_none()
    }
}
