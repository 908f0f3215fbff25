//! Events in, verdicts out: a table of cases per protocol revision.

use chrono::Duration;
use serde_json::{Value, json};

use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg};
use mcpscope_engine::fixtures::{Script, last_call};
use mcpscope_engine::model::*;

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
            What::SessionRevision { .. } => "session_revision",
            What::SessionEnded { .. } => "session_ended",
            What::CallStarted { .. } => "call_started",
            What::StreamEnded { .. } => "stream_ended",
            What::CallOrphaned { .. } => "call_orphaned",
            What::CallResumable { .. } => "call_resumable",
            What::CallResumed { .. } => "call_resumed",
            What::ResumeMismatch { .. } => "resume_mismatch",
            What::CallAnswered { .. } => "call_answered",
            What::CallFailed { .. } => "call_failed",
            What::CallCancelled { .. } => "call_cancelled",
            What::CallSuperseded { .. } => "call_superseded",
            What::ClientRetry { .. } => "client_retry",
            What::UpstreamUnreachable { .. } => "upstream_unreachable",
            What::InvalidMessage { .. } => "invalid_message",
            What::FaultInjected { .. } => "fault_injected",
            What::CallRescued { .. } => "call_rescued",
            What::CallInputRequired { .. } => "call_input_required",
            What::CallContinued { .. } => "call_continued",
            What::ServerRequest { .. } => "server_request",
            What::ServerRequestAnswered { .. } => "server_request_answered",
            What::AuthChallenge { .. } => "auth_challenge",
            What::Rewritten { .. } => "rewritten",
            What::ProcessStarted { .. } => "process_started",
            What::ProcessExited { .. } => "process_exited",
            What::StdinClosed { .. } => "stdin_closed",
            What::TaskCreated { .. } => "task_created",
            What::TaskStatus { .. } => "task_status",
            What::TaskResultWaitDied { .. } => "task_result_wait_died",
            What::SchemaViolation { .. } => "schema_violation",
            What::SchemaUnchecked { .. } => "schema_unchecked",
        })
        .collect()
}

const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];

#[test]
fn r2025_06_18_sse_reset_orphans_the_call() {
    let mut s = Script::sse_call("2025-06-18", "poke");
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
    let mut s = Script::sse_call("2025-06-18", "poke");
    s.wait(20).finish(2, EndHow::Reset, Leg::Upstream);
    s.push(EventKind::CallRescued {
        stream: 2,
        id: json!(1),
        message: "upstream stream reset 20 ms after the response head; mcpscope --rescue".into(),
    });
    let (model, notices) = s.fold();
    let poke = last_call(&model, "poke").expect("call");
    assert!(matches!(poke.verdict, Verdict::Orphaned { .. }));
    assert!(poke.rescued().is_some_and(|m| m.contains("--rescue")));
    assert!(kinds(&notices).ends_with(&["call_orphaned", "call_rescued"]));
}

