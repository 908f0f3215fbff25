//! The 2024-11-05 HTTP+SSE transport: POSTs answered `202`, responses on the SSE stream that
//! announced the endpoint, and that stream owning every pending call of its session.

use serde_json::{Value, json};

use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fixtures::{Script, last_call};
use mcpscope_engine::model::legacy::LEGACY_REVISION;
use mcpscope_engine::model::*;

const ENDPOINT: &str = "/messages/?session_id=abc";

fn open(s: &mut Script, stream: StreamId, method: &str, path: &str) {
    s.push(EventKind::StreamOpened {
        stream,
        conn: stream,
        method: method.into(),
        path: path.into(),
        headers: vec![("accept".into(), "text/event-stream".into())],
        origin: None,
    });
}

fn head(s: &mut Script, stream: StreamId, status: u16, content_type: Option<&str>) {
    let headers = content_type
        .map(|ct| vec![("content-type".to_string(), ct.to_string())])
        .unwrap_or_default();
    s.push(EventKind::ResponseHead {
        stream,
        status,
        headers,
    });
}

fn sse(s: &mut Script, stream: StreamId, event: &str, data: &str) {
    s.push(EventKind::SseEvent {
        stream,
        id: None,
        event: Some(event.into()),
        retry: None,
        data: data.into(),
        start: 0,
        end: 0,
    });
}

/// A message on the SSE stream (stream 1), as its `message` event and the JSON-RPC it carries.
fn on_sse(s: &mut Script, body: Value) {
    sse(s, 1, "message", &body.to_string());
    s.push(EventKind::Message {
        stream: 1,
        dir: Direction::ServerToClient,
        body,
    });
}

/// A client POST to the endpoint carrying `body`, answered `status` with no body.
fn post(s: &mut Script, stream: StreamId, body: Value, status: u16) {
    open(s, stream, "POST", ENDPOINT);
    s.push(EventKind::Message {
        stream,
        dir: Direction::ClientToServer,
        body,
    });
    head(s, stream, status, None);
    s.finish(stream, EndHow::Eof, Leg::Upstream);
}

fn tool_call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}})
}

fn result(id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}})
}

/// The SSE GET (stream 1) announcing `endpoint`, then `initialize` posted and answered on it.
fn legacy_session(endpoint: &str) -> Script {
    let mut s = Script::ticking();
    open(&mut s, 1, "GET", "/sse");
    head(&mut s, 1, 200, Some("text/event-stream"));
    sse(&mut s, 1, "endpoint", endpoint);
    post(
        &mut s,
        2,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"c","version":"1"}}}),
        202,
    );
    on_sse(
        &mut s,
        json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"srv","version":"1"}}}),
    );
    s
}

fn count(notices: &[Notice], pick: fn(&What) -> bool) -> usize {
    notices.iter().filter(|n| pick(&n.what)).count()
}

#[test]
fn a_202_is_no_answer_and_the_response_on_the_sse_stream_is() {
    let mut s = legacy_session(ENDPOINT);
    post(&mut s, 3, tool_call(1, "echo"), 202);
    let (model, notices) = s.fold();
    let call = last_call(&model, "echo").expect("call");
    assert_eq!(call.verdict, Verdict::Pending, "the 202 did not end it");
    assert_eq!(call.owner, 1, "the SSE stream owns it");
    assert_eq!(
        count(&notices, |w| matches!(w, What::CallOrphaned { .. })),
        0
    );

    on_sse(&mut s, result(1));
    let (model, notices) = s.fold();
    assert_eq!(
        last_call(&model, "echo").expect("call").verdict,
        Verdict::Answered
    );
    assert_eq!(
        count(&notices, |w| matches!(w, What::CallAnswered { .. })),
        2
    );
    // The SSE stream lists its pending calls only; the POST keeps its own.
    let echo = last_call(&model, "echo").expect("call").index;
    assert!(!model.stream(1).expect("GET").calls.contains(&echo));
    assert!(model.stream(3).expect("POST").calls.contains(&echo));
    assert_eq!(
        count(&notices, |w| matches!(w, What::CallOrphaned { .. })),
        0
    );
    assert_eq!(count(&notices, |w| matches!(w, What::CallFailed { .. })), 0);
}

