//! The one vocabulary of facts: every tap emits timestamped [`Event`]s, the recorder writes them
//! as JSON Lines, and the model folds them. Nothing else crosses from I/O into the model.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the recording format written in a recording's first line.
pub const FORMAT_VERSION: u32 = 2;

/// Identifies one HTTP exchange (a request and its response stream), numbered from 1 per run.
pub type StreamId = u64;

/// One timestamped fact observed by the proxy (or injected by it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// When the fact was observed, UTC.
    #[serde(with = "rfc3339_micros")]
    pub t: DateTime<Utc>,
    /// What was observed.
    #[serde(flatten)]
    pub kind: EventKind,
    /// For a `message` that is exactly what an SSE event's data (or a whole body, its ends
    /// trimmed) parses to: that text. A consumer that keeps the message as text takes it from
    /// here when it is the very text the message writes out as ([`crate::model::Body::of`]
    /// checks), instead of writing the message out again. Not part of the fact: never
    /// recorded, sent or compared.
    #[serde(skip)]
    pub source: Option<std::sync::Arc<str>>,
}

impl PartialEq for Event {
    /// The time and the fact; [`Event::source`] is only a shortcut to a text.
    fn eq(&self, other: &Self) -> bool {
        self.t == other.t && self.kind == other.kind
    }
}

impl Event {
    /// Roughly the bytes the event holds ([`EventKind::weight`]); a message with its text
    /// ([`Event::source`]) weighs twice that text (a parsed tree outweighs it), without walking
    /// the tree.
    pub fn weight(&self) -> usize {
        match (&self.kind, &self.source) {
            (EventKind::Message { .. }, Some(data)) => 256 + 2 * data.len(),
            (kind, _) => kind.weight(),
        }
    }

    /// An event observed now.
    pub fn now(kind: EventKind) -> Self {
        Self::at(Self::stamp(), kind)
    }

    /// The time of a fact observed now, as events carry it.
    pub fn stamp() -> DateTime<Utc> {
        // Recordings keep microseconds; live events use the same precision so that a replay
        // folds to exactly the live state.
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        // A clock before 1970 (or past the calendar) takes chrono's own way.
        let stamp = since
            .ok()
            .and_then(|since| unix_micros(since.as_secs(), since.subsec_micros()));
        stamp.unwrap_or_else(|| {
            use chrono::Timelike as _;
            let now = Utc::now();
            now.with_nanosecond(now.nanosecond() / 1_000 * 1_000)
                .unwrap_or(now)
        })
    }

    /// An event at a given time.
    pub fn at(t: DateTime<Utc>, kind: EventKind) -> Self {
        Self {
            t,
            kind,
            source: None,
        }
    }
}

/// The UTC time `secs` seconds and `micros` microseconds after the Unix epoch (what
/// `DateTime::from_timestamp` makes). Every fact is stamped: the calendar date, the costly
/// part, is worked out once a day per thread and reused.
fn unix_micros(secs: u64, micros: u32) -> Option<DateTime<Utc>> {
    use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
    use std::cell::Cell;
    thread_local! {
        static TODAY: Cell<Option<(u64, NaiveDate)>> = const { Cell::new(None) };
    }
    const DAY: u64 = 86_400;
    let (day, in_day) = (secs / DAY, (secs % DAY) as u32);
    let date = match TODAY.with(Cell::get) {
        Some((known, date)) if known == day => date,
        _ => {
            let date = DateTime::from_timestamp(i64::try_from(day * DAY).ok()?, 0)?.date_naive();
            TODAY.with(|today| today.set(Some((day, date))));
            date
        }
    };
    let time = NaiveTime::from_num_seconds_from_midnight_opt(in_day, micros * 1_000)?;
    Some(NaiveDateTime::new(date, time).and_utc())
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client to server (a request body).
    ClientToServer,
    /// Server to client (a response body or SSE event).
    ServerToClient,
}

/// How a response stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndHow {
    /// The body ended cleanly (end of stream / FIN after a complete framing).
    Eof,
    /// The connection was reset (TCP RST).
    Reset,
    /// Any other transport error (truncated framing, protocol error, timeout).
    Error,
    /// The body was dropped unfinished by the reader (the client went away).
    Cancelled,
}

impl EndHow {
    /// The lowercase word used in output (`eof`, `reset`, `error`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        match self {
            EndHow::Eof => "eof",
            EndHow::Reset => "reset",
            EndHow::Error => "error",
            EndHow::Cancelled => "cancelled",
        }
    }
}

/// Which leg of the proxied connection ended a stream first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leg {
    /// proxy ↔ upstream server.
    Upstream,
    /// client ↔ proxy.
    Client,
}

impl Leg {
    /// The lowercase word used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Leg::Upstream => "upstream",
            Leg::Client => "client",
        }
    }
}

/// An HTTP header as seen on the wire (values that are not UTF-8 are written lossily).
pub type Header = (String, String);

