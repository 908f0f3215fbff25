//! Events in, verdicts out: a table of cases per protocol revision.

use chrono::Duration;
use serde_json::{Value, json};

use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg};
use mcpscope_engine::model::*;
use mcpscope_testkit::fixtures::{Script, last_call};

fn call(name: &str, id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":{}}})
}

fn result(id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}})
}

fn verdict_of(model: &Model, tool: &str) -> Verdict {
    last_call(model, tool)
        .map(|c| c.verdict.clone())
        .expect("call exists")
}

fn kinds(notices: &[Notice]) -> Vec<&'static str> {
    notices
        .iter()
        .map(|n| match n.what {
            What::SessionStarted { .. } => "session_started",
            What::SessionEnded { .. } => "session_ended",
            What::CallStarted { .. } => "call_started",
            What::StreamEnded { .. } => "stream_ended",
            What::CallOrphaned { .. } => "call_orphaned",
            What::CallResumable { .. } => "call_resumable",
            What::CallResumed { .. } => "call_resumed",
            What::CallAnswered { .. } => "call_answered",
            What::CallFailed { .. } => "call_failed",
            What::CallCancelled { .. } => "call_cancelled",
            What::ClientRetry { .. } => "client_retry",
            What::UpstreamUnreachable { .. } => "upstream_unreachable",
            What::InvalidMessage { .. } => "invalid_message",
            What::FaultInjected { .. } => "fault_injected",
            What::CallRescued { .. } => "call_rescued",
            What::CallInputRequired { .. } => "call_input_required",
            What::CallContinued { .. } => "call_continued",
            What::ServerRequest { .. } => "server_request",
            What::ServerRequestAnswered { .. } => "server_request_answered",
        })
        .collect()
}

const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];

/// A session at `revision` whose `tools/call` of `tool` (id 1) on stream 2 is answered with an
/// SSE head.
fn sse_call(revision: &str, tool: &str) -> Script {
    let mut s = Script::ticking();
    s.initialize(revision)
        .post(2, S1, call(tool, 1))
        .respond(2, 200, "text/event-stream", S1);
    s
}

#[test]
fn r2025_06_18_sse_reset_orphans_the_call() {
    let mut s = sse_call("2025-06-18", "poke");
    s.event(
        2,
        None,
        Some(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}})),
    );
    s.wait(500).finish(2, EndHow::Reset, Leg::Upstream);
    let (model, notices) = s.fold();
    match verdict_of(&model, "poke") {
        Verdict::Orphaned {
            cause: OrphanCause::StreamEnded,
            death,
        } => {
            assert_eq!(death.how, Some(EndHow::Reset));
            assert_eq!(death.stream, 2);
        }
        other => panic!("expected orphaned, got {other:?}"),
    }
    assert_eq!(
        model.sessions[model.calls[1].session].revision.as_deref(),
        Some("2025-06-18")
    );
    assert!(kinds(&notices).ends_with(&["stream_ended", "call_orphaned"]));
    assert_eq!(model.counts().orphaned, 1);
    assert_eq!(model.counts().pending, 0);
}

/// `--rescue`: the proxy answered the orphan itself; the call says so, and its verdict stays what
/// the upstream did.
#[test]
fn a_rescue_attaches_to_the_orphaned_call() {
    let mut s = sse_call("2025-06-18", "poke");
    s.wait(20).finish(2, EndHow::Reset, Leg::Upstream);
    s.push(EventKind::CallRescued {
        stream: 2,
        id: json!(1),
        message: "upstream stream reset 20 ms after the response head; mcpscope --rescue".into(),
    });
    let (model, notices) = s.fold();
    let poke = last_call(&model, "poke").expect("call");
    assert!(matches!(poke.verdict, Verdict::Orphaned { .. }));
    assert!(
        poke.rescued
            .as_deref()
            .is_some_and(|m| m.contains("--rescue"))
    );
    assert!(kinds(&notices).ends_with(&["call_orphaned", "call_rescued"]));
    let line = notices.last().map(Notice::line).unwrap_or_default();
    assert!(
        line.contains("CALL RESCUED") && line.contains("poke"),
        "{line}"
    );
}

