//! Task-augmented tool calls as one operation: a table of event scripts and what the model makes
//! of them (verdict, task status, the result wait, the operation's duration, notices).

use chrono::Duration;
use serde_json::{Value, json};

use mcpscope_engine::event::{EndHow, Leg};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::*;

const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];
const TASK: &str = "task-0001-abcdef";

/// One step of a case after the task-augmented `tools/call` (id 1, at stream 2).
#[derive(Clone, Copy)]
enum Step {
    /// The clock moves on.
    Wait(i64),
    /// `tasks/get` answered with this status (JSON, its own POST).
    Get(&'static str),
    /// `notifications/tasks/status` with this status on the session's GET stream.
    Notify(&'static str),
    /// `tasks/list` naming the task with this status.
    List(&'static str),
    /// `tasks/result` answered with a result (JSON).
    Result,
    /// `tasks/result` answered with a tool's error (`isError: true`).
    ToolError,
    /// `tasks/result` answered with a JSON-RPC error of this code.
    ResultError(i64),
    /// `tasks/result` whose SSE stream is reset before the answer.
    ResultReset,
    /// `tasks/result` whose request never gets an answer head (still waiting).
    ResultWaiting,
    /// `tasks/cancel` answered with status `cancelled`.
    Cancel,
    /// The session is deleted.
    Delete,
}

struct Case {
    name: &'static str,
    /// The ttl the task is created with (ms), if any.
    ttl: Option<u64>,
    steps: &'static [Step],
    /// The operation's verdict name at the end.
    verdict: &'static str,
    /// The task's status at the end.
    status: TaskStatus,
    /// Whether a result wait is dead (the client must ask again).
    wait_dead: bool,
    /// How many times the client asked again after a dead wait.
    reasked: u32,
    /// The orphan cause, when orphaned.
    cause: Option<OrphanCause>,
    /// Notice kinds that must appear (in this order, among others).
    notices: &'static [&'static str],
}

fn kind(n: &Notice) -> &'static str {
    match n.what {
        What::TaskCreated { .. } => "task_created",
        What::TaskStatus { .. } => "task_status",
        What::TaskResultWaitDied { .. } => "task_result_wait_died",
        What::CallAnswered { .. } => "call_answered",
        What::CallFailed { .. } => "call_failed",
        What::CallOrphaned { .. } => "call_orphaned",
        What::CallCancelled { .. } => "call_cancelled",
        What::ClientRetry { .. } => "client_retry",
        _ => "other",
    }
}

fn task_fields(status: &str, ttl: Option<u64>) -> Value {
    json!({"taskId": TASK, "status": status, "ttl": ttl, "pollInterval": 100,
           "createdAt": "2025-11-25T10:00:00Z", "lastUpdatedAt": "2025-11-25T10:00:00Z"})
}

/// `initialize`, a GET stream (9) for notifications, then the task-augmented call on stream 2,
/// answered with a `CreateTaskResult`.
fn created(ttl: Option<u64>) -> Script {
    let mut s = Script::ticking();
    s.initialize("2025-11-25");
    s.open_with(
        9,
        "GET",
        &[("mcp-session-id", "s1"), ("accept", "text/event-stream")],
    )
    .respond(9, 200, "text/event-stream", S1);
    let task = match ttl {
        Some(ttl) => json!({"ttl": ttl}),
        None => json!({}),
    };
    s.post(
        2,
        S1,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
               "params":{"name":"slow","arguments":{},"task":task}}),
    )
    .respond(2, 200, "application/json", S1)
    .json_body(
        2,
        json!({"jsonrpc":"2.0","id":1,"result":{"task":task_fields("working", ttl)}}),
    )
    .finish(2, EndHow::Eof, Leg::Upstream);
    s
}

fn request(s: &mut Script, stream: u64, id: i64, method: &str) {
    s.post(
        stream,
        S1,
        json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"taskId":TASK}}),
    );
}

