//! The observer of a body: bytes in, events out. Fed a body chunk by chunk as it passes (it never
//! holds the body back), it reports what the bytes say — SSE events with their offsets, the
//! JSON-RPC messages in them, a JSON body parsed at its end — and what is wrong with them: an
//! SSE stream cut inside an event, an event whose data is not UTF-8, a stream the SSE parser gave
//! up on (past its limit). It says nothing about how or when the bytes are forwarded (they are
//! forwarded unchanged either way). Live, replay and any transport share it.

use serde_json::Value;

use crate::event::{Direction, EventKind, StreamId};
use crate::wire::ContentKind;
use crate::wire::jsonrpc::{self, Kind};
use crate::wire::sse::{SseFrame, SseParser};

/// The most of a JSON body kept aside for parsing at its end.
pub const JSON_CAP: usize = 16 * 1024 * 1024;

/// The most of an invalid message's bytes quoted in its report.
const RAW_QUOTE: usize = 4096;

/// One whole SSE event seen in a body, with what it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenEvent {
    /// Offset of the event's first byte in the body.
    pub start: u64,
    /// Offset one past the event's last byte (its blank line).
    pub end: u64,
    /// The [`EventKind::SseEvent`] report.
    pub event: EventKind,
    /// The message (or invalid message) its data carries, if it has data.
    pub message: Option<EventKind>,
    /// Its data is a message left unparsed ([`BodyObserver::defer_messages`]): `message` is
    /// `None`, and whoever records the event reports [`message`] of its data after it.
    pub deferred: bool,
}

impl SeenEvent {
    /// Whether the event carries a JSON-RPC response (a result or an error).
    pub fn carries_response(&self) -> bool {
        let Some(EventKind::Message { body, .. }) = &self.message else {
            return false;
        };
        jsonrpc::messages(body).iter().any(|m| {
            matches!(
                jsonrpc::classify(m),
                Kind::Result { .. } | Kind::Error { .. }
            )
        })
    }

    /// Its reports in order: the SSE event, then its message.
    pub fn into_events(self) -> impl Iterator<Item = EventKind> {
        std::iter::once(self.event).chain(self.message)
    }
}

/// How a body ended, as far as its bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyEnd {
    /// It ended cleanly (end of file), so a JSON body is complete.
    pub clean: bool,
    /// Its bytes ran out while being read (the sender ended it, or the reader stopped), rather
    /// than being cut on purpose: an unfinished SSE event is then reported truncated.
    pub reading: bool,
}

/// The reason given for an SSE event the body ended inside.
pub const TRUNCATED: &str = "truncated event: the stream ended inside an SSE event";

/// The reason given for an SSE event whose data is not UTF-8.
pub const NOT_UTF8: &str = "the SSE event's data is not valid UTF-8";

/// Watches one body in one direction.
#[derive(Debug)]
pub struct BodyObserver {
    stream: StreamId,
    dir: Direction,
    content: ContentKind,
    parser: SseParser,
    frames: Vec<SseFrame>,
    json: Vec<u8>,
    received: u64,
    gave_up_reported: bool,
    defer: bool,
}

impl BodyObserver {
    /// An observer at the start of a body of this kind.
    pub fn new(stream: StreamId, dir: Direction, content: ContentKind) -> Self {
        Self {
            stream,
            dir,
            content,
            parser: SseParser::new(),
            frames: Vec::new(),
            json: Vec::new(),
            received: 0,
            gave_up_reported: false,
            defer: false,
        }
    }

    /// Whether, from the next chunk on, the messages it sees are left unparsed: an SSE event's
    /// is marked [`SeenEvent::deferred`], a JSON body's bytes are returned by
    /// [`BodyObserver::end_deferring`]. For a forwarder that reads nothing of the messages
    /// itself: the thread that records them parses them, off the forwarding path. What is
    /// reported is the same either way.
    pub fn defer_messages(&mut self, on: bool) {
        self.defer = on;
    }

    /// The same, decoding at most `max_event_bytes` of one SSE line or event's data (see
    /// [`SseParser::with_limit`]).
    pub fn with_limit(mut self, max_event_bytes: usize) -> Self {
        self.parser = SseParser::with_limit(max_event_bytes);
        self
    }

    /// Whether the SSE parser gave up on this body: its bytes are no longer decoded, so no
    /// event boundary will come.
    pub fn gave_up(&self) -> bool {
        self.parser.gave_up().is_some()
    }

    /// What the body is.
    pub fn content(&self) -> ContentKind {
        self.content
    }

