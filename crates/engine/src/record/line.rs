//! One event as one line of a version 2 recording, and back.
//!
//! Version 2 stores an SSE event's data once. An `sse_event` whose data is one line of JSON (an
//! object or an array) embeds it verbatim; any other data is a JSON string. The `message` or
//! `invalid_message` that live parsing derived from that data is written as a back-reference
//! (`"from_sse":true`, no body) when parsing the recorded data gives exactly that event; the
//! reader parses the data again with the same code. Two more things are written relative to
//! what came before: `t`, after the first event, as microseconds since the previous event; and a
//! head's header that equals one of the previous head's (requests and responses apart) as that
//! header's index. Every other field is written as in version 1.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::MAX_LINE_BYTES;
use crate::event::{Direction, EndHow, Event, EventKind, Header, Leg, StreamId, rfc3339_micros};
use crate::wire::observe;

/// What a line may refer to: the previous event's time, the previous request and response
/// heads' headers, and the last SSE data of each stream that no message has referred to yet.
/// Writer and reader keep the same one, so a reference means the same thing on both sides.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Context {
    sse: HashMap<StreamId, Arc<str>>,
    t: Option<DateTime<Utc>>,
    request_headers: Vec<Header>,
    response_headers: Vec<Header>,
}

impl Context {
    /// Notes what an event does to the context (after the event's line is written or read).
    fn remember(&mut self, event: &Event) {
        self.t = Some(event.t);
        match &event.kind {
            EventKind::SseEvent { stream, data, .. } if data.is_empty() => {
                self.sse.remove(stream);
            }
            EventKind::SseEvent { stream, data, .. } => {
                self.sse.insert(*stream, data.clone());
            }
            EventKind::StreamEnded { stream, .. } => {
                self.sse.remove(stream);
            }
            EventKind::StreamOpened { headers, .. } => self.request_headers.clone_from(headers),
            EventKind::ResponseHead { headers, .. } => self.response_headers.clone_from(headers),
            _ => {}
        }
    }

    /// Takes a stream's pending data (a message on a stream consumes it, whatever it is).
    fn take(&mut self, stream: StreamId) -> Option<Arc<str>> {
        self.sse.remove(&stream)
    }

    /// How many streams have SSE data a back-reference may still refer to.
    pub fn pending_sse(&self) -> usize {
        self.sse.len()
    }
}

/// An event's time as written: absolute (the first event, or a time finer than microseconds),
/// or microseconds since the previous event.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
enum Stamp {
    Delta(i64),
    Absolute(#[serde(serialize_with = "exact_time")] DateTime<Utc>),
}

/// A number is a delta, a string an RFC 3339 time. Read by a visitor of its own: serde's
/// untagged enums buffer the value to try each variant, on every line of a recording.
impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Stamp;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("microseconds since the previous event, or an RFC 3339 time")
            }
            fn visit_i64<E: serde::de::Error>(self, micros: i64) -> Result<Stamp, E> {
                Ok(Stamp::Delta(micros))
            }
            fn visit_u64<E: serde::de::Error>(self, micros: u64) -> Result<Stamp, E> {
                i64::try_from(micros)
                    .map(Stamp::Delta)
                    .map_err(|_| E::custom("a time delta past i64"))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Stamp, E> {
                DateTime::parse_from_rfc3339(text)
                    .map(|t| Stamp::Absolute(t.with_timezone(&Utc)))
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// RFC 3339 with microseconds, or with as many digits as the time has when it is finer.
fn exact_time<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    if t.timestamp_subsec_nanos().is_multiple_of(1000) {
        rfc3339_micros::serialize(t, s)
    } else {
        s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
    }
}

/// One header as written: an index into the previous head's headers, or the pair.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum HeaderItem {
    Same(usize),
    Pair(String, String),
}

/// Headers written against the previous head's.
struct HeadersOut<'a> {
    headers: &'a [Header],
    previous: &'a [Header],
}

impl Serialize for HeadersOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.headers.len()))?;
        for pair in self.headers {
            match self.previous.iter().position(|p| p == pair) {
                Some(index) => seq.serialize_element(&index)?,
                None => seq.serialize_element(pair)?,
            }
        }
        seq.end()
    }
}

/// Any event but the ones below, as written.
#[derive(Serialize)]
struct PlainOut<'a> {
    t: Stamp,
    #[serde(flatten)]
    kind: &'a EventKind,
}

/// Any event but the ones below, as read.
#[derive(Deserialize)]
struct PlainIn {
    t: Stamp,
    #[serde(flatten)]
    kind: EventKind,
}

/// A `stream_opened` line.
#[derive(Serialize)]
struct OpenedOut<'a> {
    t: Stamp,
    kind: &'static str,
    stream: StreamId,
    conn: u64,
    method: &'a str,
    path: &'a str,
    headers: HeadersOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a str>,
}

/// A `stream_opened` line as read (`kind` is known already).
#[derive(Deserialize)]
struct OpenedIn {
    t: Stamp,
    stream: StreamId,
    conn: u64,
    method: String,
    path: String,
    headers: Vec<HeaderItem>,
    #[serde(default)]
    origin: Option<String>,
}