fn json_answer(s: &mut Script, stream: u64, body: Value) {
    s.respond(stream, 200, "application/json", S1)
        .json_body(stream, body)
        .finish(stream, EndHow::Eof, Leg::Upstream);
}

fn play(s: &mut Script, ttl: Option<u64>, steps: &[Step]) {
    let mut stream = 10;
    let mut id = 10;
    for step in steps {
        stream += 1;
        id += 1;
        match *step {
            Step::Wait(ms) => {
                s.wait(ms);
            }
            Step::Get(status) => {
                request(s, stream, id, "tasks/get");
                let body = json!({"jsonrpc":"2.0","id":id,"result":task_fields(status, ttl)});
                json_answer(s, stream, body);
            }
            Step::Notify(status) => {
                s.event(
                    9,
                    None,
                    Some(
                        json!({"jsonrpc":"2.0","method":"notifications/tasks/status",
                                "params":task_fields(status, ttl)}),
                    ),
                );
            }
            Step::List(status) => {
                s.post(
                    stream,
                    S1,
                    json!({"jsonrpc":"2.0","id":id,"method":"tasks/list","params":{}}),
                );
                let body =
                    json!({"jsonrpc":"2.0","id":id,"result":{"tasks":[task_fields(status, ttl)]}});
                json_answer(s, stream, body);
            }
            Step::Result | Step::ToolError => {
                request(s, stream, id, "tasks/result");
                let is_error = matches!(step, Step::ToolError);
                let body = json!({"jsonrpc":"2.0","id":id,"result":{
                    "content":[{"type":"text","text":"done"}],"isError":is_error,
                    "_meta":{"io.modelcontextprotocol/related-task":{"taskId":TASK}}}});
                json_answer(s, stream, body);
            }
            Step::ResultError(code) => {
                request(s, stream, id, "tasks/result");
                let body =
                    json!({"jsonrpc":"2.0","id":id,"error":{"code":code,"message":"no such task"}});
                json_answer(s, stream, body);
            }
            Step::ResultReset => {
                request(s, stream, id, "tasks/result");
                s.respond(stream, 200, "text/event-stream", S1).finish(
                    stream,
                    EndHow::Reset,
                    Leg::Upstream,
                );
            }
            Step::ResultWaiting => request(s, stream, id, "tasks/result"),
            Step::Cancel => {
                request(s, stream, id, "tasks/cancel");
                let body = json!({"jsonrpc":"2.0","id":id,"result":task_fields("cancelled", ttl)});
                json_answer(s, stream, body);
            }
            Step::Delete => {
                s.open_with(stream, "DELETE", S1)
                    .respond(stream, 200, "application/json", S1)
                    .finish(stream, EndHow::Eof, Leg::Upstream);
            }
        }
    }
}

use Step::*;

