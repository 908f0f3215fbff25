//! The recorded exchanges of a recording, and how a live request finds the one it replays.
//!
//! A live request matches a recorded exchange with the same HTTP method and the same JSON-RPC
//! method and params, ignoring ids, `jsonrpc`, `params._meta`, and null or empty-object fields
//! (`initialize` matches on its method alone: client names and capabilities differ between
//! clients). A GET matches a GET with the same `Last-Event-ID` (or none). Among the candidates,
//! the least used come first (a second client run replays the recording again), then one from
//! the same session, then recording order.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Header, Leg, StreamId, header};
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::jsonrpc::{self, Kind};

/// The response head of a recorded exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// When it was sent.
    pub t: DateTime<Utc>,
    /// HTTP status.
    pub status: u16,
    /// Response headers as recorded.
    pub headers: Vec<Header>,
}

/// One piece of a recorded response body.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// An SSE event.
    Sse {
        /// `id:` field.
        id: Option<String>,
        /// `event:` field.
        event: Option<String>,
        /// `retry:` field.
        retry: Option<u64>,
        /// The joined data lines.
        data: String,
    },
    /// A whole JSON body (one message or a batch).
    Json(Value),
    /// Text that was not valid JSON-RPC (as recorded, possibly truncated).
    Raw(String),
}

/// A piece with the time it passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// When it passed.
    pub t: DateTime<Utc>,
    /// What passed.
    pub piece: Piece,
}

/// How the recorded response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// When.
    pub t: DateTime<Utc>,
    /// How.
    pub how: EndHow,
    /// Which leg.
    pub leg: Leg,
    /// Body bytes that passed.
    pub bytes: u64,
}

/// One recorded HTTP exchange: the request and the server side of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The recorded stream id.
    pub stream: StreamId,
    /// When the request arrived.
    pub opened: DateTime<Utc>,
    /// HTTP method.
    pub http_method: String,
    /// Request headers.
    pub headers: Vec<Header>,
    /// The request's JSON-RPC body, if any.
    pub request: Option<Value>,
    /// The response head, if one was sent.
    pub head: Option<Head>,
    /// The response body, in order.
    pub items: Vec<Item>,
    /// How the response ended, if the recording says.
    pub end: Option<End>,
}

impl Exchange {
    /// The session the request carried.
    pub fn session(&self) -> Option<&str> {
        header(&self.headers, "mcp-session-id")
    }

    /// The `Last-Event-ID` the request carried.
    pub fn last_event_id(&self) -> Option<&str> {
        header(&self.headers, "last-event-id")
    }

    /// Whether the response is an SSE stream.
    pub fn is_sse(&self) -> bool {
        self.head
            .as_ref()
            .is_some_and(|h| ContentKind::of_headers(&h.headers) == ContentKind::Sse)
    }

    /// Whether this is a plain GET stream (not a resumption).
    pub fn is_plain_get(&self) -> bool {
        self.http_method == "GET" && self.last_event_id().is_none()
    }

    /// Whether the request carries at least one JSON-RPC request (something to answer).
    pub fn has_request(&self) -> bool {
        self.request.as_ref().is_some_and(has_request)
    }

    /// A short description: `POST tools/call poke`, `GET (Last-Event-ID 3-1)`.
    pub fn describe(&self) -> String {
        describe(
            &self.http_method,
            self.request.as_ref(),
            self.last_event_id(),
        )
    }
}

/// Whether a body holds at least one JSON-RPC request.
pub fn has_request(body: &Value) -> bool {
    jsonrpc::messages(body)
        .iter()
        .any(|m| matches!(jsonrpc::classify(m), Kind::Request { .. }))
}

/// Describes a request for mismatch lines: HTTP method, JSON-RPC method, tool and params.
pub fn describe(http_method: &str, body: Option<&Value>, last_event_id: Option<&str>) -> String {
    let mut out = http_method.to_string();
    if let Some(id) = last_event_id {
        out.push_str(&format!(" (Last-Event-ID {id})"));
    }
    if let Some(body) = body {
        for msg in jsonrpc::messages(body) {
            let key = normalize(msg);
            if let Some(method) = key.get("method").and_then(Value::as_str) {
                out.push(' ');
                out.push_str(method);
            }
            if let Some(params) = key.get("params") {
                out.push(' ');
                out.push_str(&params.to_string());
            }
        }
    }
    out
}