#[test]
fn clean_end_without_ids_orphans_too() {
    let mut s = Script::sse_call("2025-06-18", "poke");
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
    let mut s = Script::sse_call("2025-11-25", "slow");
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

/// A call on stream 2 that died after events `e1`, `e2`; a second stream (4) that carried `o1`
/// and ended; then a resumption GET (3) from `last`.
fn resumed_from(
    last: &str,
) -> (
    mcpscope_engine::model::Model,
    Vec<mcpscope_engine::model::Notice>,
) {
    let mut s = Script::sse_call("2025-11-25", "slow");
    s.post(4, S1, call("other", 7))
        .respond(4, 200, "text/event-stream", S1)
        .event(4, Some("o1"), Some(result(7)))
        .finish(4, EndHow::Eof, Leg::Upstream);
    s.event(2, Some("e1"), None).event(2, Some("e2"), None);
    s.finish(2, EndHow::Reset, Leg::Upstream);
    s.open_with(
        3,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", last)],
    );
    s.fold()
}

#[test]
fn a_resumption_from_any_id_but_the_last_one_received_is_a_mismatch() {
    use mcpscope_engine::model::MismatchKind;
    let (model, notices) = resumed_from("e2");
    assert!(!kinds(&notices).contains(&"resume_mismatch"));
    assert_eq!(
        model.stream(3).and_then(|s| s.resume_mismatch.clone()),
        None
    );
    for (last, kind) in [
        ("e1", MismatchKind::Older),
        ("o1", MismatchKind::OtherStream),
        ("zz", MismatchKind::Unknown),
    ] {
        let (model, notices) = resumed_from(last);
        let mismatch = model
            .stream(3)
            .and_then(|s| s.resume_mismatch.clone())
            .unwrap_or_else(|| panic!("{last}: no mismatch"));
        assert_eq!(
            (mismatch.waiting, mismatch.expected.as_str(), mismatch.kind),
            (2, "e2", kind)
        );
        let said = notices.iter().find_map(|n| match &n.what {
            What::ResumeMismatch {
                stream,
                last_event_id,
                waiting,
                expected,
                mismatch,
            } => Some((
                *stream,
                last_event_id.clone(),
                *waiting,
                expected.clone(),
                *mismatch,
            )),
            _ => None,
        });
        assert_eq!(said, Some((3, last.to_string(), 2, "e2".to_string(), kind)));
    }
    // An older id still resumes the call (the server may replay); another stream's does not.
    let (model, _) = resumed_from("e1");
    assert_eq!(verdict_of(&model, "slow"), Verdict::Pending);
    let (model, _) = resumed_from("o1");
    assert!(matches!(
        verdict_of(&model, "slow"),
        Verdict::Resumable { .. }
    ));
}

#[test]
fn resuming_the_standalone_get_stream_from_its_own_last_id_is_no_mismatch() {
    // The listener (GET 5) carried g1, g2 and died; a call's stream (2) died with e1 waiting.
    let mut s = Script::sse_call("2025-11-25", "slow");
    s.open_with(5, "GET", S1)
        .respond(5, 200, "text/event-stream", S1)
        .event(5, Some("g1"), None)
        .event(5, Some("g2"), None)
        .finish(5, EndHow::Reset, Leg::Upstream);
    s.event(2, Some("e1"), None)
        .finish(2, EndHow::Reset, Leg::Upstream);
    s.open_with(
        6,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "g2")],
    );
    let (model, notices) = s.fold();
    assert!(!kinds(&notices).contains(&"resume_mismatch"), "{notices:?}");
    // The listener from an older id of its own is one.
    s.open_with(
        7,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "g1")],
    );
    let (model2, _) = s.fold();
    let m = model2
        .stream(7)
        .and_then(|st| st.resume_mismatch.clone())
        .expect("mismatch");
    assert_eq!((m.waiting, m.expected.as_str()), (5, "g2"));
    assert!(
        model
            .stream(6)
            .is_some_and(|st| st.resume_mismatch.is_none())
    );
}