/// A `response_head` line.
#[derive(Serialize)]
struct HeadOut<'a> {
    t: Stamp,
    kind: &'static str,
    stream: StreamId,
    status: u16,
    headers: HeadersOut<'a>,
}

/// A `message` line written out whole, as read: its body parsed straight into a value (the
/// flattened [`PlainIn`] would gather the whole line first and parse the body twice).
#[derive(Deserialize)]
struct MessageIn {
    t: Stamp,
    stream: StreamId,
    dir: Direction,
    body: Value,
}

/// A `stream_ended` line as read (the fields of [`EventKind::StreamEnded`]).
#[derive(Deserialize)]
struct EndedIn {
    t: Stamp,
    stream: StreamId,
    dir: Direction,
    how: EndHow,
    leg: Leg,
    bytes: u64,
    #[serde(default)]
    detail: Option<String>,
}

/// A `response_head` line as read.
#[derive(Deserialize)]
struct HeadIn {
    t: Stamp,
    stream: StreamId,
    status: u16,
    headers: Vec<HeaderItem>,
}

/// An `sse_event` line as read (`kind` is known already).
#[derive(Deserialize)]
struct SseIn<'a> {
    t: Stamp,
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
    t: Stamp,
    kind: RefKind,
    stream: StreamId,
    dir: Direction,
    from_sse: bool,
}

/// Whether SSE data is written verbatim (it then reads back as the same text): an object or
/// array on one line, with nothing around it, that is one JSON value. `parsed`: its writer
/// already parsed it as a JSON-RPC message, so it is not parsed again.
fn embeds_verbatim(data: &str, parsed: bool) -> bool {
    let bytes = data.as_bytes();
    let framed = matches!(
        (bytes.first(), bytes.last()),
        (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']'))
    );
    if !framed || memchr::memchr(b'\n', bytes).is_some() {
        return false;
    }
    debug_assert!(
        !parsed || is_one_json_value(data),
        "not one JSON value: {data}"
    );
    parsed || is_one_json_value(data)
}

/// Whether `data` is exactly one JSON value.
fn is_one_json_value(data: &str) -> bool {
    serde_json::from_str::<&RawValue>(data).is_ok_and(|raw| raw.get().len() == data.len())
}

/// An `sse_event` line as written, up to its data ([`write_sse_line`] writes the rest).
struct SseHead<'a> {
    t: Stamp,
    stream: StreamId,
    id: &'a Option<String>,
    event: &'a Option<String>,
    retry: Option<u64>,
}

/// Writes an `sse_event` line: its head, then its data, embedded as it is when `verbatim` (one
/// JSON value on one line, checked by the caller), else as a JSON string, then its offsets.
fn write_sse_line(
    out: &mut Vec<u8>,
    head: &SseHead<'_>,
    data: &str,
    verbatim: bool,
    start: u64,
    end: u64,
) -> serde_json::Result<()> {
    // Written field by field (the line's layout is fixed): what serde writes for the head,
    // without going through it for each of the millions of events a flood brings.
    let mut digits = itoa::Buffer::new();
    write_stamp(out, head.t)?;
    out.extend_from_slice(b",\"kind\":\"sse_event\",\"stream\":");
    out.extend_from_slice(digits.format(head.stream).as_bytes());
    if let Some(id) = head.id {
        out.extend_from_slice(b",\"id\":");
        serde_json::to_writer(&mut *out, id)?;
    }
    if let Some(event) = head.event {
        out.extend_from_slice(b",\"event\":");
        serde_json::to_writer(&mut *out, event)?;
    }
    if let Some(retry) = head.retry {
        out.extend_from_slice(b",\"retry\":");
        out.extend_from_slice(digits.format(retry).as_bytes());
    }
    out.extend_from_slice(b",\"data\":");
    if verbatim {
        out.extend_from_slice(data.as_bytes());
    } else {
        serde_json::to_writer(&mut *out, data)?;
    }
    out.extend_from_slice(b",\"start\":");
    out.extend_from_slice(digits.format(start).as_bytes());
    out.extend_from_slice(b",\"end\":");
    out.extend_from_slice(digits.format(end).as_bytes());
    out.push(b'}');
    Ok(())
}

/// Writes `{"t":…` of a line: a delta's digits, an absolute time as serde writes it.
fn write_stamp(out: &mut Vec<u8>, t: Stamp) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"t\":");
    match t {
        Stamp::Delta(micros) => {
            out.extend_from_slice(itoa::Buffer::new().format(micros).as_bytes())
        }
        Stamp::Absolute(_) => serde_json::to_writer(&mut *out, &t)?,
    }
    Ok(())
}

