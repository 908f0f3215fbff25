//! MCP tasks (2025-11-25, `basic/utilities/tasks`) in the test server: the task-capable tool
//! `slow_task` answers a task-augmented `tools/call` with a `CreateTaskResult`, works `ms`
//! milliseconds, then completes. `tasks/get`, `tasks/result` (which waits for the task's end),
//! `tasks/list` and `tasks/cancel` answer about it, and every status change is announced with
//! `notifications/tasks/status` on the session's GET streams.
//!
//! Bounded: at most [`MAX_TASKS`] tasks are kept (the oldest finished one is forgotten first), a
//! task lives at most [`MAX_TTL_MS`], and a `tasks/result` wait ends with the task or the server.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use super::Shared;
use super::tools::{INVALID_PARAMS, error, result};

/// The task-capable tool.
pub(crate) const TASK_TOOL: &str = "slow_task";

/// How long `slow_task` works by default, ms.
pub(crate) const DEFAULT_WORK_MS: u64 = 1_500;

/// The longest `slow_task` works, ms.
const MAX_WORK_MS: u64 = 60_000;

/// The ttl given when the request names none, ms.
const DEFAULT_TTL_MS: u64 = 60_000;

/// The longest ttl granted, ms.
pub(crate) const MAX_TTL_MS: u64 = 600_000;

/// The poll interval suggested, ms.
const POLL_MS: u64 = 100;

/// Tasks kept at most.
pub(crate) const MAX_TASKS: usize = 256;

/// The first revision with tasks.
pub(crate) const FIRST_TASKS_REVISION: &str = "2025-11-25";

/// The `_meta` key that ties a `tasks/result` answer to its task.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Whether `version` has tasks (2025-11-25 and later).
pub(crate) fn speaks_tasks(version: &str) -> bool {
    mcpscope_engine::revision::at_least(version, FIRST_TASKS_REVISION)
}

/// The `tasks` server capability: list, cancel, and task-augmented `tools/call`.
pub(crate) fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// The `slow_task` tool as `tools/list` shows it.
pub(crate) fn tool() -> Value {
    json!({
        "name": TASK_TOOL,
        "description": "Works `ms` milliseconds (default 1500), then returns. Called as a task (2025-11-25), it answers with a task at once; tasks/result brings the result.",
        "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}},
        "execution": {"taskSupport": "optional"},
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

/// A task's status (the wire names of 2025-11-25).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Working,
    Completed,
    Cancelled,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug)]
struct Entry {
    id: String,
    session: Option<String>,
    status: Status,
    message: Option<String>,
    created_at: String,
    updated_at: String,
    ttl_ms: u64,
    born: Instant,
    /// The tool's result, once completed.
    result: Option<Value>,
}

impl Entry {
    /// The task as the wire shows it (`Task`).
    fn wire(&self) -> Value {
        let mut task = json!({
            "taskId": self.id,
            "status": self.status.name(),
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttl": self.ttl_ms,
            "pollInterval": POLL_MS,
        });
        if let Some(message) = &self.message {
            task["statusMessage"] = json!(message);
        }
        task
    }

    fn expired(&self) -> bool {
        self.born.elapsed() >= Duration::from_millis(self.ttl_ms)
    }
}

/// The server's tasks.
#[derive(Debug)]
pub(crate) struct Tasks {
    table: Mutex<VecDeque<Entry>>,
    /// Bumped on every change: `tasks/result` waits on it.
    changed: watch::Sender<u64>,
    next: std::sync::atomic::AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

impl Default for Tasks {
    fn default() -> Self {
        Self {
            table: Mutex::new(VecDeque::new()),
            changed: watch::channel(0).0,
            next: std::sync::atomic::AtomicU64::new(1),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Entry>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Ends every wait (the server stops).
    pub(crate) fn end_all(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.bump();
    }

    /// Forgets expired tasks.
    fn sweep(table: &mut VecDeque<Entry>) {
        table.retain(|e| !e.expired());
    }

    /// Finds a live task of `session` (`Err`: the JSON-RPC error for an unknown one).
    fn with<T>(
        &self,
        id: &Value,
        session: Option<&str>,
        params: &Value,
        f: impl FnOnce(&mut Entry) -> T,
    ) -> Result<T, Value> {
        let task_id = params.get("taskId").and_then(Value::as_str).unwrap_or("");
        let mut table = self.lock();
        Self::sweep(&mut table);
        match table
            .iter_mut()
            .find(|e| e.id == task_id && e.session.as_deref() == session)
        {
            Some(entry) => Ok(f(entry)),
            None => Err(error(
                id,
                INVALID_PARAMS,
                &format!("Task not found: {task_id}"),
            )),
        }
    }
}

/// Answers a task-augmented `tools/call` of `slow_task`: creates the task, starts its work, and
/// returns the `CreateTaskResult`.
pub(crate) fn create(
    shared: &Arc<Shared>,
    session: Option<&str>,
    id: &Value,
    params: &Value,
) -> Value {
    let work_ms = params
        .pointer("/arguments/ms")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_WORK_MS)
        .min(MAX_WORK_MS);
    let ttl_ms = params
        .pointer("/task/ttl")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TTL_MS)
        .min(MAX_TTL_MS);
    let tasks = &shared.tasks;
    let n = tasks.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let task_id = format!("task-{n:04}-{}", &shared.new_session_id()[..8]);
    let created = now_text();
    let entry = Entry {
        id: task_id.clone(),
        session: session.map(str::to_string),
        status: Status::Working,
        message: None,
        created_at: created.clone(),
        updated_at: created,
        ttl_ms,
        born: Instant::now(),
        result: None,
    };
    let wire = entry.wire();
    {
        let mut table = tasks.lock();
        make_room(&mut table);
        table.push_back(entry);
    }
    let worker = Arc::clone(shared);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(work_ms)).await;
        let text = format!("done after {work_ms} ms");
        let done = json!({"content": [{"type": "text", "text": text}]});
        set_status(&worker, &task_id, Status::Completed, None, Some(done));
    });
    result(id, json!({"task": wire}))
}

