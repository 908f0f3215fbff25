//! One event as one line of a version 2 recording, and back.
//!
//! Version 2 stores an SSE event's data once. An `sse_event` whose data is one line of JSON (an
//! object or an array) embeds it verbatim; any other data is a JSON string. The `message` or
//! `invalid_message` that live parsing derived from that data is written as a back-reference
//! (`"from_sse":true`, no body) when parsing the recorded data gives exactly that event; the
//! reader parses the data again with the same code. Every other event is written as in
//! version 1.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::event::{Direction, Event, EventKind, StreamId, rfc3339_micros};
use crate::wire::observe;

/// The last SSE data seen on each stream that no message has referred to yet. Writer and reader
/// keep the same one, so a back-reference means the same data on both sides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseMemory {
    last: HashMap<StreamId, String>,
}

impl SseMemory {
    /// Notes what an event does to the memory (before a message is resolved against it).
    fn remember(&mut self, kind: &EventKind) {
        match kind {
            EventKind::SseEvent { stream, data, .. } if data.is_empty() => {
                self.last.remove(stream);
            }
            EventKind::SseEvent { stream, data, .. } => {
                self.last.insert(*stream, data.clone());
            }
            EventKind::StreamEnded { stream, .. } => {
                self.last.remove(stream);
            }
            _ => {}
        }
    }

    /// Takes a stream's pending data (a message on a stream consumes it, whatever it is).
    fn take(&mut self, stream: StreamId) -> Option<String> {
        self.last.remove(&stream)
    }

    /// The pending data of every stream, sorted by stream (to restart reading mid-file).
    pub fn pending(&self) -> Vec<(StreamId, String)> {
        let mut pending: Vec<_> = self.last.iter().map(|(s, d)| (*s, d.clone())).collect();
        pending.sort_by_key(|(s, _)| *s);
        pending
    }

    /// A memory holding exactly `pending`.
    pub fn from_pending(pending: &[(StreamId, String)]) -> Self {
        Self {
            last: pending.iter().cloned().collect(),
        }
    }
}

/// An `sse_event` line as written.
#[derive(Serialize)]
struct SseOut<'a> {
    #[serde(serialize_with = "micros")]
    t: &'a DateTime<Utc>,
    kind: &'static str,
    stream: StreamId,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry: &'a Option<u64>,
    data: Data<'a>,
    start: u64,
    end: u64,
}

/// SSE data as written: verbatim JSON, or a string.
#[derive(Serialize)]
#[serde(untagged)]
enum Data<'a> {
    Raw(&'a RawValue),
    Text(&'a str),
}

/// An `sse_event` line as read (`kind` is known already).
#[derive(Deserialize)]
struct SseIn<'a> {
    #[serde(with = "rfc3339_micros")]
    t: DateTime<Utc>,
    stream: StreamId,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    retry: Option<u64>,
    #[serde(borrow)]
    data: &'a RawValue,
    start: u64,
    end: u64,
}

/// Which report a back-reference stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RefKind {
    Message,
    InvalidMessage,
}

/// A `message` or `invalid_message` derived from the stream's last SSE data.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackRef {
    #[serde(with = "rfc3339_micros")]
    t: DateTime<Utc>,
    kind: RefKind,
    stream: StreamId,
    dir: Direction,
    from_sse: bool,
}

fn micros<S: serde::Serializer>(t: &&DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    rfc3339_micros::serialize(t, s)
}

/// The data as a raw JSON value, when writing it verbatim reads back the same text: an object
/// or array on one line, with nothing around it.
fn raw_json(data: &str) -> Option<&RawValue> {
    let bytes = data.as_bytes();
    let framed = matches!(
        (bytes.first(), bytes.last()),
        (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']'))
    );
    if !framed || bytes.contains(&b'\n') {
        return None;
    }
    serde_json::from_str::<&RawValue>(data)
        .ok()
        .filter(|raw| raw.get().len() == data.len())
}

/// The report live parsing gives for SSE data (the tap's own code).
fn derived(stream: StreamId, dir: Direction, data: &str) -> EventKind {
    observe::message(stream, dir, data.as_bytes())
}

/// Writes events as version 2 lines.
#[derive(Debug, Default)]
pub struct Encoder {
    memory: SseMemory,
}

impl Encoder {
    /// Appends `event` as one line (without its newline) to `out`.
    pub fn encode(&mut self, event: &Event, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match &event.kind {
            EventKind::SseEvent {
                stream,
                id,
                event: name,
                retry,
                data,
                start,
                end,
            } => {
                let line = SseOut {
                    t: &event.t,
                    kind: "sse_event",
                    stream: *stream,
                    id,
                    event: name,
                    retry,
                    data: raw_json(data).map_or(Data::Text(data), Data::Raw),
                    start: *start,
                    end: *end,
                };
                serde_json::to_writer(&mut *out, &line)?;
            }
            EventKind::Message { stream, dir, .. }
            | EventKind::InvalidMessage { stream, dir, .. } => {
                let from_sse = self
                    .memory
                    .take(*stream)
                    .is_some_and(|data| derived(*stream, *dir, &data) == event.kind);
                if from_sse {
                    let kind = match event.kind {
                        EventKind::Message { .. } => RefKind::Message,
                        _ => RefKind::InvalidMessage,
                    };
                    let line = BackRef {
                        t: event.t,
                        kind,
                        stream: *stream,
                        dir: *dir,
                        from_sse,
                    };
                    serde_json::to_writer(&mut *out, &line)?;
                } else {
                    serde_json::to_writer(&mut *out, event)?;
                }
            }
            _ => serde_json::to_writer(&mut *out, event)?,
        }
        self.memory.remember(&event.kind);
        Ok(())
    }
}