#[test]
fn clean_end_without_ids_orphans_too() {
    let mut s = sse_call("2025-06-18", "poke");
    s.finish(2, EndHow::Eof, Leg::Upstream);
    let (model, _) = s.fold();
    assert!(matches!(
        verdict_of(&model, "poke"),
        Verdict::Orphaned {
            death: Death {
                how: Some(EndHow::Eof),
                ..
            },
            ..
        }
    ));
}

#[test]
fn r2025_11_25_event_ids_make_it_resumable_then_resumed_and_answered_on_the_get() {
    let mut s = sse_call("2025-11-25", "slow");
    s.event(2, Some("e1"), None);
    s.event(
        2,
        Some("e2"),
        Some(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}})),
    );
    s.finish(2, EndHow::Reset, Leg::Upstream);
    let (model, _) = s.fold();
    match verdict_of(&model, "slow") {
        Verdict::Resumable { last_event_id, .. } => {
            assert_eq!(last_event_id.as_deref(), Some("e2"))
        }
        other => panic!("expected resumable, got {other:?}"),
    }
    s.open_with(
        3,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "e2")],
    );
    s.respond(3, 200, "text/event-stream", S1)
        .event(3, Some("e3"), Some(result(1)));
    let (model, notices) = s.fold();
    assert_eq!(verdict_of(&model, "slow"), Verdict::Answered);
    let slow = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("slow"))
        .expect("call");
    assert_eq!(slow.owner, 3, "re-owned by the resumption GET");
    assert_eq!(
        model.stream(3).map(Stream::label).as_deref(),
        Some("GET#3 resumed")
    );
    assert!(kinds(&notices).contains(&"call_resumed"));
}

#[test]
fn a_refused_resumption_orphans() {
    let mut s = sse_call("2025-11-25", "slow");
    s.event(2, Some("e1"), None)
        .finish(2, EndHow::Eof, Leg::Upstream);
    s.open_with(
        3,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "e1")],
    )
    .respond(3, 405, "text/plain", &[]);
    let (model, _) = s.fold();
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Orphaned {
            cause: OrphanCause::ResumeFailed,
            ..
        }
    ));
}

#[test]
fn an_unresumed_stream_orphans_after_the_window() {
    let mut s = sse_call("2025-11-25", "slow");
    s.push(EventKind::SseEvent {
        stream: 2,
        id: Some("p".into()),
        event: None,
        retry: Some(1000),
        data: String::new(),
        start: 0,
        end: 0,
    });
    s.finish(2, EndHow::Eof, Leg::Upstream);
    let (mut model, _) = s.fold();
    let died = s.now();
    assert!(
        model
            .advance(died + Duration::milliseconds(1000 + RESUME_GRACE_MS - 1))
            .is_empty()
    );
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Resumable {
            retry_ms: Some(1000),
            ..
        }
    ));
    let notices = model.advance(died + Duration::milliseconds(1000 + RESUME_GRACE_MS));
    assert_eq!(kinds(&notices), ["call_orphaned"]);
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Orphaned {
            cause: OrphanCause::ResumeFailed,
            ..
        }
    ));
}

#[test]
fn r2025_03_26_batch_death_orphans_every_request_of_the_batch() {
    let mut s = Script::ticking();
    s.initialize("2025-03-26");
    s.post(
        2,
        S1,
        json!([call("a", 1), call("b", 2), {"jsonrpc":"2.0","method":"notifications/x"}]),
    );
    s.respond(2, 200, "text/event-stream", S1)
        .event(2, None, Some(result(1)));
    s.finish(2, EndHow::Reset, Leg::Upstream);
    let (model, _) = s.fold();
    assert_eq!(verdict_of(&model, "a"), Verdict::Answered);
    assert!(matches!(verdict_of(&model, "b"), Verdict::Orphaned { .. }));
    assert!(
        model
            .calls
            .iter()
            .filter(|c| c.tool.is_some())
            .all(|c| c.batch)
    );
}

