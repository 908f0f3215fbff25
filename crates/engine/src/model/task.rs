//! MCP tasks (2025-11-25, experimental; an extension from 2026-07-28): a task-augmented request
//! is one operation, from the request that created the task to the `tasks/result` answer that
//! carries its result.
//!
//! A `tools/call` whose params carry `task` and whose answer is a `CreateTaskResult` (a `task`
//! object with a `taskId`) stays pending while the task lives. The requests about the task
//! (`tasks/get`, `tasks/result`, `tasks/cancel`) are linked to it; their answers, `tasks/list`
//! and `notifications/tasks/status` update its status. It ends with the `tasks/result` answer
//! (its result or error is the operation's; a result means the task `completed`, unless it was
//! known `failed` or `cancelled`), a `failed` or `cancelled` status, or when its
//! ttl runs out by the model's clock ([`Model::advance`]). A `tasks/result` whose stream dies
//! does not end it: the task lives and the client can ask again.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use super::{Call, Death, Model, Notice, OrphanCause, Verdict, What};
use crate::event::{Direction, StreamId};

/// How many steps of a task's timeline are kept (the oldest give way; they are counted).
pub const MAX_STEPS: usize = 64;

/// How many requests about one task are listed (the oldest give way; they are counted).
pub const MAX_REQUESTS: usize = 256;

/// The methods of requests about a task, named by their `taskId` param.
pub const TASK_METHODS: &[&str] = &["tasks/get", "tasks/result", "tasks/cancel"];

/// JSON-RPC "invalid params": what a server answers for a task it does not know (or no longer).
const INVALID_PARAMS: i64 = -32602;

/// A task's status, as the server reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The request is being processed.
    Working,
    /// The server waits for input from the client.
    InputRequired,
    /// Done; the result waits at `tasks/result`.
    Completed,
    /// It failed.
    Failed,
    /// It was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Reads the wire name (`working`, `input_required`, `completed`, `failed`, `cancelled`).
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether the task is over (`completed`, `failed`, `cancelled`).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// One step of a task's timeline.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskStep {
    /// When it was seen.
    pub at: DateTime<Utc>,
    /// What happened.
    pub what: StepKind,
}

/// What a step of a task's timeline is.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum StepKind {
    /// The server answered the request with a `CreateTaskResult`.
    Created {
        /// The status it was created with.
        status: TaskStatus,
    },
    /// The client sent a request about the task (`tasks/get`, `tasks/result`, `tasks/cancel`).
    Asked {
        /// The method.
        method: String,
        /// Its call index in [`Model::calls`].
        call: usize,
    },
    /// The status changed (a `tasks/get` or `tasks/cancel` answer, `tasks/list`, or
    /// `notifications/tasks/status`).
    Status {
        /// The new status.
        status: TaskStatus,
        /// The server's `statusMessage`, if any.
        message: Option<String>,
    },
    /// A `tasks/result` wait died (its stream ended without the answer): the task lives.
    WaitDied {
        /// The `tasks/result` call.
        call: usize,
        /// The stream that died.
        stream: StreamId,
    },
    /// The result (or the operation's error) arrived.
    Result {
        /// The `tasks/result` call that brought it.
        call: usize,
        /// Whether it was an error (JSON-RPC, or a tool's `isError`).
        error: bool,
    },
    /// The ttl ran out before the result was fetched.
    Expired,
}

impl StepKind {
    /// A short phrase for timelines: `created (working)`, `tasks/get`, `status completed`,
    /// `result wait died on #7`, `result`, `ttl expired`.
    pub fn describe(&self) -> String {
        match self {
            Self::Created { status } => format!("created ({})", status.name()),
            Self::Asked { method, .. } => method.clone(),
            Self::Status {
                status,
                message: Some(message),
            } => format!("status {} — {message}", status.name()),
            Self::Status { status, .. } => format!("status {}", status.name()),
            Self::WaitDied { stream, .. } => format!("result wait died on #{stream}"),
            Self::Result { error: false, .. } => "result".to_string(),
            Self::Result { error: true, .. } => "result (error)".to_string(),
            Self::Expired => "ttl expired".to_string(),
        }
    }
}