/// Why a line is not an event.
#[derive(Debug)]
pub enum DecodeError {
    /// Not JSON, or JSON that is not an event.
    Json(serde_json::Error),
    /// A back-reference with nothing to refer to.
    Dangling(StreamId),
    /// A back-reference in a version 1 recording.
    BackRefInV1,
}

/// Reads version 1 and 2 lines back into events.
#[derive(Debug, Clone)]
pub struct Decoder {
    back_refs: bool,
    memory: SseMemory,
}

impl Decoder {
    /// A decoder for a recording of this format version, at its start.
    pub fn new(version: u32) -> Self {
        Self::resume(version, SseMemory::default())
    }

    /// A decoder restarted mid-file with the memory saved there.
    pub fn resume(version: u32, memory: SseMemory) -> Self {
        Self {
            back_refs: version >= 2,
            memory,
        }
    }

    /// Its memory (to save with an index point).
    pub fn memory(&self) -> &SseMemory {
        &self.memory
    }

    /// Decodes one line (without its newline).
    pub fn decode(&mut self, line: &[u8]) -> Result<Event, DecodeError> {
        let event = match kind_of(line).as_deref() {
            Some("sse_event") => sse_event(line)?,
            Some("message" | "invalid_message") if contains(line, b"\"from_sse\"") => {
                match serde_json::from_slice::<BackRef>(line) {
                    Ok(back) => self.resolve(back)?,
                    Err(_) => serde_json::from_slice(line).map_err(DecodeError::Json)?,
                }
            }
            _ => serde_json::from_slice::<Event>(line).map_err(DecodeError::Json)?,
        };
        if let EventKind::Message { stream, .. } | EventKind::InvalidMessage { stream, .. } =
            &event.kind
        {
            self.memory.take(*stream);
        }
        self.memory.remember(&event.kind);
        Ok(event)
    }

    fn resolve(&mut self, back: BackRef) -> Result<Event, DecodeError> {
        if !self.back_refs || !back.from_sse {
            return Err(DecodeError::BackRefInV1);
        }
        let data = self
            .memory
            .take(back.stream)
            .ok_or(DecodeError::Dangling(back.stream))?;
        let kind = derived(back.stream, back.dir, &data);
        let matches = matches!(
            (&kind, back.kind),
            (EventKind::Message { .. }, RefKind::Message)
                | (EventKind::InvalidMessage { .. }, RefKind::InvalidMessage)
        );
        if !matches {
            // The data no longer parses the way the writer saw it parse: refuse rather than
            // yield an event that was never observed.
            return Err(DecodeError::Dangling(back.stream));
        }
        Ok(Event { t: back.t, kind })
    }
}