#[test]
fn session_expiry_404_orphans_every_pending_call_of_the_session() {
    let mut s = Script::ticking();
    s.initialize("2025-06-18");
    s.post(2, S1, call("slow", 1))
        .respond(2, 200, "text/event-stream", S1);
    s.post(3, S1, call("echo", 2))
        .respond(3, 404, "application/json", &[]);
    let (model, notices) = s.fold();
    for tool in ["slow", "echo"] {
        assert!(
            matches!(
                verdict_of(&model, tool),
                Verdict::Orphaned {
                    cause: OrphanCause::SessionExpired,
                    ..
                }
            ),
            "{tool}"
        );
    }
    assert!(kinds(&notices).contains(&"session_ended"));
}

#[test]
fn delete_ends_the_session_and_orphans_its_calls() {
    let mut s = sse_call("2025-06-18", "slow");
    s.open_with(3, "DELETE", S1)
        .respond(3, 200, "text/plain", &[]);
    let (model, _) = s.fold();
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Orphaned {
            cause: OrphanCause::SessionDeleted,
            ..
        }
    ));
}

#[test]
fn cancellation_notification_cancels() {
    let mut s = Script::ticking();
    s.initialize("2025-06-18")
        .post(2, S1, call("slow", 7))
        .respond(2, 200, "text/event-stream", S1);
    s.post(
        3,
        S1,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}),
    );
    s.respond(3, 202, "text/plain", &[]);
    let (model, notices) = s.fold();
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Cancelled { .. }
    ));
    assert!(kinds(&notices).contains(&"call_cancelled"));
}

#[test]
fn r2026_07_28_client_closing_is_cancellation_and_ids_do_not_make_it_resumable() {
    let h: &[(&str, &str)] = &[("mcp-protocol-version", "2026-07-28")];
    let mut s = Script::ticking();
    s.post(1, h, call("slow", 1))
        .respond(1, 200, "text/event-stream", &[])
        .event(1, Some("x1"), None);
    s.finish(1, EndHow::Cancelled, Leg::Client);
    s.post(2, h, call("poke", 2))
        .respond(2, 200, "text/event-stream", &[])
        .event(2, Some("x2"), None);
    s.finish(2, EndHow::Reset, Leg::Upstream);
    let (model, _) = s.fold();
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Cancelled { .. }
    ));
    assert!(matches!(
        verdict_of(&model, "poke"),
        Verdict::Orphaned {
            cause: OrphanCause::StreamEnded,
            ..
        }
    ));
    assert_eq!(model.sessions[0].id, None, "session-less traffic");
}

#[test]
fn a_202_answer_to_a_request_orphans_it() {
    let mut s = Script::ticking();
    s.initialize("2025-06-18")
        .post(2, S1, call("echo", 1))
        .respond(2, 202, "text/plain", &[]);
    let (model, _) = s.fold();
    assert!(matches!(
        verdict_of(&model, "echo"),
        Verdict::Orphaned {
            cause: OrphanCause::NoResponseBody,
            ..
        }
    ));
}

#[test]
fn http_503_is_an_error_the_client_sees() {
    let mut s = Script::ticking();
    s.initialize("2025-06-18")
        .post(2, S1, call("echo", 1))
        .respond(2, 503, "text/plain", &[]);
    let (model, _) = s.fold();
    assert_eq!(
        verdict_of(&model, "echo"),
        Verdict::Error {
            message: "HTTP 503".into()
        }
    );
}

#[test]
fn retries_are_flagged_by_the_tools_annotations() {
    let mut s = Script::ticking();
    s.initialize("2025-06-18")
        .post(2, S1, json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    s.respond(2, 200, "application/json", &[]).json_body(
        2,
        json!({"jsonrpc":"2.0","id":1,"result":{"tools":[
        {"name":"peek","annotations":{"readOnlyHint":true}},{"name":"poke"}]}}),
    );
    for (stream, tool) in [(3, "poke"), (5, "peek")] {
        s.post(stream, S1, call(tool, stream as i64))
            .respond(stream, 200, "text/event-stream", S1);
        s.finish(stream, EndHow::Reset, Leg::Upstream);
        s.post(stream + 1, S1, call(tool, stream as i64 + 1));
    }
    let (model, notices) = s.fold();
    let retries: Vec<(Option<String>, u32, bool)> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::ClientRetry {
                call,
                arrival,
                idempotent,
                ..
            } => Some((call.tool.clone(), *arrival, *idempotent)),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries,
        [
            (Some("poke".into()), 2, false),
            (Some("peek".into()), 2, true)
        ]
    );
    let first_poke = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("poke"))
        .expect("poke");
    assert_eq!(first_poke.reaction.summary(), "retried ×1");
}