/// A task created by a task-augmented request, as the model follows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The server's `taskId`.
    pub id: String,
    /// Its latest status.
    pub status: TaskStatus,
    /// The latest `statusMessage`.
    pub status_message: Option<String>,
    /// Its ttl in ms (`None`: unlimited).
    pub ttl_ms: Option<u64>,
    /// The suggested poll interval in ms.
    pub poll_ms: Option<u64>,
    /// When the `CreateTaskResult` was seen (the ttl counts from here, by the model's clock).
    pub created_at: DateTime<Utc>,
    /// The server's `createdAt`, as sent.
    pub server_created_at: Option<String>,
    /// The requests about it, oldest first (call indices; the newest [`MAX_REQUESTS`]).
    pub requests: Vec<usize>,
    /// Requests about it no longer listed.
    pub dropped_requests: u64,
    /// Its timeline (the newest [`MAX_STEPS`]).
    pub steps: Vec<TaskStep>,
    /// Steps no longer listed.
    pub dropped_steps: u64,
    /// The death of the latest `tasks/result` wait, while the client has not asked again.
    pub wait_died: Option<Death>,
    /// How many `tasks/result` waits died.
    pub waits_lost: u32,
    /// How many times the client asked for the result again after a wait died.
    pub reasked: u32,
}

impl Task {
    /// The first eight characters of its id, for narrow columns.
    pub fn short_id(&self) -> &str {
        match self.id.char_indices().nth(8) {
            Some((end, _)) => &self.id[..end],
            None => &self.id,
        }
    }

    /// When its ttl runs out (`None`: unlimited): the one definition of a task's expiry.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        let ttl = i64::try_from(self.ttl_ms?).unwrap_or(i64::MAX);
        let window = TimeDelta::try_milliseconds(ttl).unwrap_or(TimeDelta::MAX);
        Some(
            self.created_at
                .checked_add_signed(window)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }

    fn step(&mut self, at: DateTime<Utc>, what: StepKind) {
        self.steps.push(TaskStep { at, what });
        if self.steps.len() > MAX_STEPS {
            self.steps.remove(0);
            self.dropped_steps += 1;
        }
    }
}

/// One logical operation: a plain call, a task-augmented call with the requests about its
/// task, or the rounds of a multi-round-trip call. Made by [`Model::operation`].
#[derive(Debug, Clone, PartialEq)]
pub struct Operation<'a> {
    /// The call that began it (the task-augmented request, or the first round).
    pub root: usize,
    /// Every request that belongs to it, in order (the root first).
    pub requests: Vec<usize>,
    /// When it began: the root's request.
    pub started_at: DateTime<Utc>,
    /// When it ended (its result, error, orphaning or cancellation), if it did.
    pub ended_at: Option<DateTime<Utc>>,
    /// Its fate: the last round's, or the task operation's.
    pub verdict: &'a Verdict,
    /// The task, for a task operation.
    pub task: Option<&'a Task>,
}

impl Operation<'_> {
    /// Milliseconds from its start to its end, or to `now` while it goes on: the one duration
    /// of an operation (create → result for a task).
    pub fn duration_ms(&self, now: DateTime<Utc>) -> i64 {
        (self.ended_at.unwrap_or(now) - self.started_at).num_milliseconds()
    }
}

