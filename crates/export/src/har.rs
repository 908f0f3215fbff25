//! HAR 1.2 (<http://www.softwareishard.com/blog/har-12-spec/>): one entry per HTTP exchange,
//! with its request and response heads and bodies (an SSE body rebuilt from the recorded
//! events' `id:`/`event:`/`retry:`/`data:` lines), timings from the recorded times (opened →
//! request body → response head → end), and the MCP view of it in custom `_mcp` fields: the
//! calls it carried with their verdicts, the stream's fate and death, the faults injected.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{Direction, EventKind, Header, StreamId};
use mcpscope_engine::model::{Fate, Model, Stream};
use mcpscope_engine::wire::ContentKind;
use serde_json::{Value, json};

use crate::{Folded, VERSION};
use mcpscope_analysis::check::call_json;
use mcpscope_analysis::describe;

/// What the events say of one exchange beyond the model's summary: its bodies.
#[derive(Debug, Default)]
struct Bodies {
    /// The client's messages (or invalid text), in order.
    request: Vec<String>,
    /// When the last of the request body was seen.
    request_done: Option<DateTime<Utc>>,
    /// The rebuilt SSE text.
    sse: String,
    /// The server's JSON body text (messages or invalid text), in order.
    json: Vec<String>,
}

fn bodies(folded: &Folded) -> HashMap<StreamId, Bodies> {
    let mut all: HashMap<StreamId, Bodies> = HashMap::new();
    for event in &folded.events {
        let Some(stream) = event.kind.stream() else {
            continue;
        };
        let entry = all.entry(stream).or_default();
        match &event.kind {
            EventKind::Message { dir, body, .. } => {
                let text = serde_json::to_string(body).unwrap_or_default();
                match dir {
                    Direction::ClientToServer => {
                        entry.request.push(text);
                        entry.request_done = Some(event.t);
                    }
                    Direction::ServerToClient => entry.json.push(text),
                }
            }
            EventKind::InvalidMessage { dir, raw, .. } => match dir {
                Direction::ClientToServer => {
                    entry.request.push(raw.clone());
                    entry.request_done = Some(event.t);
                }
                Direction::ServerToClient => entry.json.push(raw.clone()),
            },
            EventKind::StreamEnded {
                dir: Direction::ClientToServer,
                ..
            } => entry.request_done = Some(event.t),
            EventKind::SseEvent {
                id,
                event: name,
                retry,
                data,
                ..
            } => entry
                .sse
                .push_str(&sse_text(id.as_deref(), name.as_deref(), *retry, data)),
            _ => {}
        }
    }
    all
}

/// One SSE event as it travelled: its fields, one `data:` line per line, a blank line.
pub(crate) fn sse_text(
    id: Option<&str>,
    event: Option<&str>,
    retry: Option<u64>,
    data: &str,
) -> String {
    let mut text = String::new();
    if let Some(id) = id {
        text.push_str(&format!("id: {id}\n"));
    }
    if let Some(event) = event {
        text.push_str(&format!("event: {event}\n"));
    }
    if let Some(retry) = retry {
        text.push_str(&format!("retry: {retry}\n"));
    }
    for line in data.split('\n') {
        text.push_str(&format!("data: {line}\n"));
    }
    text.push('\n');
    text
}

/// The HAR document of a recording.
pub(crate) fn build(folded: &Folded) -> Value {
    let model = &folded.model;
    let mut bodies = bodies(folded);
    let base = base_url(model);
    let entries: Vec<Value> = model
        .streams
        .iter()
        .map(|stream| {
            entry(
                model,
                stream,
                &base,
                bodies.remove(&stream.id).unwrap_or_default(),
            )
        })
        .collect();
    json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "mcpscope", "version": VERSION },
            "entries": entries,
        }
    })
}

/// `scheme://authority` of the recorded upstream (`http://localhost` when unknown).
fn base_url(model: &Model) -> String {
    let Some(upstream) = model.proxy.as_ref().map(|p| p.upstream.as_str()) else {
        return "http://localhost".to_string();
    };
    match upstream.split_once("://") {
        Some((scheme, rest)) => {
            let authority = rest.split(['/', '?']).next().unwrap_or(rest);
            format!("{scheme}://{authority}")
        }
        None => "http://localhost".to_string(),
    }
}

fn headers(list: &[Header]) -> Vec<Value> {
    list.iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect()
}

fn query(path: &str) -> Vec<Value> {
    let Some((_, query)) = path.split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            json!({ "name": name, "value": value })
        })
        .collect()
}