/// Splits a recording's events into exchanges, in the order their requests arrived.
pub fn exchanges(events: &[Event]) -> Vec<Exchange> {
    let mut out: Vec<Exchange> = Vec::new();
    let mut index: HashMap<StreamId, usize> = HashMap::new();
    for event in events {
        let t = event.t;
        if let EventKind::StreamOpened {
            stream,
            method,
            headers,
            ..
        } = &event.kind
        {
            index.insert(*stream, out.len());
            out.push(Exchange {
                stream: *stream,
                opened: t,
                http_method: method.clone(),
                headers: headers.clone(),
                request: None,
                head: None,
                items: Vec::new(),
                end: None,
            });
            continue;
        }
        let Some(ex) = event
            .kind
            .stream()
            .and_then(|s| index.get(&s))
            .and_then(|&i| out.get_mut(i))
        else {
            continue;
        };
        match &event.kind {
            EventKind::Message {
                dir: Direction::ClientToServer,
                body,
                ..
            } => ex.request = Some(body.clone()),
            EventKind::ResponseHead {
                status, headers, ..
            } => {
                ex.head = Some(Head {
                    t,
                    status: *status,
                    headers: headers.clone(),
                });
            }
            EventKind::SseEvent {
                id,
                event,
                retry,
                data,
                ..
            } => ex.items.push(Item {
                t,
                piece: Piece::Sse {
                    id: id.clone(),
                    event: event.clone(),
                    retry: *retry,
                    data: data.to_string(),
                },
            }),
            EventKind::Message {
                dir: Direction::ServerToClient,
                body,
                ..
            } if !ex.is_sse() => ex.items.push(Item {
                t,
                piece: Piece::Json(body.clone()),
            }),
            EventKind::InvalidMessage {
                dir: Direction::ServerToClient,
                raw,
                ..
            } if !ex.is_sse() && !raw.is_empty() => ex.items.push(Item {
                t,
                piece: Piece::Raw(raw.clone()),
            }),
            EventKind::StreamEnded {
                dir: Direction::ServerToClient,
                how,
                leg,
                bytes,
                ..
            } if ex.end.is_none() => {
                ex.end = Some(End {
                    t,
                    how: *how,
                    leg: *leg,
                    bytes: *bytes,
                });
            }
            _ => {}
        }
    }
    out
}

/// The matching key of one message: `method` and `params` without `_meta`, null and empty
/// fields; `initialize` keeps its method only.
pub fn normalize(msg: &Value) -> Value {
    let Some(obj) = msg.as_object() else {
        return msg.clone();
    };
    let mut key = Map::new();
    let method = obj.get("method").and_then(Value::as_str);
    if let Some(method) = method {
        key.insert("method".into(), Value::String(method.to_string()));
    }
    if method == Some("initialize") {
        return Value::Object(key);
    }
    if let Some(Value::Object(params)) = obj.get("params") {
        let mut kept = Map::new();
        for (k, v) in params {
            if k == "_meta" || v.is_null() || v.as_object().is_some_and(Map::is_empty) {
                continue;
            }
            kept.insert(k.clone(), v.clone());
        }
        if !kept.is_empty() {
            key.insert("params".into(), Value::Object(kept));
        }
    } else if let Some(params) = obj.get("params").filter(|p| !p.is_null()) {
        key.insert("params".into(), params.clone());
    }
    Value::Object(key)
}

/// The matching key of a body (a message or a batch).
pub fn body_key(body: &Value) -> Value {
    match body {
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        other => normalize(other),
    }
}

/// A live request, as far as matching cares.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// HTTP method.
    pub http_method: &'a str,
    /// `Mcp-Session-Id`.
    pub session: Option<&'a str>,
    /// `Last-Event-ID`.
    pub last_event_id: Option<&'a str>,
    /// The JSON-RPC body.
    pub body: Option<&'a Value>,
}

/// Whether a recorded exchange can answer a live request.
pub fn matches(ex: &Exchange, q: &Query<'_>) -> bool {
    if !ex.http_method.eq_ignore_ascii_case(q.http_method) {
        return false;
    }
    match q.http_method {
        "GET" => ex.last_event_id() == q.last_event_id,
        "POST" => match (&ex.request, q.body) {
            (Some(recorded), Some(live)) => {
                has_request(recorded) && body_key(recorded) == body_key(live)
            }
            _ => false,
        },
        _ => true,
    }
}

/// Picks the exchange for a live request: among the matching ones, those used least (so that a
/// second client run replays the recording again), then one from the same session, then
/// recording order. Counts the use.
pub fn pick(exchanges: &[Exchange], uses: &mut [u32], q: &Query<'_>) -> Option<usize> {
    let least = exchanges
        .iter()
        .enumerate()
        .filter(|(_, ex)| matches(ex, q))
        .filter_map(|(i, _)| uses.get(i).copied())
        .min()?;
    let candidates = || {
        exchanges
            .iter()
            .enumerate()
            .filter(|(i, ex)| uses.get(*i) == Some(&least) && matches(ex, q))
    };
    let same_session = q
        .session
        .and_then(|s| candidates().find(|(_, ex)| ex.session() == Some(s)));
    let chosen = same_session
        .or_else(|| candidates().next())
        .map(|(i, _)| i)?;
    if let Some(count) = uses.get_mut(chosen) {
        *count = count.saturating_add(1);
    }
    Some(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_ignore_ids_meta_and_empty_fields() {
        let a = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
            "params":{"name":"poke","arguments":{},"_meta":{"progressToken":3}}});
        let b = json!({"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"poke"}});
        assert_eq!(normalize(&a), normalize(&b));
        let c = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}});
        let d = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}});
        assert_ne!(normalize(&c), normalize(&d));
        let i1 = json!({"id":0,"method":"initialize","params":{"clientInfo":{"name":"a"}}});
        let i2 = json!({"id":1,"method":"initialize","params":{"clientInfo":{"name":"b"}}});
        assert_eq!(normalize(&i1), normalize(&i2));
    }
}