/// The kinds of facts, tagged by `"kind"` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// The proxy started listening.
    ProxyStarted {
        /// Address the proxy listens on.
        listen: String,
        /// Upstream URL.
        upstream: String,
        /// mcpscope version.
        version: String,
    },
    /// A client request head arrived; a new exchange begins.
    StreamOpened {
        /// Exchange id.
        stream: StreamId,
        /// Client connection number (several exchanges may share one).
        conn: u64,
        /// HTTP method (`POST`, `GET`, `DELETE`, …).
        method: String,
        /// Path and query as requested by the client.
        path: String,
        /// Request headers (credentials redacted in recordings).
        headers: Vec<Header>,
        /// The server the exchange goes to (`scheme://host[:port]`), when the proxy serves
        /// several (forward-proxy mode); absent when it is the one upstream of `proxy_started`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// The response head was sent toward the client.
    ResponseHead {
        /// Exchange id.
        stream: StreamId,
        /// HTTP status code.
        status: u16,
        /// Response headers.
        headers: Vec<Header>,
    },
    /// One complete SSE event on a response stream.
    SseEvent {
        /// Exchange id.
        stream: StreamId,
        /// `id:` field, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// `event:` field, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event: Option<String>,
        /// `retry:` field in milliseconds, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry: Option<u64>,
        /// The joined `data:` lines, shared (the recorder, the view and a message parsed from
        /// them hold the one text).
        data: std::sync::Arc<str>,
        /// Offset of the event's first byte in the response body.
        start: u64,
        /// Offset one past the event's last byte (its blank line) in the response body.
        end: u64,
    },
    /// A JSON-RPC message (or batch) seen in a body or SSE event.
    Message {
        /// Exchange id.
        stream: StreamId,
        /// Who sent it.
        dir: Direction,
        /// The parsed JSON value: an object, or an array for a batch.
        body: Value,
    },
    /// Bytes that should have been a JSON-RPC message but were not.
    InvalidMessage {
        /// Exchange id.
        stream: StreamId,
        /// Who sent it.
        dir: Direction,
        /// Why it is invalid.
        reason: String,
        /// The offending text (truncated to a few KiB).
        raw: String,
    },
    /// A body ended (request or response).
    StreamEnded {
        /// Exchange id.
        stream: StreamId,
        /// Which body: `client_to_server` is the request body, `server_to_client` the response.
        dir: Direction,
        /// How it ended.
        how: EndHow,
        /// Which leg ended it.
        leg: Leg,
        /// Body bytes that passed.
        bytes: u64,
        /// Transport detail (error text), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The upstream could not be reached for this exchange, or did not connect or answer in
    /// time; the client got a 502 (a 504 when it timed out).
    UpstreamUnreachable {
        /// Exchange id.
        stream: StreamId,
        /// The cause.
        error: String,
    },
    /// The proxy injected a fault on an exchange.
    FaultInjected {
        /// Exchange id.
        stream: StreamId,
        /// The fault, in the rule grammar (`reset`, `eof`, `status:503`, …).
        fault: String,
        /// The rule or action that caused it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// The proxy answered a call whose stream died unresumable with a JSON-RPC error of its
    /// own (`--rescue`), so that the client stops waiting.
    CallRescued {
        /// Exchange id (the stream that died).
        stream: StreamId,
        /// The JSON-RPC id of the rescued request.
        id: Value,
        /// The error message written to the client (it names the death).
        message: String,
    },
    /// A note from the tool (e.g. a replay mismatch); shown, never interpreted.
    Note {
        /// Exchange id, if the note is about one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<StreamId>,
        /// The text.
        text: String,
    },
    /// The proxy changed forwarded bytes on purpose: a URL naming the upstream's own address
    /// rewritten to name the proxy's (the legacy transport's `endpoint`, so that the client posts
    /// through the proxy; OAuth protected-resource metadata: the document's `resource`, a
    /// `WWW-Authenticate` challenge's `resource_metadata`).
    Rewritten {
        /// Exchange id.
        stream: StreamId,
        /// What was rewritten (`endpoint`, `resource`, `resource_metadata`).
        what: String,
        /// The value the upstream sent.
        from: String,
        /// The value the client got.
        to: String,
    },
    /// A stdio server process was started (`mcpscope stdio`): the stream of kind stdio that
    /// carries every message of its session both ways (its stdin is the request direction,
    /// its stdout the response direction; each closing is a `stream_ended`).
    ProcessStarted {
        /// The stream id given to the process.
        stream: StreamId,
        /// Its process id.
        pid: u32,
        /// The command line (program and arguments).
        command: Vec<String>,
        /// The name given with `--name`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// One line the server process wrote to its stderr (without the line ending; a longer line
    /// is cut and ends with `…`).
    StderrLine {
        /// The process's stream.
        stream: StreamId,
        /// The text (invalid UTF-8 written lossily).
        line: String,
    },
    /// The server process ended: with an exit code, or killed by a signal.
    ProcessExited {
        /// The process's stream.
        stream: StreamId,
        /// Its exit code, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// The signal number that killed it, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
    /// An exchange through the forward proxy that is not MCP (a model API, telemetry, a
    /// download), or a CONNECT tunnelled blind: forwarded unchanged and only counted here,
    /// never its headers or bodies.
    Unobserved {
        /// Client connection number.
        conn: u64,
        /// The host (and port, when not the scheme's default) it went to.
        host: String,
        /// HTTP method (`CONNECT` for a blind tunnel).
        method: String,
        /// The path without its query (empty for a tunnel).
        path: String,
        /// The response status, when one came.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// Request body bytes (client to server; a tunnel's bytes that way).
        bytes_up: u64,
        /// Response body bytes (server to client; a tunnel's bytes that way).
        bytes_down: u64,
        /// Why the exchange ended other than cleanly, if it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

/// Matches the `stream` field of every kind once, for both `stream` and `stream_mut`.
macro_rules! stream_field {
    ($kind:expr, |$s:ident| $exchange:expr, |$n:ident| $note:expr) => {
        match $kind {
            EventKind::ProxyStarted { .. } | EventKind::Unobserved { .. } => None,
            EventKind::Note { stream: $n, .. } => $note,
            EventKind::StreamOpened { stream: $s, .. }
            | EventKind::ResponseHead { stream: $s, .. }
            | EventKind::SseEvent { stream: $s, .. }
            | EventKind::Message { stream: $s, .. }
            | EventKind::InvalidMessage { stream: $s, .. }
            | EventKind::StreamEnded { stream: $s, .. }
            | EventKind::UpstreamUnreachable { stream: $s, .. }
            | EventKind::FaultInjected { stream: $s, .. }
            | EventKind::CallRescued { stream: $s, .. }
            | EventKind::Rewritten { stream: $s, .. }
            | EventKind::ProcessStarted { stream: $s, .. }
            | EventKind::StderrLine { stream: $s, .. }
            | EventKind::ProcessExited { stream: $s, .. } => $exchange,
        }
    };
}

impl EventKind {
    /// The exchange this fact is about, if any.
    pub fn stream(&self) -> Option<StreamId> {
        stream_field!(self, |s| Some(*s), |n| *n)
    }

    /// The exchange this fact is about, to renumber it (e.g. when recordings are merged).
    pub fn stream_mut(&mut self) -> Option<&mut StreamId> {
        stream_field!(self, |s| Some(s), |n| n.as_mut())
    }

    /// Roughly the bytes the fact holds: a fixed part, plus its SSE data, an invalid
    /// message's raw text, or a message's body (its strings and a few bytes a value). The
    /// measure of every queue of events bounded in bytes.
    pub fn weight(&self) -> usize {
        256 + match self {
            EventKind::SseEvent { data, .. } => data.len(),
            EventKind::InvalidMessage { raw, .. } => raw.len(),
            EventKind::Message { body, .. } => value_weight(body),
            _ => 0,
        }
    }
}

/// Roughly the bytes a JSON value holds: its strings and keys, and 16 a value. Recursive, with
/// nothing allocated: a parsed value nests no deeper than the parser's recursion limit.
fn value_weight(value: &Value) -> usize {
    16 + match value {
        Value::String(text) => text.len(),
        Value::Array(items) => items.iter().map(value_weight).sum(),
        Value::Object(members) => members
            .iter()
            .map(|(key, member)| key.len() + value_weight(member))
            .sum(),
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// Case-insensitive lookup of a header value.
pub fn header<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Serializes timestamps as RFC 3339 with microseconds and `Z`.
pub mod rfc3339_micros {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `t` as RFC 3339 with microseconds.
    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Micros, true))
    }

    /// Reads any RFC 3339 timestamp.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_the_time_chrono_makes_to_the_microsecond() {
        // Across day boundaries, at the epoch and far ahead, with the day cached and not.
        for secs in [
            0,
            1,
            86_399,
            86_400,
            86_401,
            1_765_065_599,
            1_765_065_600,
            4_102_444_800,
        ] {
            for micros in [0, 1, 999_999] {
                let want = DateTime::from_timestamp(secs as i64, micros * 1_000).expect("in range");
                assert_eq!(unix_micros(secs, micros), Some(want), "{secs}.{micros}");
                assert_eq!(
                    unix_micros(secs, micros),
                    Some(want),
                    "{secs}.{micros} again"
                );
            }
        }
        let before = Utc::now();
        let stamp = Event::stamp();
        let after = Utc::now();
        assert_eq!(stamp.timestamp_subsec_nanos() % 1_000, 0);
        assert!(before - chrono::Duration::microseconds(1) <= stamp && stamp <= after);
    }

    #[test]
    fn event_round_trips_through_json() {
        let ev = Event::now(EventKind::StreamEnded {
            stream: 3,
            dir: Direction::ServerToClient,
            how: EndHow::Reset,
            leg: Leg::Upstream,
            bytes: 42,
            detail: Some("connection reset".into()),
        });
        let line = serde_json::to_string(&ev).expect("serialize");
        assert!(line.contains(r#""kind":"stream_ended""#), "{line}");
        assert!(line.contains(r#""how":"reset""#), "{line}");
        let back: Event = serde_json::from_str(&line).expect("deserialize");
        assert_eq!(back, ev);
    }
}
