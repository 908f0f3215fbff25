//! `--rescue`: when a POST's SSE stream dies before its responses and the client cannot resume
//! it (no event id seen, or revision 2026-07-28), the client gets a JSON-RPC error per pending
//! request on that stream, then a clean end, instead of a death it may wait on forever.

use std::time::Instant;

use bytes::Bytes;
use mcpscope_engine::event::{EndHow, EventKind, StreamId};
use mcpscope_engine::wire::jsonrpc::{self, Kind};
use mcpscope_engine::wire::observe::SeenEvent;
use serde_json::{Value, json};

/// The JSON-RPC error code of a rescue: -32000, the implementation-defined server error the
/// official MCP SDKs already use for "connection closed", so clients treat it as the transport
/// failure it stands for.
pub const RESCUE_CODE: i64 = -32000;

/// The revision whose calls can never be resumed.
const SESSIONLESS: &str = "2026-07-28";

/// What the tap tracks of one POST stream to rescue its calls.
#[derive(Debug)]
pub struct Rescue {
    /// Requests of the POST body still without a response.
    pending: Vec<Value>,
    /// An SSE event with an id passed (the client may resume).
    event_id_seen: bool,
    /// The request's revision cannot resume.
    sessionless: bool,
    /// When the last event passed (or the stream began).
    last_event: Instant,
    /// Whether an event has passed.
    any_event: bool,
}

impl Rescue {
    /// Tracks the requests of a POST body sent at `revision`; `None` when it carries none.
    pub fn for_request(message: Option<&Value>, revision: Option<&str>) -> Option<Self> {
        let pending: Vec<Value> = jsonrpc::messages(message?)
            .into_iter()
            .filter_map(|m| match jsonrpc::classify(m) {
                Kind::Request { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        if pending.is_empty() {
            return None;
        }
        Some(Self {
            pending,
            event_id_seen: false,
            sessionless: revision == Some(SESSIONLESS),
            last_event: Instant::now(),
            any_event: false,
        })
    }

    /// Notes an event the client got: its id, and the responses it carries.
    pub fn passed(&mut self, event: &SeenEvent) {
        self.last_event = Instant::now();
        self.any_event = true;
        if let EventKind::SseEvent { id: Some(_), .. } = &event.event {
            self.event_id_seen = true;
        }
        if let Some(EventKind::Message { body, .. }) = &event.message {
            for m in jsonrpc::messages(body) {
                if let Kind::Result { id, .. } | Kind::Error { id, .. } = jsonrpc::classify(m) {
                    let text = jsonrpc::id_text(id);
                    self.pending.retain(|p| jsonrpc::id_text(p) != text);
                }
            }
        }
    }

    /// When the stream died (`how`): the SSE bytes to send the client and the events that
    /// report them, or `None` when nothing needs rescuing or the client can resume.
    pub fn take(&mut self, stream: StreamId, how: EndHow) -> Option<(Bytes, Vec<EventKind>)> {
        if self.pending.is_empty() || (self.event_id_seen && !self.sessionless) {
            return None;
        }
        let ms = self.last_event.elapsed().as_millis();
        let death = match how {
            EndHow::Eof => "ended",
            EndHow::Reset => "reset",
            EndHow::Error | EndHow::Cancelled => "failed",
        };
        let when = if self.any_event {
            format!("{ms} ms after the last event")
        } else {
            format!("{ms} ms after the response head, before any event")
        };
        let message = format!("upstream stream {death} {when}; mcpscope --rescue");
        // A blank line first: whatever event the death cut short ends before the rescue.
        let mut text = String::from("\n\n");
        let mut events = Vec::new();
        for id in self.pending.drain(..) {
            let error = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": RESCUE_CODE, "message": message},
            });
            text.push_str(&format!("event: message\ndata: {error}\n\n"));
            events.push(EventKind::CallRescued {
                stream,
                id,
                message: message.clone(),
            });
        }
        Some((Bytes::from(text), events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(id: Option<&str>, body: Option<Value>) -> SeenEvent {
        SeenEvent {
            start: 0,
            end: 1,
            event: EventKind::SseEvent {
                stream: 1,
                id: id.map(str::to_string),
                event: None,
                retry: None,
                data: String::new(),
                start: 0,
                end: 1,
            },
            message: body.map(|body| EventKind::Message {
                stream: 1,
                dir: mcpscope_engine::event::Direction::ServerToClient,
                body,
            }),
        }
    }

    #[test]
    fn a_pending_call_without_event_ids_is_rescued_with_its_id() {
        let req = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}});
        let mut r = Rescue::for_request(Some(&req), Some("2025-06-18")).expect("a request");
        r.passed(&seen(None, None));
        let (bytes, events) = r.take(1, EndHow::Reset).expect("rescued");
        let text = std::str::from_utf8(&bytes).expect("utf-8");
        assert!(text.starts_with("\n\nevent: message\ndata: {"), "{text}");
        assert!(
            text.contains("\"id\":7") && text.contains("-32000"),
            "{text}"
        );
        assert!(
            text.contains("reset") && text.contains("after the last event"),
            "{text}"
        );
        assert!(matches!(&events[..], [EventKind::CallRescued { id, .. }] if id == &json!(7)));
        assert!(r.take(1, EndHow::Reset).is_none(), "rescued once");
    }

    #[test]
    fn answered_or_resumable_calls_and_notifications_are_left_alone() {
        let req = json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call"});
        let mut answered = Rescue::for_request(Some(&req), None).expect("a request");
        answered.passed(&seen(
            None,
            Some(json!({"jsonrpc": "2.0", "id": "a", "result": {}})),
        ));
        assert!(answered.take(1, EndHow::Eof).is_none());

        let mut resumable = Rescue::for_request(Some(&req), Some("2025-11-25")).expect("request");
        resumable.passed(&seen(Some("s1/0"), None));
        assert!(resumable.take(1, EndHow::Reset).is_none());

        let mut sessionless = Rescue::for_request(Some(&req), Some(SESSIONLESS)).expect("request");
        sessionless.passed(&seen(Some("s1/0"), None));
        assert!(sessionless.take(1, EndHow::Reset).is_some());

        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(Rescue::for_request(Some(&note), None).is_none());
    }
}