/// Writes a [`BackRef`] line (`from_sse` true) field by field, as serde writes the struct.
fn write_back_ref(
    out: &mut Vec<u8>,
    t: Stamp,
    kind: RefKind,
    stream: StreamId,
    dir: Direction,
) -> serde_json::Result<()> {
    write_stamp(out, t)?;
    out.extend_from_slice(match kind {
        RefKind::Message => b",\"kind\":\"message\",\"stream\":".as_slice(),
        RefKind::InvalidMessage => b",\"kind\":\"invalid_message\",\"stream\":".as_slice(),
    });
    out.extend_from_slice(itoa::Buffer::new().format(stream).as_bytes());
    out.extend_from_slice(match dir {
        Direction::ClientToServer => b",\"dir\":\"client_to_server\",\"from_sse\":true}".as_slice(),
        Direction::ServerToClient => b",\"dir\":\"server_to_client\",\"from_sse\":true}".as_slice(),
    });
    Ok(())
}

/// The report live parsing gives for SSE data (the tap's own code).
fn derived(stream: StreamId, dir: Direction, data: &str) -> EventKind {
    observe::message_text(stream, dir, data)
}

/// Nesting a message body may have for [`same_as_derived`] to answer without parsing: well
/// under the parser's own limit, past which a reader would derive a different body.
const SHALLOW_ENOUGH: usize = 64;

/// The largest buffer [`same_as_derived`] keeps between messages.
const SCRATCH_KEPT: usize = 1 << 20;

/// Whether `kind`, a message from `stream`, is what a reader derives from the SSE `data`
/// ([`derived`]). The common case is answered without parsing: a body that is a JSON-RPC
/// message (an object, or a batch of objects) and writes out as exactly `data` is what parsing
/// `data` gives back. Anything else is parsed and compared.
fn same_as_derived(
    kind: &EventKind,
    stream: StreamId,
    dir: Direction,
    data: &str,
    scratch: &mut Vec<u8>,
) -> bool {
    if let EventKind::Message { body, .. } = kind {
        let message = match body {
            Value::Object(_) => true,
            Value::Array(items) => !items.is_empty() && items.iter().all(Value::is_object),
            _ => false,
        };
        if message && depth_below(body, SHALLOW_ENOUGH) {
            scratch.clear();
            let same =
                serde_json::to_writer(&mut *scratch, body).is_ok() && scratch == data.as_bytes();
            // The buffer is kept for the next message, unless a large one grew it.
            if scratch.capacity() > SCRATCH_KEPT {
                *scratch = Vec::new();
            }
            if same {
                return true;
            }
        }
    }
    derived(stream, dir, data) == *kind
}

/// Whether `value` nests less than `limit` deep.
fn depth_below(value: &Value, limit: usize) -> bool {
    if limit == 0 {
        return false;
    }
    match value {
        Value::Object(map) => map.values().all(|v| depth_below(v, limit - 1)),
        Value::Array(items) => items.iter().all(|v| depth_below(v, limit - 1)),
        _ => true,
    }
}

/// Writes events as version 2 lines.
#[derive(Debug, Default)]
pub struct Encoder {
    context: Context,
    /// A message body written out, to compare with the SSE data it came in.
    scratch: Vec<u8>,
    /// The stream of the last event written when it was an SSE event with data (the one a
    /// message known to derive from it may refer to without comparing).
    last_sse: Option<StreamId>,
}

impl Encoder {
    fn stamp(&self, t: DateTime<Utc>) -> Stamp {
        let whole_micros = |t: DateTime<Utc>| t.timestamp_subsec_nanos().is_multiple_of(1000);
        match self.context.t {
            Some(previous) if whole_micros(t) && whole_micros(previous) => (t - previous)
                .num_microseconds()
                .map_or(Stamp::Absolute(t), Stamp::Delta),
            _ => Stamp::Absolute(t),
        }
    }

    /// Appends `event` as one line (without its newline) to `out`. An event whose line would
    /// hold more than [`MAX_LINE_BYTES`] is written as a note saying what was left out, and
    /// the lines after it refer only to what a reader saw.
    pub fn encode(&mut self, event: &Event, out: &mut Vec<u8>) -> serde_json::Result<()> {
        self.encode_known(event, false, out)
    }

