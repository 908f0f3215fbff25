//! One HTTP exchange: a request and its response stream.

use chrono::{DateTime, Utc};

use crate::event::{EndHow, Header, Leg, StreamId, header};
use crate::wire::ContentKind;

/// How an exchange ended, one direction.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct End {
    /// When.
    pub at: DateTime<Utc>,
    /// How.
    pub how: EndHow,
    /// Which leg ended it.
    pub leg: Leg,
    /// Bytes that passed.
    pub bytes: u64,
    /// Transport detail.
    pub detail: Option<String>,
}

/// A mark on a stream's timeline.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mark {
    /// When.
    pub at: DateTime<Utc>,
    /// The SSE event id, if any.
    pub id: Option<String>,
    /// Index into [`crate::model::Model::messages`] of the message it carried, if any.
    pub message: Option<usize>,
    /// Whether it carried a response (result or error).
    pub response: bool,
    /// Body offsets of the event.
    pub span: (u64, u64),
}

/// One exchange.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stream {
    /// Exchange id.
    pub id: StreamId,
    /// Client connection number.
    pub conn: u64,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Index of its session.
    pub session: usize,
    /// The server it went to: `scheme://host[:port]` (the request's own server through the
    /// forward proxy, the upstream's otherwise), or a stdio process's name; `None` when the
    /// recording does not say.
    #[serde(default)]
    pub origin: Option<String>,
    /// When the request head arrived.
    pub opened_at: DateTime<Utc>,
    /// Request headers.
    pub request_headers: Vec<Header>,
    /// Response status, once known.
    pub status: Option<u16>,
    /// Response headers.
    pub response_headers: Vec<Header>,
    /// When the response head was seen.
    pub head_at: Option<DateTime<Utc>>,
    /// What the body is (`None` until the response head).
    pub body: Option<ContentKind>,
    /// SSE events and JSON bodies, in order.
    pub marks: Vec<Mark>,
    /// Indices of the messages carried both ways.
    pub messages: Vec<usize>,
    /// Bytes of the bodies of [`Stream::messages`] (their sizes for the retention policy).
    #[serde(default)]
    pub detail_bytes: usize,
    /// Indices of the calls it carried the request of, or owns the response of.
    pub calls: Vec<usize>,
    /// The last SSE event id seen.
    pub last_event_id: Option<String>,
    /// The server's `retry:` hint, ms.
    pub retry_ms: Option<u64>,
    /// The stream this one resumes (GET with `Last-Event-ID`).
    pub resumes: Option<StreamId>,
    /// How its `Last-Event-ID` differs from the last id the client received on the stream
    /// whose calls waited for it, if it does.
    #[serde(default)]
    pub resume_mismatch: Option<super::ResumeMismatch>,
    /// How the response ended.
    pub ended: Option<End>,
    /// How the request body ended, if abnormally.
    pub request_aborted: Option<End>,
    /// Upstream unreachable: the error.
    pub unreachable: Option<String>,
    /// Faults injected on it.
    pub faults: Vec<String>,
    /// Invalid messages seen on it.
    pub invalid: u32,
    /// The event sequence number (0-based, in recording order) of its `stream_opened`.
    pub opened_seq: u64,
    /// SSE events no longer held in [`Stream::marks`] (the retention policy keeps the newest).
    pub dropped_marks: u64,
    /// The server process, when the stream is a stdio process's (`mcpscope stdio`).
    pub process: Option<Box<super::Process>>,
}

impl Stream {
    /// `POST#12 sse`, `GET#3 resumed`, `POST#4 json`; a non-MCP endpoint says what it is
    /// (`GET#2 oauth metadata`, `POST#5 token request`).
    pub fn label(&self) -> String {
        if let Some(what) = crate::wire::oauth::endpoint_label(&self.path) {
            return format!("{}#{} {what}", self.method, self.id);
        }
        let suffix = match (self.resumes.is_some(), self.body) {
            (true, _) => " resumed",
            (false, Some(ContentKind::Sse)) => " sse",
            (false, Some(ContentKind::Json)) => " json",
            (false, Some(ContentKind::Other) | None) => "",
        };
        format!("{}#{}{}", self.method, self.id, suffix)
    }

    /// Whether the response is still flowing.
    pub fn is_open(&self) -> bool {
        self.ended.is_none() && self.unreachable.is_none()
    }

    /// Whether any SSE event on it carried an id.
    pub fn has_event_ids(&self) -> bool {
        self.last_event_id.is_some()
    }

    /// A request header, case-insensitively.
    pub fn request_header(&self, name: &str) -> Option<&str> {
        header(&self.request_headers, name)
    }

    /// A response header, case-insensitively.
    pub fn response_header(&self, name: &str) -> Option<&str> {
        header(&self.response_headers, name)
    }
}