    /// Bytes seen so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Takes the next chunk; the SSE events it completes are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SeenEvent>) {
        self.feed_reporting(chunk, out, &mut Vec::new());
    }

    /// Takes the next chunk; the SSE events it completes are appended to `out`, and what is
    /// wrong with the body as a whole (the SSE parser giving up on it, once) to `notices`.
    pub fn feed_reporting(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<SeenEvent>,
        notices: &mut Vec<EventKind>,
    ) {
        self.received += chunk.len() as u64;
        match self.content {
            ContentKind::Json => {
                if self.json.len() + chunk.len() <= JSON_CAP {
                    self.json.extend_from_slice(chunk);
                }
            }
            ContentKind::Other => {}
            ContentKind::Sse => {
                self.parser.feed(chunk, &mut self.frames);
                let (stream, dir, defer) = (self.stream, self.dir, self.defer);
                out.extend(
                    self.frames
                        .drain(..)
                        .map(|frame| seen(stream, dir, frame, defer)),
                );
                if let Some(reason) = self.parser.gave_up()
                    && !self.gave_up_reported
                {
                    self.gave_up_reported = true;
                    notices.push(EventKind::InvalidMessage {
                        stream,
                        dir,
                        reason: reason.to_string(),
                        raw: String::new(),
                    });
                }
            }
        }
    }

    /// Takes the end of the body; what it reports (a JSON body's message, an SSE event cut
    /// short) is appended to `out`. Called once; later calls report nothing.
    pub fn end(&mut self, end: BodyEnd, out: &mut Vec<EventKind>) {
        let (stream, dir) = (self.stream, self.dir);
        if let Some(json) = self.end_deferring(end, out) {
            out.push(message(stream, dir, &json));
        }
    }

    /// [`BodyObserver::end`], except that while [deferring](BodyObserver::defer_messages) a
    /// JSON body's message is returned as its bytes, unparsed, for the caller to report as
    /// [`message`] of them (nothing else is reported then).
    pub fn end_deferring(&mut self, end: BodyEnd, out: &mut Vec<EventKind>) -> Option<Vec<u8>> {
        let json = std::mem::take(&mut self.json);
        let mut deferred = None;
        if end.clean && self.content == ContentKind::Json && !json.is_empty() {
            if self.defer {
                deferred = Some(json);
            } else {
                out.push(message(self.stream, self.dir, &json));
            }
        }
        if end.reading && self.content == ContentKind::Sse && self.parser.mid_event() {
            out.push(EventKind::InvalidMessage {
                stream: self.stream,
                dir: self.dir,
                reason: TRUNCATED.into(),
                raw: String::new(),
            });
        }
        self.content = ContentKind::Other;
        deferred
    }
}

/// The report of one whole JSON-RPC message body: a `Message`, or an `InvalidMessage` quoting
/// the start of the bytes.
pub fn message(stream: StreamId, dir: Direction, bytes: &[u8]) -> EventKind {
    reported(stream, dir, jsonrpc::parse_body(bytes), bytes)
}

/// [`message`] of a text (SSE data, already known to be UTF-8).
pub fn message_text(stream: StreamId, dir: Direction, text: &str) -> EventKind {
    reported(stream, dir, jsonrpc::parse_text(text), text.as_bytes())
}

fn reported(
    stream: StreamId,
    dir: Direction,
    parsed: Result<Value, String>,
    bytes: &[u8],
) -> EventKind {
    match parsed {
        Ok(body) => EventKind::Message { stream, dir, body },
        Err(reason) => EventKind::InvalidMessage {
            stream,
            dir,
            reason,
            raw: quote(bytes),
        },
    }
}

/// The parsed body of a `Message` report.
pub fn message_body(kind: &EventKind) -> Option<&Value> {
    match kind {
        EventKind::Message { body, .. } => Some(body),
        _ => None,
    }
}

fn quote(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(RAW_QUOTE)]).into_owned()
}