#[test]
fn a_refused_resumption_orphans() {
    let mut s = Script::sse_call("2025-11-25", "slow");
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
    let mut s = Script::sse_call("2025-11-25", "slow");
    s.push(EventKind::SseEvent {
        stream: 2,
        id: Some("p".into()),
        event: None,
        retry: Some(1000),
        data: "".into(),
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
    let mut s = Script::sse_call("2025-06-18", "slow");
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
    for revision in ["2026-07-28", "2027-03-01"] {
        session_less_closing_and_death(revision);
    }
}

/// What [`r2026_07_28_client_closing_is_cancellation_and_ids_do_not_make_it_resumable`] pins, at
/// `revision` (a later revision than any this build knows is session-less too).
fn session_less_closing_and_death(revision: &str) {
    let h: &[(&str, &str)] = &[("mcp-protocol-version", revision)];
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
    let retries: Vec<(Option<String>, u32, Option<bool>)> = notices
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
            (Some("poke".into()), 2, Some(false)),
            (Some("peek".into()), 2, Some(true))
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
    let mut s = Script::sse_call("2025-06-18", "poke");
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
    let mut s = Script::sse_call("2025-06-18", "ask");
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
    let mut s = Script::sse_call("2025-11-25", "poke");
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
    assert_eq!(model.calls[1].continues(), Some(0));
    assert_eq!(model.calls[1].round(&model.calls), 2);
    assert_eq!(model.calls[1].verdict, Verdict::Answered);
}

#[test]
fn server_requests_are_reported() {
    let mut s = Script::sse_call("2025-11-25", "ask");
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

/// `initialize` on `stream` from client `name`, answered with session `sid`.
fn init_session(s: &mut Script, stream: u64, name: &str, sid: &str) {
    s.post(stream, &[], json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":name,"version":"1"}}}))
        .respond(stream, 200, "application/json", &[("mcp-session-id", sid)])
        .json_body(stream, json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}))
        .finish(stream, EndHow::Eof, Leg::Upstream);
}

fn retry_count(notices: &[Notice]) -> usize {
    kinds(notices)
        .iter()
        .filter(|k| **k == "client_retry")
        .count()
}

#[test]
fn concurrent_identical_calls_are_not_retries() {
    let mut s = Script::ticking();
    init_session(&mut s, 1, "a", "s1");
    init_session(&mut s, 2, "b", "s2");
    let s2: &[(&str, &str)] = &[("mcp-session-id", "s2")];
    // Two sessions and one session twice: the same call, overlapping, all answered.
    s.post(3, S1, call("echo", 1)).post(4, s2, call("echo", 1));
    s.post(5, S1, call("echo", 2));
    for stream in [3, 4, 5] {
        let id = if stream == 5 { 2 } else { 1 };
        s.respond(stream, 200, "application/json", &[])
            .json_body(stream, result(id));
    }
    // An identical call after the earlier ones were answered is a new call too.
    s.post(6, S1, call("echo", 3));
    let (model, notices) = s.fold();
    assert_eq!(retry_count(&notices), 0, "{:?}", kinds(&notices));
    assert!(model.calls.iter().all(|c| c.retry_of.is_none()));
}

#[test]
fn a_call_overlapping_a_later_failed_original_is_not_its_retry() {
    let mut s = Script::ticking();
    init_session(&mut s, 1, "a", "s1");
    s.post(2, S1, call("echo", 1))
        .respond(2, 200, "text/event-stream", S1);
    s.post(3, S1, call("echo", 2));
    s.finish(2, EndHow::Reset, Leg::Upstream);
    let (_, notices) = s.fold();
    assert_eq!(retry_count(&notices), 0, "{:?}", kinds(&notices));
    // After the failure the client re-sends: that one is a retry.
    s.post(4, S1, call("echo", 3));
    let (model, notices) = s.fold();
    assert_eq!(retry_count(&notices), 1);
    assert_eq!(model.calls.last().and_then(|c| c.retry_of), Some(1));
}

#[test]
fn a_retry_may_follow_in_the_clients_new_session_but_not_in_another_clients() {
    let mut s = Script::ticking();
    init_session(&mut s, 1, "a", "s1");
    s.post(2, S1, call("poke", 1))
        .respond(2, 200, "text/event-stream", S1)
        .finish(2, EndHow::Reset, Leg::Upstream);
    // Another client process, already running, makes the same call: not a retry.
    init_session(&mut s, 3, "b", "s2");
    s.post(4, &[("mcp-session-id", "s2")], call("poke", 1));
    let (_, notices) = s.fold();
    assert_eq!(retry_count(&notices), 0, "{:?}", kinds(&notices));
    // The first client re-initializes and re-sends it: a retry, whose tool annotations are
    // unknown (neither session listed tools).
    init_session(&mut s, 5, "a", "s3");
    s.post(6, &[("mcp-session-id", "s3")], call("poke", 2));
    let (model, notices) = s.fold();
    let retries: Vec<_> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::ClientRetry {
                call, idempotent, ..
            } => Some((call.session.clone(), *idempotent)),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [(Some("s3".to_string()), None)]);
    assert_eq!(
        model.calls[1].reaction.summary(),
        "retried ×1, re-initialized"
    );
}

#[test]
fn a_session_still_in_use_is_not_followed_by_a_new_one_of_the_same_name() {
    let mut s = Script::ticking();
    init_session(&mut s, 1, "a", "s1");
    s.post(2, S1, call("poke", 1))
        .respond(2, 200, "text/event-stream", S1)
        .finish(2, EndHow::Reset, Leg::Upstream);
    init_session(&mut s, 3, "a", "s2");
    // The first process goes on using its session: the second is a separate process.
    s.post(4, S1, call("echo", 5));
    s.post(5, &[("mcp-session-id", "s2")], call("poke", 1));
    let (_, notices) = s.fold();
    assert_eq!(retry_count(&notices), 0, "{:?}", kinds(&notices));
}

#[test]
fn another_sessions_tool_list_does_not_speak_for_a_session_that_never_listed_tools() {
    let mut s = Script::ticking();
    init_session(&mut s, 1, "a", "s1");
    init_session(&mut s, 2, "b", "s2");
    let s2: &[(&str, &str)] = &[("mcp-session-id", "s2")];
    s.post(3, s2, json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .respond(3, 200, "application/json", &[])
        .json_body(
            3,
            json!({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","annotations":{"readOnlyHint":true}}]}}),
        );
    s.post(4, S1, call("echo", 1))
        .respond(4, 503, "text/plain", &[]);
    s.post(5, S1, call("echo", 2));
    let (model, notices) = s.fold();
    let idempotent: Vec<_> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::ClientRetry { idempotent, .. } => Some(*idempotent),
            _ => None,
        })
        .collect();
    assert_eq!(idempotent, [None]);
    assert!(model.tool_info(1, "echo").is_none());
    assert!(
        model
            .tool_info(2, "echo")
            .is_some_and(ToolInfo::safe_to_retry)
    );
}

#[test]
fn a_tool_result_with_is_error_is_answered_with_is_error() {
    let mut s = Script::ticking();
    init_session(&mut s, 1, "a", "s1");
    s.post(2, S1, call("boom", 1))
        .respond(2, 200, "application/json", &[])
        .json_body(
            2,
            json!({"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}),
        );
    s.post(3, S1, call("echo", 2))
        .respond(3, 200, "application/json", &[])
        .json_body(3, result(2));
    let (model, notices) = s.fold();
    let answered: Vec<bool> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::CallAnswered { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [false, true, false]);
    let json = serde_json::to_value(&notices[notices.len() - 1]).expect("json");
    assert_eq!(json["is_error"], json!(false));
    assert!(last_call(&model, "boom").is_some_and(Call::is_tool_error));
    assert!(!last_call(&model, "echo").is_some_and(Call::is_tool_error));
    let boom = notices
        .iter()
        .find(|n| matches!(&n.what, What::CallAnswered { is_error: true, .. }))
        .expect("boom answered");
    assert!(matches!(
        &boom.what,
        What::CallAnswered { call, .. } if call.tool.as_deref() == Some("boom")
    ));
}

fn discover_refused(s: &mut Script) {
    s.post(
        1,
        &[],
        json!({"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}),
    )
    .respond(1, 400, "text/plain", &[])
    .finish(1, EndHow::Eof, Leg::Upstream);
}

#[test]
fn a_refused_server_discover_followed_by_initialize_is_superseded_not_failed() {
    let mut s = Script::ticking();
    discover_refused(&mut s);
    s.wait(50);
    init_session(&mut s, 2, "a", "s1");
    let (_, notices) = s.fold();
    let k = kinds(&notices);
    assert!(k.contains(&"call_superseded"), "{k:?}");
    assert!(!k.contains(&"call_failed"), "{k:?}");
    let json = serde_json::to_value(
        notices
            .iter()
            .find(|n| matches!(n.what, What::CallSuperseded { .. }))
            .expect("superseded"),
    )
    .expect("json");
    assert_eq!(json["kind"], "call_superseded");
    assert_eq!(json["method"], "server/discover");
    assert_eq!(json["error"], "HTTP 400");
    assert_eq!(json["by"], "initialize");
    let (model, _) = s.fold();
    let init = model
        .calls
        .iter()
        .rposition(|c| c.method == "initialize")
        .expect("initialize");
    assert_eq!(model.calls[0].superseded_by(), Some(init));
}

#[test]
fn a_refused_server_discover_with_no_initialize_after_it_fails() {
    let mut s = Script::ticking();
    discover_refused(&mut s);
    let (mut model, notices) = s.fold();
    assert!(!kinds(&notices).contains(&"call_failed"));
    let later = model.advance(s.now() + Duration::seconds(6));
    assert_eq!(kinds(&later), ["call_failed"]);
}

#[test]
fn resumptions_that_never_reach_the_upstream_leave_the_call_waiting_on_its_first_death() {
    let mut s = Script::sse_call("2025-11-25", "slow");
    s.event(2, Some("e1"), None)
        .finish(2, EndHow::Reset, Leg::Upstream);
    let died = s.now();
    for stream in [3, 4] {
        s.open_with(
            stream,
            "GET",
            &[("mcp-session-id", "s1"), ("last-event-id", "e1")],
        );
        s.push(EventKind::UpstreamUnreachable {
            stream,
            error: "connection refused".into(),
        });
        // mcpscope answers 502 itself.
        s.respond(stream, 502, "application/json", &[])
            .finish(stream, EndHow::Eof, Leg::Upstream);
    }
    let (mut model, notices) = s.fold();
    assert!(
        !kinds(&notices).contains(&"call_failed"),
        "{:?}",
        kinds(&notices)
    );
    match verdict_of(&model, "slow") {
        Verdict::Resumable { death, .. } => assert_eq!((death.stream, death.at), (2, died)),
        other => panic!("expected resumable, got {other:?}"),
    }
    let later = model.advance(died + Duration::milliseconds(RESUME_GRACE_MS));
    assert_eq!(kinds(&later), ["call_orphaned"]);
    let slow = last_call(&model, "slow").expect("slow");
    match slow.verdict {
        Verdict::Orphaned {
            cause: OrphanCause::ResumeFailed,
            death,
        } => assert_eq!((death.stream, death.how), (2, Some(EndHow::Reset))),
        ref other => panic!("expected orphaned, got {other:?}"),
    }
    assert_eq!(slow.owner, 2);
    assert_eq!(slow.reaction.summary(), "resume tried ×2");
}

#[test]
fn a_refused_resumption_dates_the_death_from_the_first_stream() {
    let mut s = Script::sse_call("2025-11-25", "slow");
    s.event(2, Some("e1"), None)
        .finish(2, EndHow::Eof, Leg::Upstream);
    s.open_with(
        3,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "e1")],
    )
    .respond(3, 405, "text/plain", &[]);
    let (model, _) = s.fold();
    let slow = last_call(&model, "slow").expect("slow");
    assert_eq!(slow.verdict.death().map(|d| d.stream), Some(2));
    assert_eq!(slow.reaction.summary(), "resume tried ×1");
}

/// An OAuth challenge (401, then 403 for more scope) is not a failure, and the request the
/// client sends again after authorising is not a retry.
#[test]
fn auth_challenges_are_not_failures_and_the_request_sent_again_is_not_a_retry() {
    let challenge: &[(&str, &str)] = &[(
        "www-authenticate",
        r#"Bearer resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource""#,
    )];
    let step_up: &[(&str, &str)] = &[("www-authenticate", r#"Bearer error="insufficient_scope""#)];
    let mut s = Script::ticking();
    s.initialize("2025-11-25");
    s.post(2, S1, call("poke", 7))
        .respond(2, 401, "application/json", challenge);
    s.finish(2, EndHow::Eof, Leg::Upstream);
    s.post(3, S1, call("poke", 7))
        .respond(3, 403, "application/json", step_up);
    s.finish(3, EndHow::Eof, Leg::Upstream);
    s.post(4, S1, call("poke", 7))
        .respond(4, 200, "application/json", &[])
        .json_body(4, result(7));
    s.finish(4, EndHow::Eof, Leg::Upstream);
    let (_, notices) = s.fold();
    let kinds = kinds(&notices);
    assert_eq!(
        kinds.iter().filter(|k| **k == "auth_challenge").count(),
        2,
        "{kinds:?}"
    );
    assert!(kinds.contains(&"call_answered"), "{kinds:?}");
    for false_verdict in ["call_failed", "client_retry", "call_orphaned"] {
        assert!(!kinds.contains(&false_verdict), "{kinds:?}");
    }
}

/// A `server/discover` probe (2026-07-28) answered with a session id names the probe's revision;
/// the `initialize` that follows negotiates 2025-11-25, and the model, its notices and the calls
/// after it say so.
#[test]
fn the_negotiated_revision_corrects_the_probes_guess() {
    let mut s = Script::ticking();
    s.post(
        1,
        &[("mcp-protocol-version", "2026-07-28")],
        json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}),
    )
    .respond(1, 200, "application/json", S1)
    .json_body(1, json!({"jsonrpc": "2.0", "id": 0, "result": {}}))
    .finish(1, EndHow::Eof, Leg::Upstream)
    .post(
        2,
        S1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "clientInfo": {"name": "c", "version": "1"}}}),
    )
    .respond(2, 200, "application/json", S1)
    .json_body(
        2,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "serverInfo": {"name": "srv", "version": "2"}}}),
    )
    .finish(2, EndHow::Eof, Leg::Upstream);
    let (model, notices) = s.fold();
    let revisions: Vec<(Option<&str>, &str)> = notices
        .iter()
        .filter_map(|n| match &n.what {
            What::SessionStarted { revision, .. } => Some((revision.as_deref(), "started")),
            What::SessionRevision { revision, was, .. } => {
                assert_eq!(was.as_deref(), Some("2026-07-28"));
                Some((Some(revision.as_str()), "corrected"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        revisions,
        [
            (Some("2026-07-28"), "started"),
            (Some("2025-11-25"), "corrected")
        ],
        "{:?}",
        kinds(&notices)
    );
    let session = model
        .sessions
        .iter()
        .find(|s| s.id.as_deref() == Some("s1"))
        .expect("session");
    assert_eq!(session.revision.as_deref(), Some("2025-11-25"));
}