/// The task a `CreateTaskResult` creates, if `result` is one answering a request that asked
/// for a task.
fn created_task(call: &Call, result: &Value, t: DateTime<Utc>) -> Option<Task> {
    // The result first: the request's params are parsed only for a result that holds a task.
    let task = result.get("task")?;
    if call.dir != Direction::ClientToServer
        || !call.params().get("task").is_some_and(Value::is_object)
    {
        return None;
    }
    let id = task.get("taskId")?.as_str()?.to_string();
    let status = task
        .get("status")
        .and_then(Value::as_str)
        .and_then(TaskStatus::parse)
        .unwrap_or(TaskStatus::Working);
    let mut made = Task {
        id,
        status,
        status_message: text(task, "statusMessage"),
        ttl_ms: task.get("ttl").and_then(Value::as_u64),
        poll_ms: task.get("pollInterval").and_then(Value::as_u64),
        created_at: t,
        server_created_at: text(task, "createdAt"),
        requests: Vec::new(),
        dropped_requests: 0,
        steps: Vec::new(),
        dropped_steps: 0,
        wait_died: None,
        waits_lost: 0,
        reasked: 0,
    };
    made.step(t, StepKind::Created { status });
    Some(made)
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Call {
    /// The task this call created, if it is a task operation.
    pub fn task(&self) -> Option<&Task> {
        self.aside.as_ref()?.task.as_deref()
    }

    /// The task operation this request is about (`tasks/get`, `tasks/result`, `tasks/cancel`),
    /// as a call index.
    pub fn about_task(&self) -> Option<usize> {
        self.aside.as_ref()?.about_task
    }

    /// Whether the call is counted, judged and shown on its own: a request about a task
    /// (`tasks/get`, `tasks/result`, `tasks/cancel`) is not — it belongs to its task's
    /// operation, whose verdict is what counts (a dead `tasks/result` wait orphans nothing).
    pub fn stands_alone(&self) -> bool {
        self.about_task().is_none()
    }

    fn task_mut(&mut self) -> Option<&mut Task> {
        self.aside.as_mut()?.task.as_deref_mut()
    }
}

impl Model {
    /// The operation a call belongs to: its task operation (for a request about a task), or
    /// its multi-round-trip call from the first round to the last; a plain call is an operation
    /// of one request. The one place an operation's start, end and duration are defined.
    pub fn operation(&self, index: usize) -> Option<Operation<'_>> {
        let call = self.calls.get(index)?;
        let mut root = call.about_task().unwrap_or(index);
        while let Some(prev) = self.calls.get(root).and_then(Call::continues) {
            if !self.calls.contains(prev) {
                break;
            }
            root = prev;
        }
        let first = self.calls.get(root)?;
        let mut requests = vec![root];
        if let Some(task) = first.task() {
            requests.extend(
                task.requests
                    .iter()
                    .copied()
                    .filter(|&c| self.calls.contains(c)),
            );
            return Some(Operation {
                root,
                requests,
                started_at: first.started_at,
                ended_at: first.ended_at,
                verdict: &first.verdict,
                task: Some(task),
            });
        }
        let mut last = first;
        while let Some(next) = last.continued_by().and_then(|c| self.calls.get(c)) {
            requests.push(next.index);
            last = next;
        }
        Some(Operation {
            root,
            requests,
            started_at: first.started_at,
            ended_at: if last.input_required {
                None
            } else {
                last.ended_at
            },
            verdict: &last.verdict,
            task: None,
        })
    }

    /// Whether a call begins an operation of its own (it is not a request about a task, nor a
    /// later round of a multi-round-trip call): what per-operation counts count.
    pub fn is_operation_root(&self, index: usize) -> bool {
        self.calls
            .get(index)
            .is_some_and(|c| c.about_task().is_none() && c.continues().is_none())
    }

    /// The task operation (a call index) with this task id in a session.
    pub fn task_operation(&self, session: usize, task_id: &str) -> Option<usize> {
        self.tasks
            .get(&(session, task_id.to_string()))
            .copied()
            .filter(|&c| self.calls.contains(c))
    }

    /// Links a new client request about a task (`tasks/get`, `tasks/result`, `tasks/cancel`)
    /// to its operation.
    pub(super) fn link_task_request(&mut self, index: usize, t: DateTime<Utc>) {
        let call = &self.calls[index];
        if call.dir != Direction::ClientToServer || !TASK_METHODS.contains(&&*call.method) {
            return;
        }
        let Some(task_id) = call
            .params()
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        let Some(op) = self.task_operation(call.session, &task_id) else {
            return;
        };
        let method = call.method.to_string();
        self.calls[index].aside_mut().about_task = Some(op);
        let reasked = method == "tasks/result";
        let open = self.calls[op].verdict.is_open();
        let Some(task) = self.calls[op].task_mut() else {
            return;
        };
        task.requests.push(index);
        if task.requests.len() > MAX_REQUESTS {
            task.requests.remove(0);
            task.dropped_requests += 1;
        }
        task.step(
            t,
            StepKind::Asked {
                method,
                call: index,
            },
        );
        if reasked && open && task.wait_died.take().is_some() {
            task.reasked += 1;
            self.calls[op].reaction.retries += 1;
        }
    }

    /// A client request's answer: makes a task operation of a `CreateTaskResult`. Returns
    /// whether it did (the call then stays pending).
    pub(super) fn task_created(
        &mut self,
        index: usize,
        result: &Value,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) -> bool {
        let call = &self.calls[index];
        if !call.verdict.is_open() || call.task().is_some() {
            return false;
        }
        let Some(task) = created_task(call, result, t) else {
            return false;
        };
        let session = call.session;
        let (id, ttl_ms, poll_ms, status) =
            (task.id.clone(), task.ttl_ms, task.poll_ms, task.status);
        if let Some(deadline) = task.deadline() {
            self.task_due.insert((deadline, index));
        }
        self.calls[index].aside_mut().task = Some(Box::new(task));
        self.tasks.insert((session, id.clone()), index);
        self.calls[index].seq.1 = self.seq();
        out.push(Notice {
            server: None,
            t,
            what: What::TaskCreated {
                call: self.call_ref(index),
                task_id: id,
                status: status.name(),
                ttl_ms,
                poll_ms,
            },
        });
        true
    }

    /// After a request about a task was answered: its result updates the task, and a
    /// `tasks/result` answer ends the operation with its result (the task `completed`, unless
    /// `failed` or `cancelled` was known) or its error (the status as last known).
    pub(super) fn task_request_answered(
        &mut self,
        index: usize,
        stream: StreamId,
        response: Result<&Value, &Value>,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        let Some(op) = self.calls[index].about_task() else {
            return;
        };
        if !self.calls.contains(op) {
            return;
        }
        let method = self.calls[index].method.to_string();
        match (method.as_str(), response) {
            ("tasks/result", Ok(result)) => {
                if !self.calls[op].verdict.is_open() {
                    return;
                }
                let tool_error = super::call::is_tool_error(result);
                let reply = self.calls[index].reply.clone();
                let elapsed_ms = (t - self.calls[op].started_at).num_milliseconds();
                if let Some(task) = self.calls[op].task_mut() {
                    task.wait_died = None;
                    // The result is there: the task completed, unless it was known to have
                    // failed or been cancelled.
                    if !task.status.is_terminal() {
                        task.status = TaskStatus::Completed;
                    }
                    task.step(
                        t,
                        StepKind::Result {
                            call: index,
                            error: tool_error,
                        },
                    );
                }
                self.remove_task_deadline(op);
                let call = &mut self.calls[op];
                if call.evicted.is_none() {
                    call.reply = reply;
                }
                call.tool_error = tool_error;
                self.set_verdict(op, Verdict::Answered, Some(t));
                out.push(Notice {
                    server: None,
                    t,
                    what: What::CallAnswered {
                        call: self.call_ref(op),
                        stream,
                        elapsed_ms,
                        is_error: tool_error,
                    },
                });
            }
            (_, Err(error)) => {
                if !self.calls[op].verdict.is_open() {
                    return;
                }
                let code = error.get("code").and_then(Value::as_i64);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string();
                if code == Some(INVALID_PARAMS) {
                    // The server does not know the task (any more): nothing brings it back.
                    let death = self.task_death(op, t);
                    self.remove_task_deadline(op);
                    self.orphan(op, OrphanCause::TaskUnknown, death, t, out);
                } else if method == "tasks/result" {
                    if let Some(task) = self.calls[op].task_mut() {
                        task.wait_died = None;
                        task.step(
                            t,
                            StepKind::Result {
                                call: index,
                                error: true,
                            },
                        );
                    }
                    self.remove_task_deadline(op);
                    let reply = self.calls[index].reply.clone();
                    if self.calls[op].evicted.is_none() {
                        self.calls[op].reply = reply;
                    }
                    self.fail(op, message, t, out);
                }
            }
            (_, Ok(result)) => self.task_status(op, result, t, out),
        }
    }

    /// `tasks/list`'s answer: each listed task that is an operation here gets its status.
    pub(super) fn tasks_listed(
        &mut self,
        session: usize,
        result: &Value,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        let Some(tasks) = result.get("tasks").and_then(Value::as_array) else {
            return;
        };
        for task in tasks {
            if let Some(id) = task.get("taskId").and_then(Value::as_str)
                && let Some(op) = self.task_operation(session, id)
            {
                self.task_status(op, task, t, out);
            }
        }
    }

    /// `notifications/tasks/status` from the server.
    pub(super) fn task_notified(
        &mut self,
        session: usize,
        params: &Value,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        if let Some(id) = params.get("taskId").and_then(Value::as_str)
            && let Some(op) = self.task_operation(session, id)
        {
            self.task_status(op, params, t, out);
        }
    }

    /// A task's fields as the server reported them (`status`, `statusMessage`, `ttl`,
    /// `pollInterval`). A `failed` or `cancelled` status ends the operation.
    fn task_status(&mut self, op: usize, fields: &Value, t: DateTime<Utc>, out: &mut Vec<Notice>) {
        let open = self.calls[op].verdict.is_open();
        let Some(task) = self.calls[op].task_mut() else {
            return;
        };
        let old_deadline = task.deadline();
        if let Some(ttl) = fields.get("ttl") {
            task.ttl_ms = ttl.as_u64();
        }
        if let Some(poll) = fields.get("pollInterval").and_then(Value::as_u64) {
            task.poll_ms = Some(poll);
        }
        let new_deadline = task.deadline();
        let Some(status) = fields
            .get("status")
            .and_then(Value::as_str)
            .and_then(TaskStatus::parse)
        else {
            return;
        };
        let message = text(fields, "statusMessage");
        let changed = status != task.status || message != task.status_message;
        task.status = status;
        task.status_message.clone_from(&message);
        let id = task.id.clone();
        if changed {
            task.step(
                t,
                StepKind::Status {
                    status,
                    message: message.clone(),
                },
            );
        }
        if open && old_deadline != new_deadline {
            if let Some(d) = old_deadline {
                self.task_due.remove(&(d, op));
            }
            if let Some(d) = new_deadline {
                self.task_due.insert((d, op));
            }
        }
        if !changed {
            return;
        }
        self.calls[op].seq.1 = self.seq();
        out.push(Notice {
            server: None,
            t,
            what: What::TaskStatus {
                call: self.call_ref(op),
                task_id: id,
                status: status.name(),
                message: message.clone(),
            },
        });
        if !open {
            return;
        }
        match status {
            TaskStatus::Failed => {
                self.remove_task_deadline(op);
                let text = match message {
                    Some(m) => format!("task failed: {m}"),
                    None => "task failed".to_string(),
                };
                self.fail(op, text, t, out);
            }
            TaskStatus::Cancelled => {
                self.remove_task_deadline(op);
                self.set_verdict(op, Verdict::Cancelled { at: t }, Some(t));
                out.push(Notice {
                    server: None,
                    t,
                    what: What::CallCancelled {
                        call: self.call_ref(op),
                    },
                });
            }
            _ => {}
        }
    }

    /// A `tasks/result` request's wait ended without the answer (its stream died, or the HTTP
    /// exchange failed): the task lives, and the client must ask again. Past the task's ttl,
    /// nothing can bring the result back: the operation is orphaned.
    pub(super) fn task_wait_lost(
        &mut self,
        index: usize,
        death: Death,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        let call = &self.calls[index];
        if call.method != "tasks/result" {
            return;
        }
        let Some(op) = call.about_task() else {
            return;
        };
        let request_id = call.id.value();
        if !self.calls.get(op).is_some_and(|c| c.verdict.is_open()) {
            return;
        }
        let Some(task) = self.calls[op].task_mut() else {
            return;
        };
        task.wait_died = Some(death);
        task.waits_lost += 1;
        task.step(
            t,
            StepKind::WaitDied {
                call: index,
                stream: death.stream,
            },
        );
        let id = task.id.clone();
        let expired = task.deadline().is_some_and(|d| d <= t);
        self.calls[op].seq.1 = self.seq();
        out.push(Notice {
            server: None,
            t,
            what: What::TaskResultWaitDied {
                call: self.call_ref(op),
                task_id: id,
                stream: death.stream,
                how: death.how,
                result_request_id: request_id,
            },
        });
        if expired {
            self.expire_task(op, t, out);
        }
    }

    /// The ttl of a task ran out at `deadline` (by [`Model::advance`]). While a `tasks/result`
    /// still waits on a live stream, that wait decides.
    pub(super) fn task_expiry_due(
        &mut self,
        deadline: DateTime<Utc>,
        op: usize,
        out: &mut Vec<Notice>,
    ) {
        if !self.calls.get(op).is_some_and(|c| c.verdict.is_open()) {
            return;
        }
        let waiting = self.calls[op].task().is_some_and(|task| {
            task.requests.iter().any(|&c| {
                self.calls
                    .get(c)
                    .is_some_and(|c| c.method == "tasks/result" && c.verdict == Verdict::Pending)
            })
        });
        if !waiting {
            self.expire_task(op, deadline, out);
        }
    }

    fn expire_task(&mut self, op: usize, t: DateTime<Utc>, out: &mut Vec<Notice>) {
        self.remove_task_deadline(op);
        if let Some(task) = self.calls[op].task_mut() {
            task.step(t, StepKind::Expired);
        }
        let death = self.task_death(op, t);
        self.orphan(op, OrphanCause::TaskExpired, death, t, out);
    }

    /// The death an orphaned task operation carries: its last lost wait's, or none (dated `t`).
    fn task_death(&self, op: usize, t: DateTime<Utc>) -> Death {
        let call = &self.calls[op];
        call.task()
            .and_then(|task| task.wait_died)
            .unwrap_or(Death {
                stream: call.owner,
                at: t,
                how: None,
                leg: None,
            })
    }

    fn remove_task_deadline(&mut self, op: usize) {
        if let Some(deadline) = self.calls[op].task().and_then(Task::deadline) {
            self.task_due.remove(&(deadline, op));
        }
    }
}
