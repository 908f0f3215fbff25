//! What a cell's fault actually hit, read from the proxy's events in their order: which stream it
//! fired on, what that stream's body was, and whether the result had already passed. A cell is
//! judged only when what its case describes happened.

use std::collections::HashMap;

use mcpscope_engine::event::{Direction, EventKind, StreamId};
use mcpscope_engine::wire::ContentKind;

/// The rule name the proxy gives its refusals during a server-down window (not the case's fault).
const DOWN_REFUSAL: &str = "server-dies";

/// The case's fault as the events show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The first fault the case's rule fired: its stream and its text.
    pub fired: Option<(StreamId, String)>,
    /// A JSON-RPC response had passed on that stream before the fault fired.
    pub response_before_fault: bool,
    /// Each stream's response body kind, from its head.
    bodies: HashMap<StreamId, ContentKind>,
    /// Streams that carried a JSON-RPC response (server to client) so far.
    answered: Vec<StreamId>,
    /// A fault triggered by its N-th event is reported just before that event (which the
    /// client still gets whole): where the event that fired it stands.
    trigger_event: TriggerEvent,
}

/// The event that fired an `after N events` fault, as its reports follow the fault's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum TriggerEvent {
    /// No such event (or it is over).
    #[default]
    None,
    /// The fault fired; its event's reports come next.
    Awaited,
    /// Its `sse_event` was seen; its messages follow.
    Open,
}

impl Evidence {
    /// Takes one event, in the order the proxy emitted them.
    pub fn see(&mut self, kind: &EventKind) {
        match kind {
            EventKind::ResponseHead {
                stream, headers, ..
            } => {
                self.bodies
                    .insert(*stream, ContentKind::of_headers(headers));
            }
            EventKind::SseEvent { stream, .. } if self.on_fired(*stream) => {
                self.trigger_event = match self.trigger_event {
                    TriggerEvent::Awaited => TriggerEvent::Open,
                    _ => TriggerEvent::None,
                };
            }
            EventKind::StreamEnded { stream, .. } if self.on_fired(*stream) => {
                self.trigger_event = TriggerEvent::None;
            }
            EventKind::Message {
                stream,
                dir: Direction::ServerToClient,
                body,
            } if has_response(body) => {
                if !self.answered.contains(stream) {
                    self.answered.push(*stream);
                }
                if self.on_fired(*stream) && self.trigger_event == TriggerEvent::Open {
                    // The event that fired the fault carried the result: it passed first.
                    self.response_before_fault = true;
                }
            }
            EventKind::FaultInjected {
                stream,
                fault,
                rule,
            } if self.fired.is_none() => {
                // A GET reset by a server death, or a request refused while it is down, is the
                // death's consequence, not the fault the case armed.
                let consequence = rule
                    .as_deref()
                    .is_some_and(|r| r == DOWN_REFUSAL || r.starts_with("server-dies on #"));
                if !consequence {
                    self.fired = Some((*stream, fault.clone()));
                    self.response_before_fault = self.answered.contains(stream);
                    if rule.as_deref().is_some_and(|r| r.contains(" events")) {
                        self.trigger_event = TriggerEvent::Awaited;
                    }
                }
            }
            _ => {}
        }
    }

    fn on_fired(&self, stream: StreamId) -> bool {
        self.fired.as_ref().is_some_and(|(s, _)| *s == stream)
    }

    /// The body kind of the stream the fault fired on, once its head was seen.
    pub fn fired_body(&self) -> Option<ContentKind> {
        self.fired
            .as_ref()
            .and_then(|(stream, _)| self.bodies.get(stream).copied())
    }
}

/// Whether a message (or batch) holds a JSON-RPC response.
fn has_response(body: &serde_json::Value) -> bool {
    let one = |m: &serde_json::Value| {
        m.get("id").is_some() && (m.get("result").is_some() || m.get("error").is_some())
    };
    match body.as_array() {
        Some(batch) => batch.iter().any(one),
        None => one(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn head(stream: StreamId, content_type: &str) -> EventKind {
        EventKind::ResponseHead {
            stream,
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
        }
    }

    fn fault(stream: StreamId, fault: &str, rule: &str) -> EventKind {
        EventKind::FaultInjected {
            stream,
            fault: fault.into(),
            rule: Some(rule.into()),
        }
    }

    fn sse(stream: StreamId) -> EventKind {
        EventKind::SseEvent {
            stream,
            id: None,
            event: None,
            retry: None,
            data: "".into(),
            start: 0,
            end: 1,
        }
    }

    #[test]
    fn a_fault_after_the_result_and_the_body_it_hit_are_known() {
        let mut e = Evidence::default();
        e.see(&head(2, "text/event-stream"));
        e.see(&EventKind::Message {
            stream: 2,
            dir: Direction::ServerToClient,
            body: json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        });
        e.see(&fault(3, "reset", "server-dies on #2"));
        e.see(&fault(
            2,
            "reset",
            "reset after 1 events when method=tools/call",
        ));
        assert_eq!(e.fired, Some((2, "reset".into())));
        assert!(e.response_before_fault);
        assert_eq!(e.fired_body(), Some(ContentKind::Sse));

        // The event that fires `after 1 events` is reported after the fault.
        let mut e = Evidence::default();
        e.see(&head(2, "text/event-stream"));
        e.see(&fault(
            2,
            "reset",
            "reset after 1 events when method=tools/call",
        ));
        e.see(&sse(2));
        e.see(&EventKind::Message {
            stream: 2,
            dir: Direction::ServerToClient,
            body: json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        });
        assert!(e.response_before_fault);
        // A result after the event that fired it never reached the client.
        let mut e = Evidence::default();
        e.see(&fault(
            2,
            "reset",
            "reset after 1 events when method=tools/call",
        ));
        e.see(&sse(2));
        e.see(&sse(2));
        e.see(&EventKind::Message {
            stream: 2,
            dir: Direction::ServerToClient,
            body: json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        });
        assert!(!e.response_before_fault);

        let mut e = Evidence::default();
        e.see(&fault(2, "json-reset", "json-reset when method=tools/call"));
        e.see(&head(2, "application/json"));
        assert!(!e.response_before_fault);
        assert_eq!(e.fired_body(), Some(ContentKind::Json));
    }
}