/// Milliseconds between two times, `-1` when either is unknown or they run backwards.
fn span_ms(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> f64 {
    match (from, to) {
        (Some(from), Some(to)) if to >= from => {
            (to - from).num_microseconds().unwrap_or(0) as f64 / 1000.0
        }
        _ => -1.0,
    }
}

fn entry(model: &Model, stream: &Stream, base: &str, bodies: Bodies) -> Value {
    let opened = Some(stream.opened_at);
    let sent = bodies
        .request_done
        .filter(|&t| t >= stream.opened_at)
        .or(opened);
    let head = stream.head_at;
    let end = stream.ended.as_ref().map(|e| e.at);
    let send = span_ms(opened, sent);
    let wait = span_ms(sent, head);
    let receive = span_ms(head, end);
    let time: f64 = [send, wait, receive].iter().filter(|t| **t >= 0.0).sum();
    let time = (time * 1000.0).round() / 1000.0;

    let request_text = bodies.request.join("\n");
    let mut request = json!({
        "method": stream.method,
        "url": format!("{base}{}", stream.path),
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": headers(&stream.request_headers),
        "queryString": query(&stream.path),
        "headersSize": -1,
        "bodySize": if bodies.request.is_empty() { 0 } else { request_text.len() as i64 },
    });
    if !bodies.request.is_empty() {
        request["postData"] = json!({
            "mimeType": stream.request_header("content-type").unwrap_or("application/json"),
            "params": [],
            "text": request_text,
        });
    }

    let status = match (&stream.unreachable, stream.status) {
        (_, Some(status)) => status,
        (Some(_), None) => 502,
        (None, None) => 0,
    };
    let text = match stream.body {
        Some(ContentKind::Sse) => bodies.sse,
        _ => bodies.json.join("\n"),
    };
    let mime = stream
        .response_header("content-type")
        .unwrap_or(if stream.unreachable.is_some() {
            "text/plain"
        } else {
            "x-unknown"
        });
    let body_size = stream
        .ended
        .as_ref()
        .map(|e| e.bytes as i64)
        .unwrap_or(text.len() as i64);
    let mut content = json!({ "size": text.len(), "mimeType": mime });
    if !text.is_empty() {
        content["text"] = Value::String(text);
    }
    let response = json!({
        "status": status,
        "statusText": status_text(status),
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": headers(&stream.response_headers),
        "content": content,
        "redirectURL": stream.response_header("location").unwrap_or(""),
        "headersSize": -1,
        "bodySize": body_size,
    });

    json!({
        "startedDateTime": describe::time(stream.opened_at),
        "time": time,
        "request": request,
        "response": response,
        "cache": {},
        "timings": { "blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": send, "wait": wait, "receive": receive },
        "connection": stream.conn.to_string(),
        "_mcp": mcp_detail(model, stream),
    })
}

/// The MCP view of one exchange.
fn mcp_detail(model: &Model, stream: &Stream) -> Value {
    let fate = model.fate(stream);
    let death = match fate {
        Fate::Died(end) | Fate::Closed(end) => Some(json!({
            "at": describe::time(end.at),
            "how": end.how.as_str(),
            "leg": end.leg.as_str(),
            "bytes": end.bytes,
            "detail": end.detail,
        })),
        Fate::Open | Fate::Unreachable(_) => None,
    };
    let calls: Vec<Value> = stream
        .calls
        .iter()
        .filter_map(|&i| model.calls.get(i))
        .map(|call| call_json(model, call))
        .collect();
    json!({
        "stream": stream.id,
        "label": stream.label(),
        "session": model.session_of(stream).id,
        "fate": fate.word(),
        "end": death,
        "unreachable": stream.unreachable,
        "resumes": stream.resumes,
        "lastEventId": stream.last_event_id,
        "retryMs": stream.retry_ms,
        "calls": calls,
        "faults": stream.faults,
        "invalidMessages": stream.invalid,
    })
}

/// The reason phrase of common statuses (empty for others).
fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_rebuilt_line_by_line() {
        assert_eq!(
            sse_text(Some("7"), Some("message"), Some(500), "a\nb"),
            "id: 7\nevent: message\nretry: 500\ndata: a\ndata: b\n\n"
        );
        assert_eq!(sse_text(None, None, None, ""), "data: \n\n");
    }

    #[test]
    fn query_strings_are_split() {
        assert_eq!(
            query("/mcp?a=1&b"),
            vec![
                json!({"name":"a","value":"1"}),
                json!({"name":"b","value":""})
            ]
        );
        assert!(query("/mcp").is_empty());
    }
}