#[test]
fn reinitialize_and_new_get_are_reactions() {
    let mut s = sse_call("2025-06-18", "poke");
    s.finish(2, EndHow::Reset, Leg::Upstream);
    s.open_with(3, "GET", S1);
    let (model, _) = s.fold();
    assert_eq!(model.calls[1].reaction.summary(), "new GET");
    s.post(
        4,
        &[],
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}),
    );
    let (model, _) = s.fold();
    assert_eq!(model.calls[1].reaction.summary(), "re-initialized, new GET");
}

#[test]
fn server_to_client_elicitation_is_a_call_answered_by_a_post() {
    let mut s = sse_call("2025-06-18", "ask");
    s.event(
        2,
        None,
        Some(json!({"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}})),
    );
    s.post(
        3,
        S1,
        json!({"jsonrpc":"2.0","id":"e","result":{"action":"accept"}}),
    )
    .respond(3, 202, "text/plain", &[]);
    s.event(2, None, Some(result(1)))
        .finish(2, EndHow::Eof, Leg::Upstream);
    let (model, _) = s.fold();
    let elicit = model
        .calls
        .iter()
        .find(|c| c.method == "elicitation/create")
        .expect("elicitation");
    assert_eq!(elicit.dir, Direction::ServerToClient);
    assert_eq!(elicit.verdict, Verdict::Answered);
    assert_eq!(verdict_of(&model, "ask"), Verdict::Answered);
    assert_eq!(model.counts().pending, 0);
}

#[test]
fn folding_is_deterministic() {
    let mut s = sse_call("2025-11-25", "poke");
    s.finish(2, EndHow::Reset, Leg::Upstream);
    let (a, na) = s.fold();
    let (b, nb) = s.fold();
    assert_eq!(na, nb);
    assert_eq!(a.calls, b.calls);
}

#[test]
fn session_started_names_the_negotiated_revision() {
    let mut s = Script::ticking();
    s.initialize("2025-11-25");
    let (_, notices) = s.fold();
    let started: Vec<Option<String>> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::SessionStarted { revision, .. } => Some(revision.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(started, [Some("2025-11-25".to_string())]);
}

#[test]
fn r2026_07_28_input_required_rounds_are_one_logical_call() {
    let h: &[(&str, &str)] = &[("mcp-protocol-version", "2026-07-28")];
    let mut s = Script::ticking();
    s.post(1, h, call("ask", 5))
        .respond(1, 200, "application/json", &[]);
    s.json_body(1, json!({"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create"}}}}));
    s.finish(1, EndHow::Eof, Leg::Upstream);
    s.post(2, h, json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ask","arguments":{},"inputResponses":{"q":{"action":"accept"}}}}));
    s.respond(2, 200, "application/json", &[])
        .json_body(2, result(6))
        .finish(2, EndHow::Eof, Leg::Upstream);
    let (model, notices) = s.fold();
    let k = kinds(&notices);
    assert!(
        k.contains(&"call_input_required") && k.contains(&"call_continued"),
        "{k:?}"
    );
    assert!(
        !k.contains(&"client_retry"),
        "a continuation is not a retry"
    );
    assert!(model.calls[0].input_required);
    assert_eq!(model.calls[1].continues, Some(0));
    assert_eq!(model.calls[1].round(&model.calls), 2);
    assert_eq!(model.calls[1].verdict, Verdict::Answered);
}

#[test]
fn server_requests_are_reported() {
    let mut s = sse_call("2025-11-25", "ask");
    s.event(
        2,
        None,
        Some(json!({"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}})),
    );
    s.post(
        3,
        S1,
        json!({"jsonrpc":"2.0","id":"e","result":{"action":"accept"}}),
    );
    let (_, notices) = s.fold();
    let k = kinds(&notices);
    assert!(
        k.contains(&"server_request") && k.contains(&"server_request_answered"),
        "{k:?}"
    );
}