/// Forgets expired tasks, then the oldest finished ones (else the oldest) past the bound.
fn make_room(table: &mut VecDeque<Entry>) {
    Tasks::sweep(table);
    while table.len() >= MAX_TASKS {
        let at = table
            .iter()
            .position(|e| e.status != Status::Working)
            .unwrap_or(0);
        table.remove(at);
    }
}

/// Moves a working task to `status` and announces it; a task already over stays as it is.
fn set_status(
    shared: &Shared,
    task_id: &str,
    status: Status,
    message: Option<String>,
    done: Option<Value>,
) -> Option<Value> {
    let (wire, session) = {
        let mut table = shared.tasks.lock();
        let entry = table
            .iter_mut()
            .find(|e| e.id == task_id && e.status == Status::Working)?;
        entry.status = status;
        entry.message = message;
        entry.updated_at = now_text();
        entry.result = done;
        (entry.wire(), entry.session.clone())
    };
    shared.tasks.bump();
    if let Some(session) = session {
        shared.broadcast(
            &session,
            &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": wire}),
        );
    }
    Some(wire)
}

/// Answers `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`; `None` for other
/// methods.
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    session: Option<&str>,
    id: &Value,
    method: &str,
    params: &Value,
) -> Option<Value> {
    let tasks = &shared.tasks;
    Some(match method {
        "tasks/get" => match tasks.with(id, session, params, |e| e.wire()) {
            Ok(task) => result(id, task),
            Err(e) => e,
        },
        "tasks/list" => {
            let mut table = tasks.lock();
            Tasks::sweep(&mut table);
            let listed: Vec<Value> = table
                .iter()
                .filter(|e| e.session.as_deref() == session)
                .map(Entry::wire)
                .collect();
            result(id, json!({"tasks": listed}))
        }
        "tasks/cancel" => {
            let task_id = params.get("taskId").and_then(Value::as_str).unwrap_or("");
            let status = match tasks.with(id, session, params, |e| e.status) {
                Ok(status) => status,
                Err(e) => return Some(e),
            };
            if status != Status::Working {
                return Some(error(
                    id,
                    INVALID_PARAMS,
                    &format!(
                        "Cannot cancel task {task_id}: it is already {}",
                        status.name()
                    ),
                ));
            }
            match set_status(
                shared,
                task_id,
                Status::Cancelled,
                Some("cancelled by the client".into()),
                None,
            ) {
                Some(task) => result(id, task),
                None => error(id, INVALID_PARAMS, &format!("Task not found: {task_id}")),
            }
        }
        "tasks/result" => wait_result(shared, session, id, params).await,
        _ => return None,
    })
}

/// `tasks/result`: waits until the task is over, then answers with its result (tied to the task
/// by `_meta`), or the error of a cancelled, expired or unknown task.
async fn wait_result(shared: &Shared, session: Option<&str>, id: &Value, params: &Value) -> Value {
    let tasks = &shared.tasks;
    let mut changed = tasks.changed.subscribe();
    loop {
        let state = tasks.with(id, session, params, |e| {
            (e.status, e.result.clone(), e.id.clone(), e.born, e.ttl_ms)
        });
        let (status, done, task_id, born, ttl_ms) = match state {
            Ok(state) => state,
            Err(e) => return e,
        };
        match status {
            Status::Completed => {
                let mut answer = done.unwrap_or_else(|| json!({"content": []}));
                answer["_meta"] = json!({RELATED_TASK: {"taskId": task_id}});
                return result(id, answer);
            }
            Status::Cancelled => {
                return error(
                    id,
                    super::tools::INVALID_REQUEST,
                    &format!("Task {task_id} was cancelled"),
                );
            }
            Status::Working => {}
        }
        if tasks.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return error(id, -32603, "the server is shutting down");
        }
        // Wake at the next change, or when the ttl runs out.
        let left = Duration::from_millis(ttl_ms).saturating_sub(born.elapsed());
        let _ = tokio::time::timeout(left + Duration::from_millis(1), changed.changed()).await;
    }
}