#[test]
fn the_session_is_named_by_its_endpoint_and_shown_as_2024_11_05() {
    let (model, notices) = legacy_session(ENDPOINT).fold();
    let session = &model.sessions[model.stream(1).expect("GET").session];
    assert_eq!(session.id.as_deref(), Some("abc"));
    assert_eq!(session.revision.as_deref(), Some(LEGACY_REVISION));
    assert_eq!(session.server.as_deref(), Some("srv 1"));
    assert_eq!(
        model.stream(2).expect("POST").session,
        model.stream(1).expect("GET").session
    );
    let started: Vec<_> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::SessionStarted { session, revision } => Some((session.clone(), revision.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        vec![(Some("abc".into()), Some(LEGACY_REVISION.into()))]
    );
}

#[test]
fn the_death_of_the_sse_stream_orphans_every_pending_call_at_once() {
    for (how, leg, cause) in [
        (EndHow::Reset, Leg::Upstream, OrphanCause::StreamEnded),
        (EndHow::Eof, Leg::Upstream, OrphanCause::StreamEnded),
        (EndHow::Error, Leg::Upstream, OrphanCause::StreamEnded),
        (EndHow::Cancelled, Leg::Client, OrphanCause::ClientClosed),
    ] {
        let mut s = legacy_session(ENDPOINT);
        post(&mut s, 3, tool_call(1, "slow"), 202);
        post(&mut s, 4, tool_call(2, "poke"), 202);
        post(&mut s, 5, tool_call(3, "echo"), 202);
        on_sse(&mut s, result(3));
        // An event id would make a Streamable HTTP call resumable; not here.
        s.push(EventKind::SseEvent {
            stream: 1,
            id: Some("7".into()),
            event: Some("message".into()),
            retry: None,
            data: "".into(),
            start: 0,
            end: 0,
        });
        s.finish(1, how, leg);
        let (model, notices) = s.fold();
        for tool in ["slow", "poke"] {
            match &last_call(&model, tool).expect("call").verdict {
                Verdict::Orphaned { cause: c, death } => {
                    assert_eq!(*c, cause, "{tool} {how:?}");
                    assert_eq!(death.stream, 1);
                    assert_eq!(death.how, Some(how));
                }
                other => panic!("{tool} after {how:?}: {other:?}"),
            }
        }
        assert_eq!(
            last_call(&model, "echo").expect("call").verdict,
            Verdict::Answered
        );
        assert_eq!(
            count(&notices, |w| matches!(w, What::CallOrphaned { .. })),
            2
        );
        assert_eq!(
            count(&notices, |w| matches!(w, What::CallResumable { .. })),
            0
        );
    }
}

#[test]
fn a_refused_post_fails_its_call_and_only_it() {
    let mut s = legacy_session(ENDPOINT);
    post(&mut s, 3, tool_call(1, "slow"), 202);
    post(&mut s, 4, tool_call(2, "echo"), 400);
    let (model, notices) = s.fold();
    match &last_call(&model, "echo").expect("call").verdict {
        Verdict::Error { message } => assert_eq!(message, "HTTP 400"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        last_call(&model, "slow").expect("call").verdict,
        Verdict::Pending
    );
    assert_eq!(count(&notices, |w| matches!(w, What::CallFailed { .. })), 1);
}

#[test]
fn server_requests_on_the_stream_are_answered_by_client_posts() {
    let mut s = legacy_session(ENDPOINT);
    post(&mut s, 3, tool_call(1, "ask"), 202);
    on_sse(
        &mut s,
        json!({"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"?"}}),
    );
    on_sse(
        &mut s,
        json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}),
    );
    post(
        &mut s,
        4,
        json!({"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{"value":"42"}}}),
        202,
    );
    on_sse(&mut s, result(1));
    let (model, notices) = s.fold();
    let request = model
        .calls
        .iter()
        .find(|c| c.method == "elicitation/create")
        .expect("server request");
    assert_eq!(request.dir, Direction::ServerToClient);
    assert_eq!(request.verdict, Verdict::Answered);
    let ask = last_call(&model, "ask").expect("call");
    assert_eq!(ask.verdict, Verdict::Answered);
    assert_eq!(
        ask.progress.count as usize, 1,
        "the notification is the session's call's progress"
    );
    assert_eq!(
        count(&notices, |w| matches!(
            w,
            What::ServerRequestAnswered { .. }
        )),
        1
    );
}

#[test]
fn an_absolute_endpoint_correlates_by_its_path_and_query() {
    let mut s = legacy_session("http://127.0.0.1:9000/messages/?session_id=abc");
    post(&mut s, 3, tool_call(1, "echo"), 202);
    on_sse(&mut s, result(1));
    let (model, _) = s.fold();
    assert_eq!(
        last_call(&model, "echo").expect("call").verdict,
        Verdict::Answered
    );
}

#[test]
fn an_endpoint_event_later_on_the_stream_or_on_a_post_is_not_a_legacy_session() {
    let mut s = Script::ticking();
    open(&mut s, 1, "GET", "/sse");
    head(&mut s, 1, 200, Some("text/event-stream"));
    sse(&mut s, 1, "message", "{}");
    sse(&mut s, 1, "endpoint", ENDPOINT);
    post(&mut s, 2, tool_call(1, "echo"), 202);
    let (model, notices) = s.fold();
    assert!(model.sessions.iter().all(|x| x.revision.is_none()));
    // Without the legacy transport a 202 to a request is the old verdict: no body, orphaned.
    assert_eq!(
        count(&notices, |w| matches!(w, What::CallOrphaned { .. })),
        1
    );
}

#[test]
fn a_rewrite_is_a_notice_and_a_note() {
    let mut s = legacy_session(ENDPOINT);
    s.push(EventKind::Rewritten {
        stream: 1,
        what: "endpoint".into(),
        from: "http://127.0.0.1:8000/messages/?session_id=abc".into(),
        to: "http://127.0.0.1:9000/messages/?session_id=abc".into(),
    });
    let (model, notices) = s.fold();
    assert_eq!(count(&notices, |w| matches!(w, What::Rewritten { .. })), 1);
    assert!(
        model
            .notes
            .iter()
            .any(|(_, stream, text)| *stream == Some(1) && text.contains("rewrote endpoint"))
    );
}