    /// [`Encoder::encode`], told what its writer knows of `event`: for a message, that it is
    /// exactly what its stream's last SSE data parses to (its writer parsed it from there and
    /// changed neither): it then refers to the data without comparing; for an SSE event, that
    /// its data parsed as a JSON-RPC message (one JSON value): it is then embedded without
    /// being parsed again.
    pub fn encode_known(
        &mut self,
        event: &Event,
        known: bool,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<()> {
        let start = out.len();
        // Only the data the event right before it left on its own stream.
        let derived = known && self.last_sse.is_some() && self.last_sse == event.kind.stream();
        self.last_sse = None;
        let parsed = known && matches!(event.kind, EventKind::SseEvent { .. });
        let taken = self.write(event, derived || parsed, out)?;
        let length = out.len() - start;
        if length <= MAX_LINE_BYTES {
            self.context.remember(event);
            if let EventKind::SseEvent { stream, data, .. } = &event.kind
                && !data.is_empty()
            {
                self.last_sse = Some(*stream);
            }
            return Ok(());
        }
        let text = left_out(&out[start..], length);
        out.truncate(start);
        out.shrink_to(start.max(1024));
        let stream = event.kind.stream();
        // A reader that never sees the message leaves the stream's SSE data pending.
        if let (Some(stream), Some(data)) = (stream, taken) {
            self.context.sse.insert(stream, data);
        }
        let note = Event::at(event.t, EventKind::Note { stream, text });
        self.write(&note, false, out)?;
        self.context.remember(&note);
        Ok(())
    }

    /// Appends `event`'s line to `out` without noting what it does to the context; returns the
    /// SSE data a message took from its stream. `known`: the message derives from its stream's
    /// data, or the SSE event's data is known to be one JSON value ([`Encoder::encode_known`]).
    fn write(
        &mut self,
        event: &Event,
        known: bool,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<Option<Arc<str>>> {
        let t = self.stamp(event.t);
        let mut taken = None;
        let context = &mut self.context;
        let scratch = &mut self.scratch;
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
                // Data known to be one JSON value is embedded without parsing it again.
                let verbatim = embeds_verbatim(data, known);
                let head = SseHead {
                    t,
                    stream: *stream,
                    id,
                    event: name,
                    retry: *retry,
                };
                write_sse_line(out, &head, data, verbatim, *start, *end)?;
            }
            EventKind::StreamOpened {
                stream,
                conn,
                method,
                path,
                headers,
                origin,
            } => {
                let line = OpenedOut {
                    t,
                    kind: "stream_opened",
                    stream: *stream,
                    conn: *conn,
                    method,
                    path,
                    headers: HeadersOut {
                        headers,
                        previous: &context.request_headers,
                    },
                    origin: origin.as_deref(),
                };
                serde_json::to_writer(&mut *out, &line)?;
            }
            EventKind::ResponseHead {
                stream,
                status,
                headers,
            } => {
                let line = HeadOut {
                    t,
                    kind: "response_head",
                    stream: *stream,
                    status: *status,
                    headers: HeadersOut {
                        headers,
                        previous: &context.response_headers,
                    },
                };
                serde_json::to_writer(&mut *out, &line)?;
            }
            EventKind::Message { stream, dir, .. }
            | EventKind::InvalidMessage { stream, dir, .. } => {
                taken = context.take(*stream);
                let from_sse = taken.as_ref().is_some_and(|data| {
                    known || same_as_derived(&event.kind, *stream, *dir, data, scratch)
                });
                if from_sse {
                    let kind = match event.kind {
                        EventKind::Message { .. } => RefKind::Message,
                        _ => RefKind::InvalidMessage,
                    };
                    write_back_ref(out, t, kind, *stream, *dir)?;
                } else {
                    let kind = &event.kind;
                    serde_json::to_writer(&mut *out, &PlainOut { t, kind })?;
                }
            }
            kind => serde_json::to_writer(&mut *out, &PlainOut { t, kind })?,
        }
        Ok(taken)
    }
}

/// The text of the note that stands for an event too large for one line (`line`, as it would
/// have been written, names its kind).
fn left_out(line: &[u8], length: usize) -> String {
    let what = kind_of(line).map_or_else(|| "event".to_string(), |kind| kind.into_owned());
    format!(
        "not recorded: a {what} event of {} MiB as a line, past the {} MiB a recording line \
         may hold",
        length.div_ceil(1 << 20),
        MAX_LINE_BYTES >> 20
    )
}

/// Why a line is not an event.
#[derive(Debug)]
pub enum DecodeError {
    /// Not JSON, or JSON that is not an event.
    Json(serde_json::Error),
    /// A back-reference with nothing to refer to.
    Dangling(StreamId),
    /// A reference (to SSE data, a header, a time) in a version 1 recording.
    ReferenceInV1,
    /// A header index past the previous head's headers.
    NoSuchHeader(usize),
    /// A relative time before any absolute one.
    NoTimeBase,
}

/// Reads version 1 and 2 lines back into events.
#[derive(Debug, Clone)]
pub struct Decoder {
    references: bool,
    context: Context,
}

impl Decoder {
    /// A decoder for a recording of this format version, at its start.
    pub fn new(version: u32) -> Self {
        Self::resume(version, Context::default())
    }

    /// A decoder restarted mid-file with the context saved there.
    pub fn resume(version: u32, context: Context) -> Self {
        Self {
            references: version >= 2,
            context,
        }
    }

    /// Its context (to save with an index point).
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn time(&self, stamp: Stamp) -> Result<DateTime<Utc>, DecodeError> {
        match stamp {
            Stamp::Absolute(t) => Ok(t),
            Stamp::Delta(_) if !self.references => Err(DecodeError::ReferenceInV1),
            Stamp::Delta(micros) => self
                .context
                .t
                .and_then(|t| t.checked_add_signed(TimeDelta::microseconds(micros)))
                .ok_or(DecodeError::NoTimeBase),
        }
    }

    fn headers(&self, items: Vec<HeaderItem>, request: bool) -> Result<Vec<Header>, DecodeError> {
        let previous = if request {
            &self.context.request_headers
        } else {
            &self.context.response_headers
        };
        items
            .into_iter()
            .map(|item| match item {
                HeaderItem::Pair(name, value) => Ok((name, value)),
                HeaderItem::Same(_) if !self.references => Err(DecodeError::ReferenceInV1),
                HeaderItem::Same(index) => previous
                    .get(index)
                    .cloned()
                    .ok_or(DecodeError::NoSuchHeader(index)),
            })
            .collect()
    }