const CASES: &[Case] = &[
    Case {
        name: "created: one pending operation",
        ttl: Some(60_000),
        steps: &[],
        verdict: "pending",
        status: TaskStatus::Working,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created"],
    },
    Case {
        name: "polled to completion, then the result",
        ttl: Some(60_000),
        steps: &[
            Wait(100),
            Get("working"),
            Wait(100),
            Get("completed"),
            Result,
        ],
        verdict: "answered",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_answered"],
    },
    Case {
        name: "completed but the result not yet fetched: still pending",
        ttl: Some(60_000),
        steps: &[Get("completed")],
        verdict: "pending",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status"],
    },
    Case {
        name: "a tool's error through tasks/result",
        ttl: Some(60_000),
        steps: &[ToolError],
        verdict: "answered",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "call_answered"],
    },
    Case {
        name: "status by notification and by tasks/list",
        ttl: Some(60_000),
        steps: &[Notify("input_required"), List("working")],
        verdict: "pending",
        status: TaskStatus::Working,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "task_status"],
    },
    Case {
        name: "failed status ends it with an error",
        ttl: Some(60_000),
        steps: &[Get("failed")],
        verdict: "error",
        status: TaskStatus::Failed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_failed"],
    },
    Case {
        name: "tasks/cancel ends it cancelled",
        ttl: Some(60_000),
        steps: &[Cancel],
        verdict: "cancelled",
        status: TaskStatus::Cancelled,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_cancelled"],
    },
    Case {
        name: "tasks/result stream reset: the task lives, the wait died",
        ttl: Some(60_000),
        steps: &[Get("completed"), ResultReset],
        verdict: "pending",
        status: TaskStatus::Completed,
        wait_dead: true,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "task_result_wait_died"],
    },
    Case {
        name: "reset, asked again, answered",
        ttl: Some(60_000),
        steps: &[ResultReset, Wait(200), Result],
        verdict: "answered",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 1,
        cause: None,
        notices: &["task_result_wait_died", "client_retry", "call_answered"],
    },
    Case {
        name: "ttl runs out before the result is fetched",
        ttl: Some(1_000),
        steps: &[Get("completed"), Wait(2_000), Get("completed")],
        verdict: "orphaned",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 0,
        cause: Some(OrphanCause::TaskExpired),
        notices: &["task_created", "call_orphaned"],
    },
    Case {
        name: "a live result wait outlasts the ttl",
        ttl: Some(1_000),
        steps: &[ResultWaiting, Wait(2_000), Wait(1)],
        verdict: "pending",
        status: TaskStatus::Working,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created"],
    },
    Case {
        name: "no ttl: never expires",
        ttl: None,
        steps: &[Wait(3_600_000), Get("working")],
        verdict: "pending",
        status: TaskStatus::Working,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created"],
    },
    Case {
        name: "the server no longer knows the task",
        ttl: Some(60_000),
        steps: &[ResultError(-32602)],
        verdict: "orphaned",
        status: TaskStatus::Working,
        wait_dead: false,
        reasked: 0,
        cause: Some(OrphanCause::TaskUnknown),
        notices: &["task_created", "call_orphaned"],
    },
    Case {
        name: "another JSON-RPC error through tasks/result is the operation's",
        ttl: Some(60_000),
        steps: &[ResultError(-32603)],
        verdict: "error",
        status: TaskStatus::Working,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "call_failed"],
    },
    Case {
        name: "the session is deleted: nothing brings the result back",
        ttl: Some(60_000),
        steps: &[ResultReset, Delete],
        verdict: "orphaned",
        status: TaskStatus::Working,
        wait_dead: true,
        reasked: 0,
        cause: Some(OrphanCause::SessionDeleted),
        notices: &["task_result_wait_died", "call_orphaned"],
    },
    Case {
        name: "the result without a poll: the task completed",
        ttl: Some(60_000),
        steps: &[Result],
        verdict: "answered",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "call_answered"],
    },
    Case {
        name: "asked for input, then the result: the task completed",
        ttl: Some(60_000),
        steps: &[Notify("input_required"), Result],
        verdict: "answered",
        status: TaskStatus::Completed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_answered"],
    },
    Case {
        name: "cancelled, then a result: cancelled stays",
        ttl: Some(60_000),
        steps: &[Cancel, Result],
        verdict: "cancelled",
        status: TaskStatus::Cancelled,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_cancelled"],
    },
    Case {
        name: "failed, then a result: failed stays",
        ttl: Some(60_000),
        steps: &[Get("failed"), Result],
        verdict: "error",
        status: TaskStatus::Failed,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_failed"],
    },
    Case {
        name: "an error answer keeps the status last known and ends the operation",
        ttl: Some(60_000),
        steps: &[Get("input_required"), ResultError(-32603)],
        verdict: "error",
        status: TaskStatus::InputRequired,
        wait_dead: false,
        reasked: 0,
        cause: None,
        notices: &["task_created", "task_status", "call_failed"],
    },
];

fn contains_in_order(kinds: &[&str], wanted: &[&str]) -> bool {
    let mut it = kinds.iter();
    wanted.iter().all(|w| it.any(|k| k == w))
}

