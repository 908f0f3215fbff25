//! MCP tasks (2025-11-25, experimental) through the proxy, with the official TypeScript SDK
//! (npm `@modelcontextprotocol/sdk` 1.x experimental tasks) on both sides: a task-capable server
//! (tests/peers/node/tasks_server.mjs, `registerToolTask` with the SDK's in-memory task store)
//! and a task-aware client (tests/peers/node/tasks_client.mjs: a task-augmented `tools/call`,
//! `tasks/get`, then `tasks/result`, asked again when a wait fails).
//!
//! Needs tests/peers/node/node_modules from `scripts/setup-peers.sh`, so the tests are ignored by
//! a plain `cargo test`; `scripts/test.sh` installs it and runs them.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::peers::{ClientRun, Proc, Proxy, of_kind, root, run_json, temp_dir, wait_ready};
use mcpscope_engine::model::{Model, TaskStatus, Verdict};
use serde_json::Value;

/// How long the task works before it completes.
const TASK_MS: u64 = 1_500;

/// A running tests/peers/node/tasks_server.mjs.
struct TasksServer {
    _proc: Proc,
    port: u16,
}

impl TasksServer {
    fn start() -> TasksServer {
        let sdk =
            root().join("tests/peers/node/node_modules/@modelcontextprotocol/sdk/package.json");
        assert!(
            sdk.exists(),
            "{} is missing: run scripts/setup-peers.sh first (npm ci in tests/peers/node)",
            sdk.display()
        );
        let child = Command::new("node")
            .arg(root().join("tests/peers/node/tasks_server.mjs"))
            .arg("0")
            .current_dir(root().join("tests/peers/node"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node tasks_server.mjs");
        let (proc, port, _, _) = wait_ready(child, "node tasks_server".into());
        TasksServer { _proc: proc, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

fn tasks_client(url: &str) -> ClientRun {
    let mut cmd = Command::new("node");
    cmd.arg(root().join("tests/peers/node/tasks_client.mjs"))
        .arg(url)
        .args(["--ms", &TASK_MS.to_string(), "--wait-timeout", "2000"])
        .current_dir(root().join("tests/peers/node"));
    run_json(
        cmd,
        &format!("node tasks client {url}"),
        Duration::from_secs(40),
    )
}

fn is_op(n: &Value, kind: &str) -> bool {
    n["kind"] == kind && n["method"] == "tools/call" && n["tool"] == "slow_task"
}

fn folded(proxy: &mut Proxy, file: &std::path::Path) -> Model {
    proxy.proc.terminate(Duration::from_secs(5));
    let rec = mcpscope_engine::record::read_file(file)
        .unwrap_or_else(|e| panic!("record::read_file: {e}\n{}", proxy.dump()));
    Model::from_events(&rec.events).0
}

/// A task-augmented `tools/call` is one pending operation (tool, task id) until `tasks/result`
/// brings its result, then one answered operation with the create → result duration.
#[test]
#[ignore = "needs Node.js with the TypeScript MCP SDK in tests/peers/node/node_modules: run scripts/test.sh (installs it)"]
fn a_task_augmented_call_is_one_operation_through_the_proxy() {
    let server = TasksServer::start();
    let dir = temp_dir();
    let file = dir.path().join("tasks.jsonl");
    let file_arg = file.to_string_lossy().to_string();
    let mut proxy = Proxy::start(&server.url(), &["--record", &file_arg]);
    let run = tasks_client(&proxy.url("/mcp"));
    assert_eq!(
        run.json["result"],
        format!("done after {TASK_MS} ms"),
        "{}",
        run.json
    );
    let task_id = run.json["taskId"].as_str().expect("taskId").to_string();

    let created = proxy
        .wait_notice(Duration::from_secs(5), |n| is_op(n, "task_created"))
        .unwrap_or_else(|| panic!("no task_created for slow_task\n{}", proxy.dump()));
    assert_eq!(created["task_id"], task_id.as_str());
    assert_eq!(created["task"], task_id.as_str());
    let answered = proxy
        .wait_notice(Duration::from_secs(5), |n| is_op(n, "call_answered"))
        .unwrap_or_else(|| panic!("no call_answered for slow_task\n{}", proxy.dump()));
    assert_eq!(answered["task"], task_id.as_str(), "{answered}");
    let elapsed = answered["elapsed_ms"].as_i64().expect("elapsed_ms");
    assert!(
        elapsed >= TASK_MS as i64,
        "the operation's duration is create → result: {elapsed} ms\n{}",
        proxy.dump()
    );
    // Nothing is orphaned, and the tools/call is answered once (when its result came).
    let notices = proxy.notices();
    assert!(
        of_kind(&notices, "call_orphaned").is_empty(),
        "{}",
        proxy.dump()
    );
    let answers = notices.iter().filter(|n| is_op(n, "call_answered")).count();
    assert_eq!(answers, 1, "{}", proxy.dump());
    let created_at = common::peers::ts(&created["t"]);
    assert!(
        common::peers::ts(&answered["t"]) - created_at
            >= chrono::Duration::milliseconds(TASK_MS as i64 - 200),
        "{}",
        proxy.dump()
    );

    let model = folded(&mut proxy, &file);
    let ops: Vec<_> = model
        .calls
        .iter()
        .filter(|c| c.tool.as_deref() == Some("slow_task"))
        .collect();
    assert_eq!(ops.len(), 1);
    let op = ops[0];
    assert_eq!(op.verdict, Verdict::Answered);
    let task = op.task().expect("a task operation");
    assert_eq!(task.id, task_id);
    assert_eq!(task.ttl_ms, Some(60_000));
    let operation = model.operation(op.index).expect("operation");
    let methods: Vec<&str> = operation.requests[1..]
        .iter()
        .map(|&c| &*model.calls[c].method)
        .collect();
    assert_eq!(methods, ["tasks/get", "tasks/result"]);
    assert!(operation.duration_ms(op.started_at) >= TASK_MS as i64);
    assert!(matches!(
        task.status,
        TaskStatus::Working | TaskStatus::Completed
    ));
}

/// The stream carrying `tasks/result` is reset: the task is alive and the result wait dead (the
/// tool is named); the client asks again, and the re-issued `tasks/result` ends the operation
/// `answered`.
#[test]
#[ignore = "needs Node.js with the TypeScript MCP SDK in tests/peers/node/node_modules: run scripts/test.sh (installs it)"]
fn a_reset_tasks_result_leaves_the_task_alive_and_a_second_ask_answers_it() {
    let server = TasksServer::start();
    let dir = temp_dir();
    let file = dir.path().join("tasks-reset.jsonl");
    let file_arg = file.to_string_lossy().to_string();
    let mut proxy = Proxy::start(
        &server.url(),
        &[
            "--record",
            &file_arg,
            "--fault",
            "reset after 300ms when method=tasks/result once",
        ],
    );
    let run = tasks_client(&proxy.url("/mcp"));
    assert_eq!(
        run.json["result"],
        format!("done after {TASK_MS} ms"),
        "{}",
        run.json
    );
    assert!(run.json["attempts"].as_u64() >= Some(2), "{}", run.json);
    let task_id = run.json["taskId"].as_str().expect("taskId").to_string();

    let died = proxy
        .wait_notice(Duration::from_secs(5), |n| {
            is_op(n, "task_result_wait_died")
        })
        .unwrap_or_else(|| {
            panic!(
                "no task_result_wait_died naming slow_task\n{}",
                proxy.dump()
            )
        });
    assert_eq!(died["task_id"], task_id.as_str(), "{died}");
    assert_eq!(died["how"], "reset", "{died}");
    let answered = proxy
        .wait_notice(Duration::from_secs(5), |n| is_op(n, "call_answered"))
        .unwrap_or_else(|| panic!("no call_answered for slow_task\n{}", proxy.dump()));
    assert!(common::peers::ts(&answered["t"]) > common::peers::ts(&died["t"]));
    // The operation was never orphaned: only the dead wait's own request was.
    let notices = proxy.notices();
    let orphaned_op = notices.iter().any(|n| is_op(n, "call_orphaned"));
    assert!(!orphaned_op, "{}", proxy.dump());

    let model = folded(&mut proxy, &file);
    let op = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("slow_task"))
        .expect("the operation");
    assert_eq!(op.verdict, Verdict::Answered, "{:?}", op.verdict);
    let task = op.task().expect("a task operation");
    assert_eq!(task.waits_lost, 1);
    assert_eq!(task.reasked, 1);
    assert!(task.wait_died.is_none());
    assert_eq!(op.reaction.retries, 1);
    let results: Vec<_> = model
        .operation(op.index)
        .expect("operation")
        .requests
        .iter()
        .map(|&c| &model.calls[c])
        .filter(|c| c.method == "tasks/result")
        .map(|c| c.verdict.name())
        .collect();
    assert_eq!(results.first(), Some(&"orphaned"), "{results:?}");
    assert_eq!(results.last(), Some(&"answered"), "{results:?}");
}

/// `--rescue` on a dying `tasks/result` stream: the client gets a JSON-RPC error for that request
/// at once (saying the task lives), not a wait until its own timeout; the task is left alone (no
/// `tasks/cancel`, never orphaned), and the re-issued `tasks/result` brings the result.
#[test]
#[ignore = "needs Node.js with the TypeScript MCP SDK in tests/peers/node/node_modules: run scripts/test.sh (installs it)"]
fn rescue_answers_a_dying_tasks_result_and_leaves_the_task_alive() {
    let server = TasksServer::start();
    let dir = temp_dir();
    let file = dir.path().join("tasks-rescue.jsonl");
    let file_arg = file.to_string_lossy().to_string();
    let mut proxy = Proxy::start(
        &server.url(),
        &[
            "--record",
            &file_arg,
            "--rescue",
            "--fault",
            "reset after 300ms when method=tasks/result once",
        ],
    );
    let run = tasks_client(&proxy.url("/mcp"));
    assert_eq!(
        run.json["result"],
        format!("done after {TASK_MS} ms"),
        "{}",
        run.json
    );
    assert_eq!(run.json["attempts"], 2, "{}", run.json);
    let error = run.json["errors"][0]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("mcpscope --rescue") && error.contains("still lives"),
        "the client's tasks/result failed with the rescue's error: {}",
        run.json
    );
    let task_id = run.json["taskId"].as_str().expect("taskId").to_string();
    assert!(error.contains(&task_id), "{error}");

    let rescued = proxy
        .wait_notice(Duration::from_secs(5), |n| n["kind"] == "call_rescued")
        .unwrap_or_else(|| panic!("no call_rescued\n{}", proxy.dump()));
    assert_eq!(rescued["method"], "tasks/result", "{rescued}");
    proxy
        .wait_notice(Duration::from_secs(5), |n| is_op(n, "call_answered"))
        .unwrap_or_else(|| panic!("no call_answered for slow_task\n{}", proxy.dump()));
    let notices = proxy.notices();
    assert!(
        !notices.iter().any(|n| is_op(n, "call_orphaned")),
        "{}",
        proxy.dump()
    );

    let model = folded(&mut proxy, &file);
    assert!(
        !model.calls.iter().any(|c| c.method == "tasks/cancel"),
        "the rescue cancels no task"
    );
    let op = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("slow_task"))
        .expect("the operation");
    assert_eq!(op.verdict, Verdict::Answered, "{:?}", op.verdict);
    let task = op.task().expect("a task operation");
    assert_eq!((task.waits_lost, task.reasked), (1, 1));
    let waits: Vec<_> = model
        .operation(op.index)
        .expect("operation")
        .requests
        .iter()
        .map(|&c| &model.calls[c])
        .filter(|c| c.method == "tasks/result")
        .collect();
    assert_eq!(waits.len(), 2);
    assert!(waits[0].rescued().is_some(), "{:?}", waits[0]);
    assert_eq!(waits[1].verdict, Verdict::Answered);
}
