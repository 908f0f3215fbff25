//! Synthetic, realistic event vectors for the scale benchmarks (shared by `benches/wire.rs` and
//! `examples/bench_scale.rs` through `#[path]`).
//!
//! Shape: `sessions` sessions, each opened with an `initialize` exchange; then calls spread
//! round-robin over the sessions, each a POST `tools/call` answered on an SSE stream with
//! `k % 3` progress events and a result. One call in 100 dies (upstream reset, no result: an
//! orphan) and one in 200 is left pending (no end).

#![allow(dead_code)]

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg};

/// A 1 KB-ish progress message text.
fn pad(k: usize) -> String {
    format!("step {k} {}", "x".repeat(64))
}

/// Generates events until `target` events are produced (the last call may be cut short).
pub fn events(target: usize, sessions: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(target + 16);
    let base: DateTime<Utc> = Utc
        .with_ymd_and_hms(2025, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    let mut tick = 0i64;
    let mut t = || {
        tick += 50;
        base + Duration::microseconds(tick)
    };
    let mut stream = 0u64;
    let sessions = sessions.max(1);
    for s in 0..sessions {
        stream += 1;
        let sid = format!("session-{s:05}");
        out.push(Event::at(
            t(),
            EventKind::StreamOpened {
                stream,
                conn: s as u64 + 1,
                method: "POST".into(),
                path: "/mcp".into(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    (
                        "accept".into(),
                        "application/json, text/event-stream".into(),
                    ),
                ],
                origin: None,
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::Message {
                stream,
                dir: Direction::ClientToServer,
                body: json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                    "protocolVersion":"2025-06-18","capabilities":{},
                    "clientInfo":{"name":"bench","version":"1"}}}),
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::ResponseHead {
                stream,
                status: 200,
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("mcp-session-id".into(), sid.clone()),
                ],
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::Message {
                stream,
                dir: Direction::ServerToClient,
                body: json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18",
                    "capabilities":{"tools":{}},"serverInfo":{"name":"synth","version":"1"}}}),
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                how: EndHow::Eof,
                leg: Leg::Upstream,
                bytes: 200,
                detail: None,
            },
        ));
    }
    let mut k = 0usize;
    while out.len() < target {
        k += 1;
        stream += 1;
        let s = k % sessions;
        let sid = format!("session-{s:05}");
        out.push(Event::at(
            t(),
            EventKind::StreamOpened {
                stream,
                conn: s as u64 + 1,
                method: "POST".into(),
                path: "/mcp".into(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("mcp-session-id".into(), sid),
                    ("mcp-protocol-version".into(), "2025-06-18".into()),
                ],
                origin: None,
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::Message {
                stream,
                dir: Direction::ClientToServer,
                body: json!({"jsonrpc":"2.0","id":k,"method":"tools/call","params":{
                    "name":format!("tool{}", k % 20),"arguments":{"n":k},
                    "_meta":{"progressToken":k}}}),
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::ResponseHead {
                stream,
                status: 200,
                headers: vec![("content-type".into(), "text/event-stream".into())],
            },
        ));
        let mut offset = 0u64;
        for p in 0..(k % 3) {
            let body = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{
                "progressToken":k,"progress":p + 1,"total":3,"message":pad(p)}});
            let data = body.to_string();
            let end = offset + data.len() as u64 + 8;
            out.push(Event::at(
                t(),
                EventKind::SseEvent {
                    stream,
                    id: None,
                    event: None,
                    retry: None,
                    data: data.into(),
                    start: offset,
                    end,
                },
            ));
            offset = end;
            out.push(Event::at(
                t(),
                EventKind::Message {
                    stream,
                    dir: Direction::ServerToClient,
                    body,
                },
            ));
        }
        if k.is_multiple_of(200) {
            continue; // left pending
        }
        if k.is_multiple_of(100) {
            out.push(Event::at(
                t(),
                EventKind::StreamEnded {
                    stream,
                    dir: Direction::ServerToClient,
                    how: EndHow::Reset,
                    leg: Leg::Upstream,
                    bytes: offset,
                    detail: Some("connection reset by peer".into()),
                },
            ));
            continue;
        }
        let body =
            json!({"jsonrpc":"2.0","id":k,"result":{"content":[{"type":"text","text":"ok"}]}});
        let data = body.to_string();
        let end = offset + data.len() as u64 + 8;
        out.push(Event::at(
            t(),
            EventKind::SseEvent {
                stream,
                id: None,
                event: None,
                retry: None,
                data: data.into(),
                start: offset,
                end,
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::Message {
                stream,
                dir: Direction::ServerToClient,
                body,
            },
        ));
        out.push(Event::at(
            t(),
            EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                how: EndHow::Eof,
                leg: Leg::Upstream,
                bytes: end,
                detail: None,
            },
        ));
    }
    out.truncate(target);
    out
}