#[test]
fn task_operations_table() {
    for case in CASES {
        let mut s = created(case.ttl);
        play(&mut s, case.ttl, case.steps);
        let (mut model, mut notices) = s.fold();
        notices.extend(model.advance(s.now()));
        let name = case.name;
        let op = model
            .calls
            .iter()
            .find(|c| c.tool.as_deref() == Some("slow"))
            .unwrap_or_else(|| panic!("{name}: the call"));
        let task = op
            .task()
            .unwrap_or_else(|| panic!("{name}: a task operation"));
        assert_eq!(task.id, TASK, "{name}");
        assert_eq!(op.verdict.name(), case.verdict, "{name}: {:?}", op.verdict);
        assert_eq!(task.status, case.status, "{name}");
        assert_eq!(task.wait_died.is_some(), case.wait_dead, "{name}");
        assert_eq!(task.reasked, case.reasked, "{name}");
        if let Some(cause) = case.cause {
            assert!(
                matches!(op.verdict, Verdict::Orphaned { cause: c, .. } if c == cause),
                "{name}: {:?}",
                op.verdict
            );
        }
        let kinds: Vec<&str> = notices.iter().map(kind).collect();
        assert!(
            contains_in_order(&kinds, case.notices),
            "{name}: {kinds:?} lacks {:?}",
            case.notices
        );
        // A call is said orphaned only when the operation is: a dead wait is no orphaned call.
        let orphaned = notices
            .iter()
            .filter(|n| matches!(n.what, What::CallOrphaned { .. }))
            .count();
        assert_eq!(
            orphaned,
            usize::from(case.verdict == "orphaned"),
            "{name}: {kinds:?}"
        );
        // Every request about the task belongs to the operation, which is the only root among
        // them.
        let operation = model.operation(op.index).expect("operation");
        assert_eq!(operation.root, op.index, "{name}");
        for &r in &operation.requests[1..] {
            assert_eq!(model.calls[r].about_task(), Some(op.index), "{name}");
            assert!(!model.is_operation_root(r), "{name}");
            assert_eq!(model.operation(r).map(|o| o.root), Some(op.index), "{name}");
        }
        // Pending while the task lives, counted once.
        let open = model.calls.iter().filter(|c| c.verdict.is_open()).count();
        assert_eq!(model.counts().pending, open, "{name}");
    }
}

#[test]
fn the_operation_lasts_from_create_to_result() {
    let mut s = created(Some(60_000));
    let created_at = s.now();
    play(
        &mut s,
        Some(60_000),
        &[Wait(700), Get("completed"), Wait(300), Result],
    );
    let (model, notices) = s.fold();
    let op = model.calls.iter().find(|c| c.task().is_some()).expect("op");
    let operation = model.operation(op.index).expect("operation");
    let duration = operation.duration_ms(s.now());
    let started = op.started_at;
    let ended = operation.ended_at.expect("ended");
    assert_eq!(duration, (ended - started).num_milliseconds());
    assert_eq!(op.task().map(|t| t.created_at < ended), Some(true));
    assert!(duration >= 1_000, "{duration}");
    assert!(created_at > started);
    // The answer names the tool, the task and the operation's elapsed time.
    let answered = notices
        .iter()
        .find_map(|n| match &n.what {
            What::CallAnswered {
                call, elapsed_ms, ..
            } if call.tool.as_deref() == Some("slow") => Some((call.clone(), *elapsed_ms)),
            _ => None,
        })
        .expect("the operation answered");
    assert_eq!(answered.0.task.as_deref(), Some(TASK));
    assert_eq!(answered.1, duration);
    // The result is the operation's.
    let response = model.calls[op.index].response().expect("result");
    assert_eq!(response["content"][0]["text"], "done");
}

