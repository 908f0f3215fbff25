//! Several servers behind one proxy (forward-proxy mode): every exchange names its server, and
//! sessions are the server's: two servers issuing the same session id never merge, and one
//! server's trouble reaches only its own calls.

use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::{Model, Notice};
use serde_json::{Value, json};

const A: &str = "http://127.0.0.1:4001";
const B: &str = "http://127.0.0.1:4002";

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}})
}

/// A request head to `origin` in session `s1` (both servers issue that id).
fn open(s: &mut Script, stream: StreamId, method: &str, origin: &str, extra: &[(&str, &str)]) {
    let mut headers = vec![
        ("mcp-session-id".to_string(), "s1".to_string()),
        ("mcp-protocol-version".to_string(), "2025-06-18".to_string()),
    ];
    headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    s.push(EventKind::StreamOpened {
        stream,
        conn: stream,
        method: method.into(),
        path: "/mcp".into(),
        headers,
        origin: Some(origin.into()),
    });
}

/// Each server gets a `tools/call` with JSON-RPC id 1 (each client numbers from 1), answered on
/// an SSE stream: A's on stream 1 (tool `a`), B's on stream 2 (tool `b`); `ids` gives their
/// SSE events ids.
fn two_calls(ids: bool) -> Script {
    let mut s = Script::ticking();
    for (stream, origin, tool) in [(1, A, "a"), (2, B, "b")] {
        open(&mut s, stream, "POST", origin, &[]);
        s.push(EventKind::Message {
            stream,
            dir: Direction::ClientToServer,
            body: call(1, tool),
        });
        s.respond(stream, 200, "text/event-stream", &[]);
        s.event(stream, ids.then_some("7"), None);
    }
    s
}

fn verdict(model: &Model, tool: &str) -> &'static str {
    model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some(tool))
        .map_or("missing", |c| c.verdict.name())
}

/// What happens to A's server, then what its verdicts and B's are.
struct Case {
    what: &'static str,
    ids: bool,
    then: fn(&mut Script),
    a: &'static str,
    b: &'static str,
}

#[test]
fn one_servers_trouble_reaches_only_its_calls() {
    let cases = [
        Case {
            what: "A's stream is reset (no event ids: nothing to resume)",
            ids: false,
            then: |s| {
                s.finish(1, EndHow::Reset, Leg::Upstream);
            },
            a: "orphaned",
            b: "pending",
        },
        Case {
            what: "A answers 404 to its session s1 (expired there, not at B)",
            ids: false,
            then: |s| {
                open(s, 3, "POST", A, &[]);
                s.respond(3, 404, "text/plain", &[]);
                s.finish(3, EndHow::Eof, Leg::Upstream);
            },
            a: "orphaned",
            b: "pending",
        },
        Case {
            what: "A's stream dies after event 7; B's client resumes its own event 7",
            ids: true,
            then: |s| {
                s.finish(1, EndHow::Reset, Leg::Upstream);
                open(s, 3, "GET", B, &[("last-event-id", "7")]);
                s.respond(3, 200, "text/event-stream", &[]);
                // A's window closes with nobody resuming A's stream.
                s.wait(60_000);
                s.event(3, Some("8"), None);
            },
            a: "orphaned",
            b: "pending",
        },
        Case {
            what: "B answers its id 1; A's stream then dies",
            ids: false,
            then: |s| {
                s.event(2, None, Some(json!({"jsonrpc":"2.0","id":1,"result":{}})));
                s.finish(1, EndHow::Error, Leg::Upstream);
            },
            a: "orphaned",
            b: "answered",
        },
    ];
    for case in cases {
        let mut s = two_calls(case.ids);
        (case.then)(&mut s);
        let (model, _) = s.fold();
        assert_eq!(
            (verdict(&model, "a"), verdict(&model, "b")),
            (case.a, case.b),
            "{}",
            case.what
        );
    }
}

#[test]
fn two_servers_with_the_same_session_id_are_two_sessions() {
    let (model, notices) = two_calls(false).fold();
    let sessions: Vec<(Option<&str>, Option<&str>)> = model
        .sessions
        .iter()
        .filter(|s| !s.streams.is_empty())
        .map(|s| (s.origin.as_deref(), s.id.as_deref()))
        .collect();
    assert_eq!(sessions, [(Some(A), Some("s1")), (Some(B), Some("s1"))]);
    assert_eq!(model.servers(), [A, B]);
    let a = model.stream(1).and_then(|s| s.origin.as_deref());
    assert_eq!(a, Some(A));
    for call in model.calls.iter() {
        let want = if call.tool.as_deref() == Some("a") {
            A
        } else {
            B
        };
        assert_eq!(model.call_server(call), Some(want));
    }
    // Every notice names its server, so `--json` lines can carry it.
    let started: Vec<&Notice> = notices
        .iter()
        .filter(|n| matches!(n.what, mcpscope_engine::model::What::CallStarted { .. }))
        .collect();
    let servers: Vec<Option<&str>> = started.iter().map(|n| n.server.as_deref()).collect();
    assert_eq!(servers, [Some(A), Some(B)]);
    let line = serde_json::to_value(started[1]).expect("serializes");
    assert_eq!(line["server"], B, "{line}");
}

#[test]
fn session_less_traffic_is_kept_per_server() {
    let mut s = Script::ticking();
    for (stream, origin, tool) in [(1, A, "a"), (2, B, "b")] {
        s.push(EventKind::StreamOpened {
            stream,
            conn: stream,
            method: "POST".into(),
            path: "/mcp".into(),
            headers: Vec::new(),
            origin: Some(origin.into()),
        });
        s.push(EventKind::Message {
            stream,
            dir: Direction::ClientToServer,
            body: call(1, tool),
        });
        s.respond(stream, 200, "application/json", &[]);
    }
    // Both calls are id 1 in session-less traffic: B answers its own, A's stream dies.
    s.json_body(2, json!({"jsonrpc":"2.0","id":1,"result":{}}));
    s.finish(1, EndHow::Reset, Leg::Upstream);
    let (model, _) = s.fold();
    assert_eq!(
        (verdict(&model, "a"), verdict(&model, "b")),
        ("orphaned", "answered")
    );
    let sessionless: Vec<Option<&str>> = model
        .sessions
        .iter()
        .filter(|s| s.is_sessionless() && !s.streams.is_empty())
        .map(|s| s.origin.as_deref())
        .collect();
    assert_eq!(sessionless, [Some(A), Some(B)]);
}

#[test]
fn without_an_origin_the_upstream_of_proxy_started_is_the_server() {
    let mut s = Script::ticking();
    s.push(EventKind::ProxyStarted {
        listen: "127.0.0.1:7000".into(),
        upstream: "http://127.0.0.1:9000/mcp".into(),
        version: "0".into(),
    });
    s.open(0, 1, "POST", Some("s1"));
    let (model, _) = s.fold();
    assert_eq!(
        model.stream(1).and_then(|s| s.origin.as_deref()),
        Some("http://127.0.0.1:9000")
    );
    // A recording with neither reads as before: no server.
    let mut s = Script::ticking();
    s.open(0, 1, "POST", Some("s1"));
    let (model, _) = s.fold();
    assert_eq!(model.stream(1).and_then(|s| s.origin.clone()), None);
    assert!(model.servers().is_empty());
}