    /// Decodes one line (without its newline).
    pub fn decode(&mut self, line: &[u8]) -> Result<Event, DecodeError> {
        let json = |e| DecodeError::Json(e);
        let event = match kind_of(line).as_deref() {
            Some("sse_event") => self.sse_event(line)?,
            Some("stream_opened") => {
                let o: OpenedIn = serde_json::from_slice(line).map_err(json)?;
                let kind = EventKind::StreamOpened {
                    stream: o.stream,
                    conn: o.conn,
                    method: o.method,
                    path: o.path,
                    headers: self.headers(o.headers, true)?,
                    origin: o.origin,
                };
                Event::at(self.time(o.t)?, kind)
            }
            Some("response_head") => {
                let h: HeadIn = serde_json::from_slice(line).map_err(json)?;
                let kind = EventKind::ResponseHead {
                    stream: h.stream,
                    status: h.status,
                    headers: self.headers(h.headers, false)?,
                };
                Event::at(self.time(h.t)?, kind)
            }
            Some("message" | "invalid_message") if contains(line, b"\"from_sse\"") => {
                match serde_json::from_slice::<BackRef>(line) {
                    Ok(back) => self.resolve(back)?,
                    Err(_) => self.plain(line)?,
                }
            }
            Some("message") => {
                let m: MessageIn = serde_json::from_slice(line).map_err(json)?;
                let kind = EventKind::Message {
                    stream: m.stream,
                    dir: m.dir,
                    body: m.body,
                };
                Event::at(self.time(m.t)?, kind)
            }
            Some("stream_ended") => {
                let e: EndedIn = serde_json::from_slice(line).map_err(json)?;
                let kind = EventKind::StreamEnded {
                    stream: e.stream,
                    dir: e.dir,
                    how: e.how,
                    leg: e.leg,
                    bytes: e.bytes,
                    detail: e.detail,
                };
                Event::at(self.time(e.t)?, kind)
            }
            _ => self.plain(line)?,
        };
        if let EventKind::Message { stream, .. } | EventKind::InvalidMessage { stream, .. } =
            &event.kind
        {
            self.context.take(*stream);
        }
        self.context.remember(&event);
        Ok(event)
    }

    fn plain(&self, line: &[u8]) -> Result<Event, DecodeError> {
        let plain: PlainIn = serde_json::from_slice(line).map_err(DecodeError::Json)?;
        Ok(Event::at(self.time(plain.t)?, plain.kind))
    }

    fn resolve(&mut self, back: BackRef) -> Result<Event, DecodeError> {
        if !self.references || !back.from_sse {
            return Err(DecodeError::ReferenceInV1);
        }
        let t = self.time(back.t)?;
        let data = self
            .context
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
        let mut event = Event::at(t, kind);
        if matches!(event.kind, EventKind::Message { .. }) {
            event.source = Some(data);
        }
        Ok(event)
    }