fn seen(stream: StreamId, dir: Direction, frame: SseFrame, defer: bool) -> SeenEvent {
    // The legacy HTTP+SSE transport's `endpoint` event carries a URL, not a message.
    let endpoint = frame.event.as_deref() == Some("endpoint");
    let carries = frame.has_data && !frame.data.is_empty() && !endpoint;
    // Only a message that parsing decides is left to the receiver: data that is not UTF-8 is
    // known invalid here (its text no longer holds its bytes).
    let deferred = carries && defer && !frame.invalid_utf8;
    let message = (carries && !deferred).then(|| {
        if frame.invalid_utf8 {
            // The text holds U+FFFD where the bytes were: parsing it would report a message
            // that was never sent.
            EventKind::InvalidMessage {
                stream,
                dir,
                reason: NOT_UTF8.into(),
                raw: quote(frame.data.as_bytes()),
            }
        } else {
            message(stream, dir, frame.data.as_bytes())
        }
    });
    SeenEvent {
        start: frame.start,
        end: frame.end,
        event: EventKind::SseEvent {
            stream,
            id: frame.id,
            event: frame.event,
            retry: frame.retry,
            data: frame.data,
            start: frame.start,
            end: frame.end,
        },
        message,
        deferred,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &[u8] = b"\xEF\xBB\xBF: keep-alive\r\n\r\nid: 1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\nid: prime\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\rretry: 50\r\rdata: not json\ndata: two\n\ndata: [1]\n\n";

    fn observe(chunks: &[&[u8]], end: BodyEnd) -> (Vec<SeenEvent>, Vec<EventKind>) {
        let mut observer = BodyObserver::new(7, Direction::ServerToClient, ContentKind::Sse);
        let mut seen = Vec::new();
        for chunk in chunks {
            observer.feed(chunk, &mut seen);
        }
        let mut ended = Vec::new();
        observer.end(end, &mut ended);
        (seen, ended)
    }

    const CLEAN: BodyEnd = BodyEnd {
        clean: true,
        reading: false,
    };

    #[test]
    fn a_deferring_observer_reports_the_same_once_its_messages_are_parsed() {
        let invalid = b"data: \xFF\xFE\n\nevent: endpoint\ndata: /messages\n\n";
        let body = [STREAM, &invalid[..]].concat();
        let eager = observe(&[&body], CLEAN).0;
        let mut observer = BodyObserver::new(7, Direction::ServerToClient, ContentKind::Sse);
        observer.defer_messages(true);
        let mut deferred = Vec::new();
        observer.feed(&body, &mut deferred);
        assert!(deferred.iter().any(|e| e.deferred));
        let parsed: Vec<EventKind> = deferred
            .into_iter()
            .flat_map(|seen| {
                let message = match (&seen.event, seen.deferred) {
                    (EventKind::SseEvent { data, .. }, true) => {
                        assert!(seen.message.is_none());
                        Some(message(7, Direction::ServerToClient, data.as_bytes()))
                    }
                    _ => None,
                };
                seen.into_events().chain(message)
            })
            .collect();
        let eager: Vec<EventKind> = eager.into_iter().flat_map(SeenEvent::into_events).collect();
        assert_eq!(parsed, eager);
        // Data that is not UTF-8, and a legacy endpoint, are decided here even when deferring.
        assert!(
            matches!(&parsed[parsed.len() - 2], EventKind::InvalidMessage { reason, .. } if reason == NOT_UTF8)
        );

        let json = br#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        let mut observer = BodyObserver::new(7, Direction::ServerToClient, ContentKind::Json);
        observer.defer_messages(true);
        observer.feed(json, &mut Vec::new());
        let mut ended = Vec::new();
        assert_eq!(
            observer.end_deferring(CLEAN, &mut ended).as_deref(),
            Some(&json[..])
        );
        assert!(ended.is_empty());
    }

    /// The events with their end offsets blanked: an event whose blank line is a CRLF split
    /// between two chunks is reported at the CR (it never waits for an LF that may not come), so
    /// only its end offset may differ by that LF.
    fn without_ends(seen: &[SeenEvent]) -> Vec<SeenEvent> {
        seen.iter()
            .cloned()
            .map(|mut s| {
                s.end = 0;
                if let EventKind::SseEvent { end, .. } = &mut s.event {
                    *end = 0;
                }
                s
            })
            .collect()
    }

    fn inside_crlf(at: usize) -> bool {
        at > 0 && at < STREAM.len() && STREAM[at - 1] == b'\r' && STREAM[at] == b'\n'
    }

    fn assert_same(split: &[SeenEvent], whole: &[SeenEvent], exact: bool, what: &str) {
        if exact {
            assert_eq!(split, whole, "{what}");
        } else {
            assert_eq!(without_ends(split), without_ends(whole), "{what}");
        }
    }

    #[test]
    fn every_split_gives_the_same_events() {
        let (whole, _) = observe(&[STREAM], CLEAN);
        assert_eq!(whole.len(), 5);
        for at in 0..=STREAM.len() {
            let (split, _) = observe(&[&STREAM[..at], &STREAM[at..]], CLEAN);
            assert_same(&split, &whole, !inside_crlf(at), &format!("split at {at}"));
        }
        for a in 0..=STREAM.len() {
            for b in a..=STREAM.len() {
                let (split, _) = observe(&[&STREAM[..a], &STREAM[a..b], &STREAM[b..]], CLEAN);
                let exact = !inside_crlf(a) && !inside_crlf(b);
                assert_same(&split, &whole, exact, &format!("split at {a} and {b}"));
            }
        }
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_same(&observe(&bytes, CLEAN).0, &whole, false, "byte by byte");
    }

    #[test]
    fn events_carry_offsets_messages_and_responses() {
        let (seen, _) = observe(&[STREAM], CLEAN);
        let ends: Vec<_> = seen.iter().map(|s| (s.start, s.end)).collect();
        let mut prev = 0;
        for (start, end) in &ends {
            assert!(*start >= prev && end > start);
            prev = *end;
        }
        assert_eq!(prev, STREAM.len() as u64);
        assert!(seen[0].carries_response());
        assert!(seen[1].message.is_none(), "a priming event has no message");
        assert!(!seen[2].carries_response());
        assert!(matches!(
            seen[3].message,
            Some(EventKind::InvalidMessage { .. })
        ));
        assert!(matches!(
            seen[4].message,
            Some(EventKind::InvalidMessage { .. })
        ));
        let kinds: Vec<_> = seen[0].clone().into_events().collect();
        assert!(matches!(
            kinds[..],
            [EventKind::SseEvent { .. }, EventKind::Message { .. }]
        ));
    }

    #[test]
    fn a_stream_cut_inside_an_event_is_reported_only_while_reading() {
        let cut = &STREAM[..STREAM.len() - 3];
        let reading = BodyEnd {
            clean: true,
            reading: true,
        };
        let (_, ended) = observe(&[cut], reading);
        assert!(matches!(
            &ended[..],
            [EventKind::InvalidMessage { reason, .. }] if reason == TRUNCATED
        ));
        assert!(observe(&[cut], CLEAN).1.is_empty());
        assert!(observe(&[STREAM], reading).1.is_empty());
    }

    #[test]
    fn data_that_is_not_utf8_is_an_invalid_message() {
        let body = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"t\":\"\xff\"}}\n\n";
        let (seen, _) = observe(&[body], CLEAN);
        assert!(matches!(
            &seen[0].message,
            Some(EventKind::InvalidMessage { reason, .. }) if reason == NOT_UTF8
        ));
    }

    #[test]
    fn a_parser_past_its_limit_is_reported_once() {
        let mut observer =
            BodyObserver::new(2, Direction::ServerToClient, ContentKind::Sse).with_limit(32);
        let (mut seen, mut notices) = (Vec::new(), Vec::new());
        observer.feed_reporting(b"data: {}\n\n", &mut seen, &mut notices);
        assert!(notices.is_empty() && !observer.gave_up());
        observer.feed_reporting(&[b'x'; 40], &mut seen, &mut notices);
        observer.feed_reporting(b"\n\ndata: {}\n\n", &mut seen, &mut notices);
        assert!(observer.gave_up());
        assert_eq!(seen.len(), 1);
        assert_eq!(observer.received(), 10 + 40 + 12);
        assert!(matches!(
            &notices[..],
            [EventKind::InvalidMessage { reason, .. }] if reason.contains("32 bytes")
        ));
        let mut ended = Vec::new();
        observer.end(CLEAN, &mut ended);
        assert!(ended.is_empty());
    }

    #[test]
    fn a_json_body_is_parsed_at_a_clean_end_only() {
        let body = br#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        let run = |end| {
            let mut observer = BodyObserver::new(1, Direction::ServerToClient, ContentKind::Json);
            let mut seen = Vec::new();
            observer.feed(&body[..5], &mut seen);
            observer.feed(&body[5..], &mut seen);
            assert!(seen.is_empty());
            assert_eq!(observer.received(), body.len() as u64);
            let mut ended = Vec::new();
            observer.end(end, &mut ended);
            observer.end(end, &mut ended);
            ended
        };
        let ended = run(CLEAN);
        assert_eq!(ended.len(), 1);
        assert!(message_body(&ended[0]).is_some());
        let broken = BodyEnd {
            clean: false,
            reading: false,
        };
        assert!(run(broken).is_empty());
    }
}