#[test]
fn a_task_operation_counts_once_in_the_latency_stats() {
    let mut s = created(Some(60_000));
    play(
        &mut s,
        Some(60_000),
        &[Wait(700), Get("completed"), Wait(300), Result],
    );
    let (model, _) = s.fold();
    let op = model.calls.iter().find(|c| c.task().is_some()).expect("op");
    let duration = model
        .operation(op.index)
        .expect("operation")
        .duration_ms(s.now()) as f64;
    let by_key = stats::by_key(&model, None);
    let tool = &by_key[&stats::Key::Tool("slow".into())];
    assert_eq!((tool.count, tool.timed, tool.errors), (1, 1, 0));
    let p50 = tool.p50.expect("timed");
    assert!((p50 - duration).abs() < 1.0, "p50 {p50} vs {duration}");
    // The requests about the task belong to it: no operation of their own.
    for method in ["tasks/get", "tasks/result"] {
        assert!(
            !by_key.contains_key(&stats::Key::Method(method.into())),
            "{method} counted apart: {by_key:?}"
        );
    }
    assert_eq!(by_key[&stats::Key::Method("tools/call".into())].count, 1);
}

#[test]
fn expiry_is_dated_at_the_deadline_however_time_gets_there() {
    let s = created(Some(1_000));
    let (mut stepped, _) = s.fold();
    let created_at = stepped
        .calls
        .iter()
        .find_map(|c| c.task())
        .expect("task")
        .created_at;
    let (mut once, _) = s.fold();
    let mut ticks = Vec::new();
    for ms in (100..=3_000).step_by(100) {
        ticks.extend(stepped.advance(created_at + Duration::milliseconds(ms)));
    }
    let jump = once.advance(created_at + Duration::milliseconds(3_000));
    for model in [&stepped, &once] {
        let op = model.calls.iter().find(|c| c.task().is_some()).expect("op");
        assert_eq!(
            op.ended_at,
            Some(created_at + Duration::milliseconds(1_000))
        );
        assert!(matches!(
            op.verdict,
            Verdict::Orphaned {
                cause: OrphanCause::TaskExpired,
                ..
            }
        ));
    }
    assert_eq!(ticks, jump);
}

#[test]
fn a_plain_call_and_a_call_without_task_params_stay_plain() {
    // A result with a `task` member answering a request that asked for none is not a task.
    let mut s = Script::ticking();
    s.initialize("2025-11-25")
        .post(
            2,
            S1,
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}),
        )
        .respond(2, 200, "application/json", S1)
        .json_body(
            2,
            json!({"jsonrpc":"2.0","id":1,"result":{"task":task_fields("working", None),"content":[]}}),
        )
        .finish(2, EndHow::Eof, Leg::Upstream);
    let (model, _) = s.fold();
    let call = model.calls.iter().find(|c| c.tool.is_some()).expect("call");
    assert!(call.task().is_none());
    assert_eq!(call.verdict, Verdict::Answered);
    let operation = model.operation(call.index).expect("operation");
    assert_eq!(operation.requests, vec![call.index]);
}

#[test]
fn a_task_operation_survives_compaction() {
    let mut s = created(Some(600_000));
    for i in 0..400 {
        let stream = 1_000 + i;
        s.post(
            stream,
            S1,
            json!({"jsonrpc":"2.0","id":1_000 + i,"method":"tasks/get","params":{"taskId":TASK}}),
        );
        json_answer(
            &mut s,
            stream,
            json!({"jsonrpc":"2.0","id":1_000 + i,"result":task_fields("working", Some(600_000))}),
        );
    }
    play(&mut s, Some(600_000), &[Result]);
    let mut model = Model::with_retention(Retention {
        keep_calls: 16,
        ..Retention::default()
    });
    for event in &s.events {
        model.apply(event);
    }
    let op = model
        .calls
        .iter()
        .find(|c| c.task().is_some())
        .expect("op kept");
    assert_eq!(op.verdict, Verdict::Answered);
    let task = op.task().expect("task");
    assert!(task.requests.len() <= mcpscope_engine::model::task::MAX_REQUESTS);
    assert!(task.steps.len() <= mcpscope_engine::model::task::MAX_STEPS);
    assert!(task.dropped_steps > 0);
    let operation = model.operation(op.index).expect("operation");
    assert!(operation.requests.iter().all(|&r| model.calls.contains(r)));
}