fn sse_event(line: &[u8]) -> Result<Event, DecodeError> {
    let sse: SseIn<'_> = serde_json::from_slice(line).map_err(DecodeError::Json)?;
    let raw = sse.data.get();
    let data = if raw.starts_with('"') {
        serde_json::from_str::<String>(raw).map_err(DecodeError::Json)?
    } else {
        raw.to_string()
    };
    Ok(Event {
        t: sse.t,
        kind: EventKind::SseEvent {
            stream: sse.stream,
            id: sse.id,
            event: sse.event,
            retry: sse.retry,
            data,
            start: sse.start,
            end: sse.end,
        },
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The line's `kind`: read from the writer's layout (`{"t":"…","kind":"…"`) without parsing,
/// or, for any other layout, by parsing the line for it alone.
fn kind_of(line: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    const T: &[u8] = b"{\"t\":\"";
    const KIND: &[u8] = b"\",\"kind\":\"";
    if let Some(rest) = line.strip_prefix(T)
        && let Some(quote) = rest.iter().position(|b| *b == b'"')
        && let Some(after) = rest[quote..].strip_prefix(KIND)
        && let Some(len) = after.iter().position(|b| *b == b'"')
        && let Ok(kind) = std::str::from_utf8(&after[..len])
    {
        return Some(std::borrow::Cow::Borrowed(kind));
    }
    #[derive(Deserialize)]
    struct Probe {
        kind: String,
    }
    serde_json::from_slice::<Probe>(line)
        .ok()
        .map(|p| std::borrow::Cow::Owned(p.kind))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::redact::Redactor;

    fn at(kind: EventKind) -> Event {
        Event::now(kind)
    }

    fn sse(stream: StreamId, data: &str) -> EventKind {
        EventKind::SseEvent {
            stream,
            id: Some("7".into()),
            event: None,
            retry: None,
            data: data.into(),
            start: 10,
            end: 20,
        }
    }

    fn round_trip(events: &[Event]) -> (Vec<String>, Vec<Event>) {
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(2);
        let mut lines = Vec::new();
        let mut back = Vec::new();
        for event in events {
            let mut line = Vec::new();
            encoder.encode(event, &mut line).expect("encode");
            back.push(decoder.decode(&line).unwrap_or_else(|e| panic!("{e:?}")));
            lines.push(String::from_utf8(line).expect("utf-8"));
        }
        (lines, back)
    }

    /// The live pair for SSE data: the event and what the tap derives from it.
    fn live_pair(stream: StreamId, data: &str) -> [Event; 2] {
        [
            at(sse(stream, data)),
            at(derived(stream, Direction::ServerToClient, data)),
        ]
    }

    #[test]
    fn sse_data_is_stored_once_and_read_back_exactly() {
        let data = r#"{"jsonrpc":"2.0","id":1,"result":{"z":1,"a":[1.5,"\u00e9\n"]}}"#;
        let mut events = live_pair(3, data).to_vec();
        events.extend(live_pair(3, "not json"));
        events.extend(live_pair(4, "\"a string\""));
        events.extend(live_pair(4, "{\"two\":\ndata}"));
        events.push(at(sse(4, "")));
        let (lines, back) = round_trip(&events);
        assert_eq!(back, events);
        assert!(
            lines[0].contains(&format!("\"data\":{data},")),
            "{}",
            lines[0]
        );
        assert!(lines[1].ends_with("\"from_sse\":true}"), "{}", lines[1]);
        assert!(!lines[1].contains("body"));
        assert!(
            lines[3].contains("from_sse"),
            "an invalid message refers too"
        );
        assert!(
            lines[4].contains(r#""data":"\"a string\"""#),
            "{}",
            lines[4]
        );
        assert!(
            lines[6].contains(r#""data":"{\"two\":\ndata}""#),
            "{}",
            lines[6]
        );
        // The key order of the restored body is the wire's.
        let restored = serde_json::to_string(&back[1].kind).expect("json");
        assert!(restored.contains(r#"{"z":1,"a""#), "{restored}");
    }

    #[test]
    fn a_body_that_is_not_the_data_is_written_whole() {
        let data = r#"{"jsonrpc":"2.0","method":"n"}"#;
        let other = EventKind::Message {
            stream: 3,
            dir: Direction::ServerToClient,
            body: json!({"jsonrpc":"2.0","method":"other"}),
        };
        let events = [
            at(sse(3, data)),
            at(other),
            at(derived(3, Direction::ServerToClient, data)),
        ];
        let (lines, back) = round_trip(&events);
        assert_eq!(back, events);
        assert!(lines[1].contains("\"body\""));
        assert!(
            lines[2].contains("\"body\""),
            "the data was consumed by the first"
        );
    }

    #[test]
    fn redacted_data_and_body_still_refer_when_they_agree() {
        let redactor = Redactor::new();
        let data = r#"{"jsonrpc":"2.0","id":2,"result":{"apiKey":"LEAK","text":"x"}}"#;
        let mut events = live_pair(5, data).to_vec();
        for event in &mut events {
            redactor.event(&mut event.kind);
        }
        let (lines, back) = round_trip(&events);
        assert_eq!(back, events);
        assert!(lines[1].contains("from_sse"), "{}", lines[1]);
        assert!(!lines.concat().contains("LEAK"));
        // A body redacted while its data was not (a key only the body's policy knows) stays
        // whole.
        let custom = Redactor::new().with_json_keys(&["text"]);
        let mut events = live_pair(5, data).to_vec();
        if let EventKind::Message { body, .. } = &mut events[1].kind {
            custom.json(body);
        }
        let (lines, back) = round_trip(&events);
        assert_eq!(back, events);
        assert!(lines[1].contains("\"body\""), "{}", lines[1]);
    }

    #[test]
    fn back_references_need_their_data() {
        let line = br#"{"t":"2025-01-01T00:00:00Z","kind":"message","stream":9,"dir":"server_to_client","from_sse":true}"#;
        assert!(matches!(
            Decoder::new(2).decode(line),
            Err(DecodeError::Dangling(9))
        ));
        assert!(matches!(
            Decoder::new(1).decode(line),
            Err(DecodeError::BackRefInV1)
        ));
        let memory = SseMemory::from_pending(&[(9, r#"{"jsonrpc":"2.0","method":"n"}"#.into())]);
        assert!(Decoder::resume(2, memory).decode(line).is_ok());
    }

    #[test]
    fn lines_in_another_key_order_are_read_too() {
        let line = br#"{"kind":"sse_event","data":{"a":1},"t":"2025-01-01T00:00:00Z","stream":1,"start":0,"end":9}"#;
        let event = Decoder::new(2).decode(line).expect("decodes");
        assert!(matches!(event.kind, EventKind::SseEvent { data, .. } if data == r#"{"a":1}"#));
    }
}