    fn sse_event(&self, line: &[u8]) -> Result<Event, DecodeError> {
        let sse: SseIn<'_> = serde_json::from_slice(line).map_err(DecodeError::Json)?;
        let raw = sse.data.get();
        let data: Arc<str> = if raw.starts_with('"') {
            serde_json::from_str::<String>(raw)
                .map_err(DecodeError::Json)?
                .into()
        } else {
            raw.into()
        };
        let kind = EventKind::SseEvent {
            stream: sse.stream,
            id: sse.id,
            event: sse.event,
            retry: sse.retry,
            data,
            start: sse.start,
            end: sse.end,
        };
        Ok(Event::at(self.time(sse.t)?, kind))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// The line's `kind`: read from the writer's layout (`{"t":…,"kind":"…"`, `t` a string or a
/// number) without parsing, or, for any other layout, by parsing the line for it alone.
fn kind_of(line: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    const T: &[u8] = b"{\"t\":";
    const KIND: &[u8] = b",\"kind\":\"";
    if let Some(rest) = line.strip_prefix(T) {
        let t_len = match rest.first() {
            Some(b'"') => rest[1..].iter().position(|b| *b == b'"').map(|q| q + 2),
            _ => rest.iter().position(|b| *b == b','),
        };
        if let Some(after) = t_len.and_then(|len| rest[len..].strip_prefix(KIND))
            && let Some(len) = after.iter().position(|b| *b == b'"')
            && let Ok(kind) = std::str::from_utf8(&after[..len])
        {
            return Some(std::borrow::Cow::Borrowed(kind));
        }
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

    #[test]
    fn a_stamp_reads_as_a_delta_or_a_time_and_nothing_else() {
        let read = |text: &str| serde_json::from_str::<Stamp>(text);
        assert!(matches!(read("7"), Ok(Stamp::Delta(7))));
        assert!(matches!(read("-3"), Ok(Stamp::Delta(-3))));
        assert!(matches!(
            read("9223372036854775807"),
            Ok(Stamp::Delta(i64::MAX))
        ));
        let t = "2026-01-02T03:04:05.123456Z"
            .parse::<DateTime<Utc>>()
            .expect("time");
        assert!(
            matches!(read("\"2026-01-02T03:04:05.123456Z\""), Ok(Stamp::Absolute(x)) if x == t)
        );
        assert!(
            matches!(read("\"2026-01-02T04:04:05.123456+01:00\""), Ok(Stamp::Absolute(x)) if x == t)
        );
        for bad in [
            "1.5",
            "18446744073709551615",
            "\"yesterday\"",
            "null",
            "[]",
            "{}",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    /// The heads written field by field are byte for byte what serde writes for them.
    #[test]
    fn hand_written_heads_are_what_serde_writes() {
        #[derive(Serialize)]
        struct SerdeSseHead<'a> {
            t: Stamp,
            kind: &'static str,
            stream: StreamId,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            event: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            retry: &'a Option<u64>,
        }
        let absolute = "2026-01-02T03:04:05.123456789Z"
            .parse::<DateTime<Utc>>()
            .expect("time");
        let stamps = [
            Stamp::Delta(0),
            Stamp::Delta(-17),
            Stamp::Delta(i64::MAX),
            Stamp::Absolute(absolute),
            Stamp::Absolute(chrono::Timelike::with_nanosecond(&absolute, 123_000).expect("micros")),
        ];
        let texts = [
            None,
            Some(String::new()),
            Some("a \"quoted\"\n\u{1}é".to_string()),
        ];
        for t in stamps {
            for id in &texts {
                for event in &texts {
                    for retry in [None, Some(0), Some(u64::MAX)] {
                        let mut ours = Vec::new();
                        let head = SseHead {
                            t,
                            stream: 42,
                            id,
                            event,
                            retry,
                        };
                        write_sse_line(&mut ours, &head, "{}", true, 3, 9).expect("writes");
                        let mut theirs = serde_json::to_vec(&SerdeSseHead {
                            t,
                            kind: "sse_event",
                            stream: 42,
                            id,
                            event,
                            retry: &retry,
                        })
                        .expect("serde");
                        theirs.pop();
                        theirs.extend_from_slice(b",\"data\":{},\"start\":3,\"end\":9}");
                        assert_eq!(
                            String::from_utf8_lossy(&ours),
                            String::from_utf8_lossy(&theirs)
                        );
                    }
                }
            }
            for kind in [RefKind::Message, RefKind::InvalidMessage] {
                for dir in [Direction::ClientToServer, Direction::ServerToClient] {
                    let mut ours = Vec::new();
                    write_back_ref(&mut ours, t, kind, u64::MAX, dir).expect("writes");
                    let theirs = serde_json::to_vec(&BackRef {
                        t,
                        kind,
                        stream: u64::MAX,
                        dir,
                        from_sse: true,
                    })
                    .expect("serde");
                    assert_eq!(
                        String::from_utf8_lossy(&ours),
                        String::from_utf8_lossy(&theirs)
                    );
                }
            }
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
    fn an_event_too_large_for_a_line_is_written_as_a_note_and_what_follows_reads_back() {
        // SSE data past the cap, as a JSON string (control characters escape to six bytes).
        let huge = "\u{1}".repeat(MAX_LINE_BYTES / 6 + 1024);
        let small = r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        let pending = r#"{"jsonrpc":"2.0","method":"pending"}"#;
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(2);
        let first = at(sse(4, pending));
        let too_big = live_pair(3, &huge);
        let body_too_big = at(EventKind::Message {
            stream: 4,
            dir: Direction::ServerToClient,
            body: json!({ "result": huge }),
        });
        let after = live_pair(3, small);
        let last = at(derived(4, Direction::ServerToClient, pending));
        let events = [
            &first,
            &too_big[0],
            &too_big[1],
            &body_too_big,
            &after[0],
            &after[1],
            &last,
        ];
        let mut back = Vec::new();
        let mut longest = 0;
        for event in events {
            let mut line = Vec::new();
            encoder.encode(event, &mut line).expect("encode");
            longest = longest.max(line.len());
            back.push(decoder.decode(&line).unwrap_or_else(|e| panic!("{e:?}")));
        }
        assert!(longest < 64 << 10, "every line written is short: {longest}");
        let note = |event: &Event| match &event.kind {
            EventKind::Note { stream, text } => (*stream, text.clone()),
            other => panic!("not a note: {other:?}"),
        };
        let (stream, text) = note(&back[1]);
        assert_eq!(stream, Some(3));
        assert!(
            text.contains("sse_event") && text.contains("128 MiB"),
            "{text}"
        );
        // What the tap derived is written whole (the data never reached the reader): here an
        // invalid message quoting the data's start.
        assert_eq!(back[2], too_big[1]);
        assert!(note(&back[3]).1.contains("a message event"));
        assert_eq!(back[1].t, too_big[0].t);
        // After them, stream 3's data and stream 4's pending data are referred to correctly.
        assert_eq!(back[0], first);
        assert_eq!(back[4..], [after[0].clone(), after[1].clone(), last]);
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
    fn a_message_folds_to_the_same_text_live_and_read_back() {
        use crate::fixtures::Script;
        use crate::model::Model;
        let mut script = Script::new();
        script
            .open(0, 1, "POST", None)
            .send(
                1,
                1,
                json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}),
            )
            .head(2, 1, 200, "sse", None);
        let datas = [
            // As the writer writes it: taken as the message's text.
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            // Spaced, a fraction, an escape written otherwise, a key twice: written out.
            r#"{ "jsonrpc": "2.0", "method": "notifications/message", "params": {"level":"info"} }"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"A\/"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":1,"result":{"content":[]}}"#,
        ];
        let mut live = script.events.clone();
        for (i, data) in datas.iter().enumerate() {
            let t = live[live.len() - 1].t + chrono::TimeDelta::milliseconds(1 + i as i64);
            live.push(Event::at(t, sse(1, data)));
            // What the hub passes on: the message, with the data it was parsed from.
            let message = derived(1, Direction::ServerToClient, data);
            let mut message = Event::at(t, message);
            message.source = Some((*data).into());
            live.push(message);
        }
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(2);
        let mut back = Vec::new();
        for event in &live {
            let mut line = Vec::new();
            let known = event.source.is_some();
            encoder
                .encode_known(event, known, &mut line)
                .expect("encode");
            back.push(decoder.decode(&line).unwrap_or_else(|e| panic!("{e:?}")));
        }
        assert_eq!(back, live);
        let texts = |events: &[Event]| {
            let (model, _) = Model::from_events(events);
            model
                .messages
                .iter()
                .map(|m| m.body.text().to_string())
                .collect::<Vec<_>>()
        };
        let plain: Vec<Event> = live
            .iter()
            .map(|e| Event::at(e.t, e.kind.clone()))
            .collect();
        let written = texts(&plain);
        assert_eq!(written.len(), 1 + datas.len());
        assert_eq!(texts(&live), written);
        assert_eq!(texts(&back), written);
        assert_eq!(written[1], datas[0]);
        for text in &written {
            let value: Value = serde_json::from_str(text).expect("json");
            assert_eq!(text, &serde_json::to_string(&value).expect("writes"));
        }
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

    /// SSE data its writer parsed a message from is embedded without being parsed again, byte
    /// for byte as the checked path writes it; data that cannot be embedded as it is (not
    /// framed, two lines) is still written as a string.
    #[test]
    fn sse_data_known_to_parse_is_written_as_the_checked_path_writes_it() {
        let datas = [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]"#,
            " {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            "{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{}}",
        ];
        let heads = [
            (None, None, None),
            (
                Some("7".to_string()),
                Some("message".to_string()),
                Some(3000),
            ),
        ];
        for data in datas {
            for (id, name, retry) in &heads {
                let event = at(EventKind::SseEvent {
                    stream: 4,
                    id: id.clone(),
                    event: name.clone(),
                    retry: *retry,
                    data: data.into(),
                    start: 1_234,
                    end: 98_765,
                });
                let line = |known| {
                    let mut line = Vec::new();
                    Encoder::default()
                        .encode_known(&event, known, &mut line)
                        .expect("encode");
                    String::from_utf8(line).expect("utf-8")
                };
                let (known, checked) = (line(true), line(false));
                assert_eq!(known, checked);
                let back = Decoder::new(2).decode(known.as_bytes()).expect("decode");
                assert_eq!(back, event);
                let verbatim = data.starts_with('{') || data.starts_with('[');
                assert_eq!(
                    known.contains(&format!("\"data\":{data}")),
                    verbatim && !data.contains('\n'),
                    "{known}"
                );
            }
        }
    }

    /// A message its writer knows derives from its SSE data is written as the comparison would
    /// write it, and only when that data is the event right before it on its stream.
    #[test]
    fn a_message_known_to_derive_from_its_data_refers_to_it_only_right_after_it() {
        let data = r#"{ "jsonrpc": "2.0", "id": 1, "result": {} }"#;
        let other = r#"{"jsonrpc":"2.0","id":9,"result":{"other":true}}"#;
        let write = |events: &[(Event, bool)]| -> Vec<String> {
            let mut encoder = Encoder::default();
            events
                .iter()
                .map(|(event, known)| {
                    let mut line = Vec::new();
                    encoder
                        .encode_known(event, *known, &mut line)
                        .expect("encode");
                    String::from_utf8(line).expect("utf-8")
                })
                .collect()
        };
        let [event, message] = live_pair(2, data);
        let known = write(&[(event.clone(), false), (message.clone(), true)]);
        let compared = write(&[(event.clone(), false), (message, false)]);
        assert_eq!(known, compared);
        assert!(known[1].contains("from_sse"), "{}", known[1]);
        // Another event in between: the data may no longer be the message's.
        let note = at(EventKind::Note {
            stream: Some(2),
            text: "between".into(),
        });
        let unrelated = at(derived(2, Direction::ServerToClient, other));
        let lines = write(&[(event, false), (note, false), (unrelated, true)]);
        assert!(lines[2].contains("\"other\""), "{}", lines[2]);
    }

    /// Whether a message refers back to its SSE data is the same whether it is decided by
    /// writing the body out (compact data) or by parsing the data (anything else), and every
    /// pair reads back as it was.
    #[test]
    fn a_message_refers_to_its_data_whether_or_not_it_needed_parsing() {
        let deep = format!("{}1{}", r#"{"a":"#.repeat(70), "}".repeat(70));
        // (data, refers back)
        let table: &[(&str, bool)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"z":1,"a":[1.5,"é"]}}"#,
                true,
            ),
            (r#"{ "jsonrpc": "2.0", "method": "n" }"#, true),
            (r#"{"jsonrpc":"2.0","method":"n","params":{"x":1.0}}"#, true),
            (r#"{"jsonrpc":"2.0","method":"n","params":{"x":1e2}}"#, true),
            (r#"{"jsonrpc":"2.0","method":"a\/b"}"#, true),
            (
                r#"[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"result":{}}]"#,
                true,
            ),
            (r#"[]"#, true),
            (r#"7"#, true),
            (&deep, true),
        ];
        for &(data, refers) in table {
            let events = live_pair(6, data);
            let mut scratch = Vec::new();
            let kind = &events[1].kind;
            assert_eq!(
                same_as_derived(kind, 6, Direction::ServerToClient, data, &mut scratch),
                derived(6, Direction::ServerToClient, data) == *kind,
                "{data}"
            );
            let (lines, back) = round_trip(&events);
            assert_eq!(back, events, "{data}");
            assert_eq!(
                lines[1].contains("from_sse"),
                refers,
                "{data}: {}",
                lines[1]
            );
        }
        // A body that is not its data is never taken for it, however it writes out.
        let data = r#"{"jsonrpc":"2.0","method":"n"}"#;
        let other = EventKind::Message {
            stream: 6,
            dir: Direction::ServerToClient,
            body: json!({"jsonrpc":"2.0","method":"m"}),
        };
        assert!(!same_as_derived(
            &other,
            6,
            Direction::ServerToClient,
            data,
            &mut Vec::new()
        ));
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
            Err(DecodeError::ReferenceInV1)
        ));
        let mut context = Context::default();
        context
            .sse
            .insert(9, r#"{"jsonrpc":"2.0","method":"n"}"#.into());
        assert!(Decoder::resume(2, context).decode(line).is_ok());
    }

    #[test]
    fn times_and_repeated_headers_refer_to_the_previous_lines() {
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let opened = |stream, headers: Vec<Header>| {
            at(EventKind::StreamOpened {
                stream,
                conn: 1,
                method: "POST".into(),
                path: "/mcp".into(),
                headers,
                origin: None,
            })
        };
        let first = vec![pair("accept", "*/*"), pair("content-length", "10")];
        let second = vec![
            pair("content-length", "12"),
            pair("accept", "*/*"),
            pair("x", "1"),
        ];
        let mut events = vec![opened(1, first), opened(2, second.clone())];
        events.push(at(EventKind::ResponseHead {
            stream: 2,
            status: 200,
            headers: second,
        }));
        events[1].t = events[0].t + TimeDelta::microseconds(1234);
        events[2].t = events[0].t - TimeDelta::microseconds(5);
        let (lines, back) = round_trip(&events);
        assert_eq!(back, events);
        assert!(lines[0].starts_with(r#"{"t":"20"#), "{}", lines[0]);
        assert!(
            lines[1].starts_with(r#"{"t":1234,"kind":"stream_opened""#),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].ends_with(r#""headers":[["content-length","12"],0,["x","1"]]}"#),
            "{}",
            lines[1]
        );
        assert!(lines[2].starts_with(r#"{"t":-1239,"#), "{}", lines[2]);
        assert!(
            lines[2].contains(r#""headers":[["content-length","12"]"#),
            "responses apart"
        );
        let mut decoder = Decoder::new(2);
        assert!(matches!(
            decoder.decode(lines[1].as_bytes()),
            Err(DecodeError::NoSuchHeader(0))
        ));
        let no_base = br#"{"t":5,"kind":"note","text":"x"}"#;
        assert!(matches!(
            decoder.decode(no_base),
            Err(DecodeError::NoTimeBase)
        ));
    }

    #[test]
    fn a_time_finer_than_microseconds_is_kept() {
        let mut events = vec![at(sse(1, "")), at(sse(1, "")), at(sse(1, ""))];
        events[1].t = events[0].t + TimeDelta::nanoseconds(1_500);
        events[2].t = events[1].t + TimeDelta::nanoseconds(500);
        let (lines, back) = round_trip(&events);
        assert_eq!(back, events);
        assert!(lines[1].starts_with(r#"{"t":"20"#), "{}", lines[1]);
    }

    #[test]
    fn lines_in_another_key_order_are_read_too() {
        let line = br#"{"kind":"sse_event","data":{"a":1},"t":"2025-01-01T00:00:00Z","stream":1,"start":0,"end":9}"#;
        let event = Decoder::new(2).decode(line).expect("decodes");
        assert!(matches!(event.kind, EventKind::SseEvent { data, .. } if &*data == r#"{"a":1}"#));
    }
}
