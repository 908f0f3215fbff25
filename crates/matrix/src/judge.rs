//! One cell's judgement: what the proxy's model saw of the provoked call, plus the client process.

use chrono::{DateTime, Utc};
use mcpscope_analysis::check::{may_have_executed, non_idempotent};
use mcpscope_engine::event::{Direction, Leg};
use mcpscope_engine::model::{Call, Model, StepKind, Verdict};

use mcpscope_engine::wire::ContentKind;

use super::cases::Expect;
use super::client::{ClientRun, Stop};
use super::evidence::Evidence;

/// A client that reacts within this long after the death gave up promptly.
pub const PROMPT_MS: i64 = 2_000;

/// How much sooner than the server's `retry:` hint a resumption may come (timer granularity).
const RETRY_SLACK_MS: i64 = 100;

/// What the client did with the provoked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The call was answered.
    Ok,
    /// The client gave up promptly.
    Failed,
    /// Nothing until the timeout (or the client's own much later timeout).
    Hung,
    /// A resumption GET with `Last-Event-ID` got the result.
    Resumed,
    /// The client sent the request again.
    Retried,
    /// Not judged: what the case describes cannot happen here (the reason is in the judgement).
    Skipped,
    /// Not judged: the run did not show what the client does (the call was never sent, the
    /// fault never fired, the client was still busy at the cap; the reason is in the judgement).
    Inconclusive,
}

impl Outcome {
    /// The word shown.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Hung => "hung",
            Outcome::Resumed => "resumed",
            Outcome::Retried => "retried",
            Outcome::Skipped => "skipped",
            Outcome::Inconclusive => "inconclusive",
        }
    }
}

/// Which requests the fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `tools/call` of any tool.
    AnyTool,
    /// `tools/call` of this tool.
    Tool(String),
    /// Requests of this method.
    Method(String),
}

impl Target {
    /// The rule matchers that select it.
    pub fn matchers(&self) -> String {
        match self {
            Target::AnyTool => "method=tools/call".into(),
            Target::Tool(tool) => format!("tool={tool}"),
            Target::Method(method) => format!("method={method}"),
        }
    }

    fn matches(&self, call: &Call) -> bool {
        if call.dir != Direction::ClientToServer {
            return false;
        }
        match self {
            Target::AnyTool => call.method == "tools/call",
            Target::Tool(tool) => call.tool.as_deref() == Some(tool.as_str()),
            Target::Method(method) => &call.method == method,
        }
    }
}

/// The judgement of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// What the client did.
    pub outcome: Outcome,
    /// Milliseconds from the death (or fault) to the client's reaction, if it reacted.
    pub reaction_ms: Option<i64>,
    /// `correct`, or the defect.
    pub verdict: String,
    /// The defect, if any.
    pub defect: Option<String>,
    /// What a correct client does here.
    pub expected: String,
    /// The call ran twice upstream and its tool is neither read-only nor idempotent.
    pub double_execution: bool,
    /// The provoked call's final state in the proxy's model.
    pub call_verdict: Option<String>,
    /// Whether the fault fired on the call.
    pub provoked: bool,
    /// Why the cell is not judged, when what its case describes cannot happen here.
    pub skipped: Option<String>,
    /// Why the cell is not judged, when the run did not show what the client does.
    pub inconclusive: Option<String>,
}

impl Judgement {
    /// A cell not judged, for `reason` (its verdict reads `skipped: REASON`).
    pub fn skipped(expect: Expect, reason: &str, call: Option<&Call>) -> Self {
        Judgement {
            outcome: Outcome::Skipped,
            reaction_ms: None,
            verdict: format!("skipped: {reason}"),
            defect: None,
            expected: expected_text(expect, false).into(),
            double_execution: false,
            call_verdict: call.map(|c| c.verdict.name().to_string()),
            provoked: call.is_some_and(|c| c.injected),
            skipped: Some(reason.to_string()),
            inconclusive: None,
        }
    }

    /// A cell the run could not judge, for `reason` (its verdict reads `inconclusive: REASON`).
    pub fn inconclusive(expect: Expect, reason: &str, call: Option<&Call>) -> Self {
        Judgement {
            outcome: Outcome::Inconclusive,
            verdict: format!("inconclusive: {reason}"),
            skipped: None,
            inconclusive: Some(reason.to_string()),
            ..Judgement::skipped(expect, reason, call)
        }
    }

    /// Whether the cell was judged (neither skipped nor inconclusive).
    pub fn judged(&self) -> bool {
        self.skipped.is_none() && self.inconclusive.is_none()
    }
}

/// The reason a cell whose fault never fired is inconclusive.
pub const NEVER_FIRED: &str = "the fault never fired";

/// Why a cell whose case arms `fault` is not judged, from what the fault hit: it never fired, a
/// `json-reset` hit a body that is not JSON, or a death came after the result had passed.
fn unjudged(fault: Option<&str>, expect: Expect, evidence: &Evidence) -> Option<String> {
    let fault = fault?;
    let Some((_, fired)) = &evidence.fired else {
        return Some(NEVER_FIRED.into());
    };
    if fault == "json-reset" || fired == "json-reset" {
        match evidence.fired_body() {
            Some(ContentKind::Json) => {}
            Some(ContentKind::Sse) => return Some("upstream answered with SSE".into()),
            Some(ContentKind::Other) | None => {
                return Some("upstream answered with no JSON body".into());
            }
        }
    }
    if expect == Expect::Death && evidence.response_before_fault {
        return Some("the fault hit after the result".into());
    }
    None
}

/// What the model says of the provoked call.
struct Seen<'a> {
    call: &'a Call,
    /// When the call broke: its stream's death, its error, or the fault.
    broke_at: DateTime<Utc>,
    /// The client could resume (an event id seen, a revision that resumes).
    resumable: bool,
    /// The client tried a resumption.
    tried_resume: bool,
    /// The client resumed before the server's `retry:` hint had passed (ms early).
    resumed_early: Option<i64>,
    /// The client's later calls repeating it.
    retries: Vec<&'a Call>,
    /// A resumption of it named another event id than the last one it received: the defect.
    resume_mismatch: Option<String>,
}

/// The call the case is about: the first the fault hit, else the first the target matches.
pub fn first_target<'a>(model: &'a Model, target: &Target) -> Option<&'a Call> {
    let mut matching = model.calls.iter().filter(|c| target.matches(c));
    let first = matching.clone().next();
    matching.find(|c| c.injected).or(first)
}

fn seen<'a>(model: &'a Model, call: &'a Call) -> Seen<'a> {
    let fault_at = model
        .notes
        .iter()
        .find(|(_, stream, text)| *stream == Some(call.request_stream) && text.starts_with("fault"))
        .map(|(t, _, _)| *t);
    let request_stream = model.stream(call.request_stream);
    // A call answered on another stream (a resumption) broke when its own stream ended.
    let handed_over = request_stream
        .filter(|_| call.owner != call.request_stream)
        .and_then(|s| s.ended.as_ref())
        .map(|end| end.at);
    let broke_at = call
        .verdict
        .death()
        .map(|d| d.at)
        .or(fault_at)
        .or(handed_over)
        .or(call.ended_at)
        .unwrap_or(call.started_at);
    let resumable = !call
        .revision
        .as_deref()
        .is_some_and(mcpscope_engine::revision::is_sessionless)
        && request_stream.is_some_and(|s| s.last_event_id.is_some() || has_event_id(s));
    let tried_resume = model
        .streams
        .iter()
        .any(|s| s.resumes == Some(call.request_stream));
    let retries = model
        .calls
        .iter()
        .filter(|c| retry_chain_reaches(model, c, call.index))
        .collect();
    let hint = request_stream.and_then(|s| s.retry_ms);
    let first_resume = model
        .streams
        .iter()
        .filter(|s| s.resumes == Some(call.request_stream))
        .map(|s| s.opened_at)
        .min();
    // A resumption of the call's own stream from an older id is the call's defect; a GET
    // naming another stream's id (or none's) is, unless the client also resumed the call's
    // stream (then that GET was about something else, its listener).
    let resume_mismatch = model.streams.iter().find_map(|s| {
        let m = s.resume_mismatch.as_ref()?;
        let waiting = model.stream(m.waiting)?;
        let about_the_call = waiting.calls.contains(&call.index)
            && (m.kind == mcpscope_engine::model::MismatchKind::Older || !tried_resume);
        about_the_call.then(|| {
            format!(
                "resumes from {} ({}, not {})",
                m.kind.words(),
                s.request_header("last-event-id").unwrap_or("-"),
                m.expected
            )
        })
    });
    let resumed_early = match (hint, first_resume) {
        (Some(hint), Some(at)) => {
            let waited = ms_between(broke_at, at);
            let hint = i64::try_from(hint).unwrap_or(i64::MAX);
            (waited + RETRY_SLACK_MS < hint).then_some(hint - waited)
        }
        _ => None,
    };
    Seen {
        call,
        broke_at,
        resumable,
        tried_resume: tried_resume || resume_mismatch.is_some(),
        resumed_early,
        retries,
        resume_mismatch,
    }
}

fn has_event_id(stream: &mcpscope_engine::model::Stream) -> bool {
    stream.marks.iter().any(|m| m.id.is_some())
}

fn retry_chain_reaches(model: &Model, call: &Call, target: usize) -> bool {
    let mut at = call.retry_of;
    let mut hops = 0;
    while let Some(prev) = at {
        if prev == target {
            return true;
        }
        hops += 1;
        if hops > model.calls.len() {
            return false;
        }
        at = model.calls.get(prev).and_then(|c| c.retry_of);
    }
    false
}

fn ms_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds().max(0)
}

/// When the client gave up on the call after `broke_at`, from what the proxy saw and how the
/// process ended: it exited, cancelled the call (`notifications/cancelled`, or closing the
/// call's stream in a revision where that cancels), closed the call's stream, or moved on to a
/// new request. Its output is never read for this, and nothing at or after the matrix's own
/// kill counts (the kill is not the client's doing).
fn gave_up_at(model: &Model, seen: &Seen<'_>, run: &ClientRun) -> Option<DateTime<Utc>> {
    let own = |t: &DateTime<Utc>| *t >= seen.broke_at && run.killed_at.is_none_or(|k| *t < k);
    let mut times: Vec<DateTime<Utc>> = Vec::new();
    times.extend(run.exited_at);
    times.extend(run.model_reaction);
    if let Verdict::Cancelled { at } = seen.call.verdict {
        times.push(at);
    }
    times.extend(
        model
            .stream(seen.call.request_stream)
            .and_then(|s| s.ended.as_ref())
            .filter(|end| end.leg == Leg::Client)
            .map(|end| end.at),
    );
    times.extend(
        model
            .calls
            .iter()
            .filter(|c| c.dir == Direction::ClientToServer && c.index != seen.call.index)
            .filter(|c| c.started_at > seen.broke_at && c.retry_of.is_none())
            .map(|c| c.started_at)
            .min(),
    );
    times.into_iter().filter(own).min()
}

/// When the provoked call broke (its death, its error or the fault; else its end).
pub fn broke_at(model: &Model, target: &Target) -> Option<DateTime<Utc>> {
    first_target(model, target).map(|call| seen(model, call).broke_at)
}

/// When the client first tried to resume the call.
fn resumed_at(model: &Model, seen: &Seen<'_>) -> Option<DateTime<Utc>> {
    model
        .streams
        .iter()
        .filter(|s| s.resumes == Some(seen.call.request_stream))
        .map(|s| s.opened_at)
        .min()
}

/// Judges one cell whose case arms `fault` (what it hit is in `evidence`).
pub fn judge(
    model: &Model,
    target: &Target,
    (fault, expect): (Option<&str>, Expect),
    evidence: &Evidence,
    run: &ClientRun,
) -> Judgement {
    if expect == Expect::TaskWait {
        return judge_task_wait(model, target, fault, evidence, run);
    }
    let Some(call) = first_target(model, target) else {
        return no_call(expect, run);
    };
    if let Some(reason) = unjudged(fault, expect, evidence) {
        if reason == NEVER_FIRED {
            let why = match run.stop {
                Some(Stop::Startup) => format!(
                    "{NEVER_FIRED} (the call was sent, but not the one the fault waits for, within the start-up bound)"
                ),
                _ => reason,
            };
            return Judgement::inconclusive(expect, &why, Some(call));
        }
        return Judgement::skipped(expect, &reason, Some(call));
    }
    if matches!(expect, Expect::SlowAnswer | Expect::Silent) {
        return judge_slow(model, call, expect, run);
    }
    let seen = seen(model, call);
    let answered = matches!(call.verdict, Verdict::Answered);
    let resumed = answered
        && call.owner != call.request_stream
        && model
            .stream(call.owner)
            .is_some_and(|s| s.resumes.is_some());
    let double_execution = seen.retries.iter().any(|retry| {
        non_idempotent(model, retry)
            && may_have_executed(model, call)
            && may_have_executed(model, retry)
    });
    // A client that tried to resume gives up promptly when it does so soon after its last
    // attempt failed, not after the first death.
    let last_attempt = model
        .streams
        .iter()
        .filter(|s| s.resumes == Some(call.request_stream))
        .filter_map(|s| s.ended.as_ref().map(|end| end.at).or(s.head_at))
        .max()
        .filter(|t| *t > seen.broke_at)
        .unwrap_or(seen.broke_at);
    let gave_up = gave_up_at(model, &seen, run);
    let gave_up_ms = gave_up.map(|t| ms_between(last_attempt, t));
    // A reaction is prompt when the client sat idle for little of the time before it: time in
    // which it ran or waited for a CPU is not time it hung.
    let gave_up_idle_ms = gave_up.map(|t| run.activity.idle_ms(last_attempt, t));
    let (outcome, reaction_ms) = if resumed {
        let at = resumed_at(model, &seen);
        (Outcome::Resumed, at.map(|t| ms_between(seen.broke_at, t)))
    } else if answered {
        (
            Outcome::Ok,
            call.ended_at.map(|t| ms_between(seen.broke_at, t)),
        )
    } else if let Some(retry) = seen.retries.first() {
        (
            Outcome::Retried,
            Some(ms_between(seen.broke_at, retry.started_at)),
        )
    } else if gave_up_idle_ms.is_some_and(|ms| ms <= PROMPT_MS) {
        (Outcome::Failed, gave_up_ms)
    } else if gave_up.is_none() && run.stop == Some(Stop::Busy) {
        let busy = run
            .activity
            .busy_ms(seen.broke_at, run.killed_at.unwrap_or(seen.broke_at));
        return Judgement::inconclusive(
            expect,
            &format!(
                "the client was still busy (running, or waiting for a CPU) when it was stopped; \
                 {busy} ms busy after the death, no reaction yet"
            ),
            Some(call),
        );
    } else {
        (Outcome::Hung, gave_up_ms)
    };
    let (expected, defect) = verdict(expect, &seen, outcome, double_execution);
    Judgement {
        outcome,
        reaction_ms: if matches!(outcome, Outcome::Ok) && !call.injected {
            None
        } else {
            reaction_ms
        },
        verdict: defect.clone().unwrap_or_else(|| "correct".into()),
        defect,
        expected,
        double_execution,
        call_verdict: Some(call.verdict.name().to_string()),
        provoked: call.injected,
        skipped: None,
        inconclusive: None,
    }
}

/// Whether the call ended at the proxy: answered, failed or cancelled, or its stream closed.
pub fn call_done(model: &Model, call: &Call) -> bool {
    !matches!(call.verdict, Verdict::Pending)
        || model
            .stream(call.owner)
            .is_some_and(|s| s.ended.is_some() || s.unreachable.is_some())
}

/// The defect of a client that abandons a slow call whose stream still carries notifications.
pub const ABORTS_LIVE_CALL: &str = "aborts a call whose notifications still flow";

/// A slow, healthy call (`progress-keeps-alive`, `silent-slow`): answered is correct; giving up
/// is a defect while notifications flow, and a fact about the client (when, after how much
/// silence) when the stream was silent.
fn judge_slow(model: &Model, call: &Call, expect: Expect, run: &ClientRun) -> Judgement {
    let expected = expected_text(expect, false).to_string();
    // A host whose model got a tool result before the proxy saw the answer gave up first.
    let answered = matches!(call.verdict, Verdict::Answered | Verdict::Error { .. })
        && run
            .model_reaction
            .zip(call.ended_at)
            .is_none_or(|(at_model, answered)| at_model >= answered);
    let own = |t: &DateTime<Utc>| *t >= call.started_at && run.killed_at.is_none_or(|k| *t < k);
    let stream = model.stream(call.request_stream);
    let mut times: Vec<DateTime<Utc>> = Vec::new();
    if let Verdict::Cancelled { at } = call.verdict {
        times.push(at);
    }
    times.extend(
        stream
            .and_then(|s| s.ended.as_ref())
            .filter(|end| end.leg == Leg::Client)
            .map(|end| end.at),
    );
    times.extend(run.exited_at);
    times.extend(run.model_reaction);
    let gave_up = times.into_iter().filter(own).min();
    let base = Judgement {
        outcome: Outcome::Ok,
        reaction_ms: None,
        verdict: "correct".into(),
        defect: None,
        expected,
        double_execution: false,
        call_verdict: Some(call.verdict.name().to_string()),
        provoked: false,
        skipped: None,
        inconclusive: None,
    };
    if answered {
        return Judgement {
            reaction_ms: call.ended_at.map(|t| ms_between(call.started_at, t)),
            ..base
        };
    }
    let Some(at) = gave_up else {
        return Judgement::inconclusive(
            expect,
            "the call neither ended nor was given up before the client was stopped",
            Some(call),
        );
    };
    // The silence before giving up: since the last bytes of the call's stream.
    let last_bytes = stream
        .map(|s| {
            s.marks
                .iter()
                .map(|m| m.at)
                .filter(|t| *t <= at)
                .chain(s.head_at)
                .max()
                .unwrap_or(call.started_at)
        })
        .unwrap_or(call.started_at);
    // Whole seconds: a host's timer is checked in seconds, and the board stays stable.
    let after_s = (ms_between(call.started_at, at) + 500) / 1000;
    let silent_s = (ms_between(last_bytes, at) + 500) / 1000;
    let (verdict, defect) = match expect {
        Expect::SlowAnswer => {
            let defect = format!(
                "{ABORTS_LIVE_CALL} (gave up after {after_s} s, {silent_s} s after the last)"
            );
            (defect.clone(), Some(defect))
        }
        _ => (
            format!("gave up after {after_s} s, {silent_s} s silent (a fact, no defect)"),
            None,
        ),
    };
    Judgement {
        outcome: Outcome::Failed,
        reaction_ms: Some(ms_between(call.started_at, at)),
        verdict,
        defect,
        ..base
    }
}

/// A cell in which the call the case is about was never sent: nothing was provoked, so nothing
/// is judged; the reason says how far the client got.
fn no_call(expect: Expect, run: &ClientRun) -> Judgement {
    let host = match &run.model_tools {
        None => String::new(),
        Some(names) if names.is_empty() => {
            "; the model was offered no tool (or never asked)".to_string()
        }
        Some(names) => format!(
            "; the model was offered: {}",
            names
                .iter()
                .take(MAX_NAMES_SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
                + if names.len() > MAX_NAMES_SHOWN {
                    ", …"
                } else {
                    ""
                }
        ),
    };
    let reason = match (&run.spawn_error, run.stop, run.code) {
        (Some(e), _, _) => e.clone(),
        (None, Some(Stop::Startup), _) => {
            "the call was not sent within the start-up bound (the client was still starting, or \
             never makes it)"
                .to_string()
        }
        (None, _, Some(code)) => format!("the client exited ({code}) without sending the call"),
        (None, _, None) => "the client ended without sending the call".to_string(),
    };
    Judgement::inconclusive(expect, &format!("{reason}{host}"), None)
}

/// Tool names listed in a reason, at most.
const MAX_NAMES_SHOWN: usize = 12;

fn expected_text(expect: Expect, resumable: bool) -> &'static str {
    match expect {
        Expect::Answer => "answered",
        Expect::Death if resumable => "resumes with Last-Event-ID (or fails if refused)",
        Expect::Death => "fails at once (no event id to resume from)",
        Expect::HttpError(_) => "fails at once or starts over",
        Expect::Stall => "waits or gives up (a stall looks like a slow tool)",
        Expect::SlowAnswer => "waits for the result while notifications flow",
        Expect::Silent => "waits, or gives up (when is reported; no defect)",
        Expect::TaskWait => "asks tasks/result again and gets the result (the task lives)",
    }
}

/// The defect of a client that leaves a live task's result behind after its wait died.
pub const NO_REASK: &str = "does not ask tasks/result again";

/// The defect of a client that cancels the task instead of asking for its result again.
pub const CANCELS_LIVE_TASK: &str = "cancels a live task instead of asking tasks/result again";

/// The case's task operation: the first whose result wait died (else the first), of the
/// target's tool when `--tool` names one.
fn task_operation<'a>(model: &'a Model, target: &Target) -> Option<&'a Call> {
    let mut ops = model.calls.iter().filter(|c| {
        c.task().is_some()
            && match target {
                Target::Tool(tool) => c.tool.as_deref() == Some(tool.as_str()),
                _ => true,
            }
    });
    let first = ops.clone().next();
    ops.find(|c| c.task().is_some_and(|t| t.waits_lost > 0))
        .or(first)
}

/// Judges a task case: the fault resets a `tasks/result` stream; the task lives, and a correct
/// client asks `tasks/result` again (the model counts it as `reasked`) and gets the result. A
/// client that makes no task-augmented call is skipped: the case is not about it.
fn judge_task_wait(
    model: &Model,
    target: &Target,
    fault: Option<&str>,
    evidence: &Evidence,
    run: &ClientRun,
) -> Judgement {
    let expect = Expect::TaskWait;
    let Some(op) = task_operation(model, target) else {
        if run.spawn_error.is_some() {
            return no_call(expect, run);
        }
        return Judgement::skipped(
            expect,
            "the client made no task-augmented call (it does not use tasks)",
            None,
        );
    };
    let Some(task) = op.task() else {
        return no_call(expect, run);
    };
    if fault.is_some() && evidence.fired.is_none() {
        return Judgement::skipped(expect, "the client never asked tasks/result", Some(op));
    }
    if evidence.response_before_fault {
        return Judgement::skipped(expect, "the fault hit after the result", Some(op));
    }
    if task.waits_lost == 0 {
        return Judgement::skipped(expect, "no tasks/result wait died", Some(op));
    }
    let died_at = task.steps.iter().find_map(|s| match s.what {
        StepKind::WaitDied { .. } => Some(s.at),
        _ => None,
    });
    let reasked_at = died_at.and_then(|died| {
        task.steps.iter().find_map(|s| match &s.what {
            StepKind::Asked { method, .. } if method == "tasks/result" && s.at >= died => {
                Some(s.at)
            }
            _ => None,
        })
    });
    let cancelled_at = task.steps.iter().find_map(|s| match &s.what {
        StepKind::Asked { method, .. } if method == "tasks/cancel" => Some(s.at),
        _ => None,
    });
    let own = |t: &DateTime<Utc>| run.killed_at.is_none_or(|k| *t < k);
    let since = |t: DateTime<Utc>| died_at.map(|d| ms_between(d, t));
    let (outcome, reaction_ms, defect) = match (reasked_at.filter(own), cancelled_at.filter(own)) {
        (Some(at), _) if task.reasked > 0 => (Outcome::Retried, since(at), None),
        (_, Some(at)) => (Outcome::Failed, since(at), Some(CANCELS_LIVE_TASK)),
        _ => {
            let gave_up = run
                .exited_at
                .filter(own)
                .filter(|t| died_at.is_none_or(|d| *t >= d));
            match gave_up {
                Some(at) => (Outcome::Failed, since(at), Some(NO_REASK)),
                None => (Outcome::Hung, None, Some(NO_REASK)),
            }
        }
    };
    let defect = defect.map(str::to_string);
    Judgement {
        outcome,
        reaction_ms,
        verdict: defect.clone().unwrap_or_else(|| "correct".into()),
        defect,
        expected: expected_text(expect, false).into(),
        double_execution: false,
        call_verdict: Some(op.verdict.name().to_string()),
        provoked: evidence.fired.is_some(),
        skipped: None,
        inconclusive: None,
    }
}

/// What a correct client does, and the defect if this one did not.
fn verdict(
    expect: Expect,
    seen: &Seen<'_>,
    outcome: Outcome,
    double_execution: bool,
) -> (String, Option<String>) {
    let expected = expected_text(expect, seen.resumable).to_string();
    if double_execution {
        return (expected, Some("double execution".into()));
    }
    if let Some(mismatch) = &seen.resume_mismatch {
        return (expected, Some(mismatch.clone()));
    }
    if let Some(early) = seen.resumed_early {
        return (
            expected,
            Some(format!("ignores retry hint ({early} ms early)")),
        );
    }
    let defect = match (expect, outcome) {
        (_, Outcome::Ok | Outcome::Resumed) if expect != Expect::Answer || !seen.call.injected => {
            None
        }
        (Expect::Answer, Outcome::Ok) => None,
        (Expect::Answer, Outcome::Hung) => Some("hangs on a healthy call"),
        (Expect::Answer, _) => Some("fails a healthy call"),
        (Expect::Stall | Expect::TaskWait | Expect::SlowAnswer | Expect::Silent, _) => None,
        (Expect::HttpError(_), Outcome::Failed | Outcome::Retried) => None,
        (Expect::HttpError("session expiry"), _) => Some("hangs on session expiry"),
        (Expect::HttpError(_), _) => Some("hangs on HTTP error"),
        (Expect::Death, Outcome::Hung) if seen.tried_resume => {
            Some("hangs after failed resumption")
        }
        (Expect::Death, Outcome::Hung) => Some("hangs on stream death"),
        (Expect::Death, Outcome::Failed | Outcome::Retried)
            if seen.resumable && !seen.tried_resume =>
        {
            Some("no resumption despite event id")
        }
        (Expect::Death, _) => None,
    };
    (expected, defect.map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::event::{EndHow, Leg};
    use mcpscope_engine::fixtures::{Script, last_call};
    use serde_json::json;

    const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];

    /// A `poke` call on stream 2 whose SSE stream dies after one event (with `id`, if given).
    fn death(revision: &str, id: Option<&str>) -> Model {
        let mut s = Script::ticking();
        s.initialize(revision)
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "poke"}}),
            )
            .respond(2, 200, "text/event-stream", S1)
            .event(2, id, None)
            .wait(10)
            .finish(2, EndHow::Reset, Leg::Upstream);
        s.fold().0
    }

    fn died_at(model: &Model) -> DateTime<Utc> {
        let call = last_call(model, "poke").expect("call");
        call.verdict.death().map(|d| d.at).expect("died")
    }

    fn exited(at: DateTime<Utc>, code: i32, line: &str) -> ClientRun {
        ClientRun {
            exited_at: Some(at),
            code: Some(code),
            lines: vec![(at, line.to_string())],
            ..ClientRun::default()
        }
    }

    fn killed() -> ClientRun {
        ClientRun {
            killed: true,
            ..ClientRun::default()
        }
    }

    fn ms(n: i64) -> chrono::TimeDelta {
        chrono::TimeDelta::milliseconds(n)
    }

    #[test]
    fn a_client_killed_at_the_timeout_hangs_on_stream_death() {
        let model = death("2025-06-18", None);
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &killed(),
        );
        assert_eq!(j.outcome, Outcome::Hung);
        assert_eq!(j.defect.as_deref(), Some("hangs on stream death"));
    }

    #[test]
    fn a_prompt_exit_fails_correctly_and_a_late_one_hangs() {
        let model = death("2025-06-18", None);
        let at = died_at(&model);
        let prompt = exited(at + ms(40), 1, "error: stream reset");
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &prompt,
        );
        assert_eq!((j.outcome, j.reaction_ms), (Outcome::Failed, Some(40)));
        assert_eq!((j.verdict.as_str(), j.defect), ("correct", None));

        let late = exited(at + ms(PROMPT_MS + 500), 1, "error: timed out");
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &late,
        );
        assert_eq!(j.outcome, Outcome::Hung);
        assert_eq!(j.reaction_ms, Some(PROMPT_MS + 500));
        assert_eq!(j.defect.as_deref(), Some("hangs on stream death"));
    }

    #[test]
    fn giving_up_on_a_stream_with_an_event_id_without_resuming_is_a_defect() {
        let model = death("2025-11-25", Some("s1-1"));
        let at = died_at(&model);
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &exited(at + ms(5), 1, "error: reset"),
        );
        assert_eq!(j.outcome, Outcome::Failed);
        assert_eq!(j.defect.as_deref(), Some("no resumption despite event id"));
        assert!(j.expected.contains("Last-Event-ID"), "{}", j.expected);
    }

    /// A session-less revision has no resumption, later ones included: giving up on a stream
    /// with an event id is then no defect.
    #[test]
    fn a_later_revision_is_session_less_in_the_judgement_too() {
        for revision in ["2026-07-28", "2027-03-01"] {
            let model = death(revision, Some("s1-1"));
            let at = died_at(&model);
            let j = judge(
                &model,
                &Target::AnyTool,
                (None, Expect::Death),
                &Evidence::default(),
                &exited(at + ms(5), 1, "error: reset"),
            );
            assert_ne!(
                j.defect.as_deref(),
                Some("no resumption despite event id"),
                "{revision}: {j:?}"
            );
            assert!(
                !j.expected.contains("Last-Event-ID"),
                "{revision}: {}",
                j.expected
            );
        }
    }

    #[test]
    fn output_that_is_not_an_error_is_no_reaction_and_stalls_are_never_defects() {
        let model = death("2025-06-18", None);
        let at = died_at(&model);
        let mut run = killed();
        run.lines.push((at + ms(3), "progress 1.0".into()));
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &run,
        );
        assert_eq!(j.outcome, Outcome::Hung);
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Stall),
            &Evidence::default(),
            &run,
        );
        assert_eq!((j.outcome, j.defect), (Outcome::Hung, None));
    }

    #[test]
    fn words_in_the_output_are_no_reaction() {
        let model = death("2025-06-18", None);
        let at = died_at(&model);
        let mut run = killed();
        run.killed_at = Some(at + ms(10_000));
        run.lines
            .push((at + ms(5), "result: no error, nothing failed".into()));
        let j = judge(
            &model,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &run,
        );
        assert_eq!((j.outcome, j.reaction_ms), (Outcome::Hung, None), "{j:?}");
        assert_eq!(j.defect.as_deref(), Some("hangs on stream death"));
    }

    /// A stalled `poke` (stream 2 open, no result) whose stream the client side closes at `close_ms`.
    fn stall_closed_by_the_client(revision: &str, close_ms: i64) -> Model {
        let mut s = Script::ticking();
        s.initialize(revision)
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "poke"}}),
            )
            .respond(2, 200, "text/event-stream", S1)
            .event(2, None, None)
            .wait(close_ms)
            .finish(2, EndHow::Cancelled, Leg::Client);
        s.fold().0
    }

    #[test]
    fn the_matrix_kill_is_not_the_clients_reaction() {
        for revision in ["2025-06-18", "2026-07-28"] {
            let model = stall_closed_by_the_client(revision, 3_000);
            let call = last_call(&model, "poke").expect("call");
            let closed = model
                .stream(call.request_stream)
                .and_then(|s| s.ended.as_ref())
                .map(|e| e.at)
                .expect("closed");
            // The close is the matrix's kill: no reaction, whatever the model calls it.
            let mut run = killed();
            run.killed_at = Some(closed);
            let j = judge(
                &model,
                &Target::AnyTool,
                (None, Expect::Stall),
                &Evidence::default(),
                &run,
            );
            assert_eq!(
                (j.outcome, j.reaction_ms),
                (Outcome::Hung, None),
                "{revision}: {j:?}"
            );
            assert_eq!(j.defect, None);
            // The same close by the client itself, before any kill, is its reaction.
            let mut run = killed();
            run.killed_at = Some(closed + ms(1_000));
            let j = judge(
                &model,
                &Target::AnyTool,
                (None, Expect::Death),
                &Evidence::default(),
                &run,
            );
            assert_eq!(j.outcome, Outcome::Failed, "{revision}: {j:?}");
        }
    }

    #[test]
    fn a_fault_that_missed_what_its_case_describes_is_skipped() {
        use mcpscope_engine::event::EventKind;
        let model = death("2025-06-18", None);
        let fired = |rule: &str, fault: &str| EventKind::FaultInjected {
            stream: 2,
            fault: fault.into(),
            rule: Some(rule.into()),
        };
        let judged = |fault: &str, evidence: &Evidence| {
            judge(
                &model,
                &Target::AnyTool,
                (Some(fault), Expect::Death),
                evidence,
                &killed(),
            )
        };
        let mut after_result = Evidence::default();
        after_result.see(&EventKind::Message {
            stream: 2,
            dir: Direction::ServerToClient,
            body: json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        });
        after_result.see(&fired("reset after 1 events", "reset"));
        let j = judged("reset after 1 events", &after_result);
        assert_eq!(j.outcome, Outcome::Skipped);
        assert_eq!(j.verdict, "skipped: the fault hit after the result");
        assert_eq!((j.defect, j.reaction_ms), (None, None));

        let mut on_sse = Evidence::default();
        on_sse.see(&EventKind::ResponseHead {
            stream: 2,
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
        });
        on_sse.see(&fired("json-reset", "json-reset"));
        let j = judged("json-reset", &on_sse);
        assert_eq!(j.verdict, "skipped: upstream answered with SSE");

        let j = judged("reset after 1 events", &Evidence::default());
        assert_eq!(j.outcome, Outcome::Inconclusive);
        assert_eq!(j.verdict, "inconclusive: the fault never fired");
        assert_eq!(j.defect, None);

        let mut before_result = Evidence::default();
        before_result.see(&fired("reset after 1 events", "reset"));
        let j = judged("reset after 1 events", &before_result);
        assert_eq!(j.defect.as_deref(), Some("hangs on stream death"));
    }

    /// A deliberate close with `retry: 1500`, then a resumption `after_ms` later.
    fn retry_hint_then_resumption(after_ms: i64) -> Model {
        let mut s = Script::ticking();
        s.initialize("2025-11-25")
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "poke"}}),
            )
            .respond(2, 200, "text/event-stream", S1)
            .push(mcpscope_engine::event::EventKind::SseEvent {
                stream: 2,
                id: Some("s1-1".into()),
                event: None,
                retry: Some(1500),
                data: "".into(),
                start: 0,
                end: 1,
            })
            .finish(2, EndHow::Eof, Leg::Upstream)
            .wait(after_ms)
            .open_with(
                3,
                "GET",
                &[("mcp-session-id", "s1"), ("last-event-id", "s1-1")],
            )
            .respond(3, 200, "text/event-stream", S1)
            .event(
                3,
                Some("s1-2"),
                Some(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})),
            );
        s.fold().0
    }

    #[test]
    fn resuming_before_the_retry_hint_is_a_defect_and_after_it_is_correct() {
        let early = retry_hint_then_resumption(200);
        let j = judge(
            &early,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &killed(),
        );
        assert_eq!(j.outcome, Outcome::Resumed);
        assert!(
            j.defect
                .as_deref()
                .is_some_and(|d| d.starts_with("ignores retry hint")),
            "{j:?}"
        );
        let patient = retry_hint_then_resumption(1600);
        let j = judge(
            &patient,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &killed(),
        );
        assert_eq!((j.outcome, j.defect), (Outcome::Resumed, None));
    }

    #[test]
    fn a_resumption_from_an_older_id_is_a_defect_even_when_the_server_answers_it() {
        let mut s = Script::ticking();
        s.initialize("2025-11-25")
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "poke"}}),
            )
            .respond(2, 200, "text/event-stream", S1)
            .event(2, Some("s1-0"), None)
            .event(2, Some("s1-1"), None)
            .finish(2, EndHow::Reset, Leg::Upstream)
            .open_with(
                3,
                "GET",
                &[("mcp-session-id", "s1"), ("last-event-id", "s1-0")],
            )
            .respond(3, 200, "text/event-stream", S1)
            .event(
                3,
                Some("s1-2"),
                Some(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})),
            );
        let j = judge(
            &s.fold().0,
            &Target::AnyTool,
            (None, Expect::Death),
            &Evidence::default(),
            &killed(),
        );
        assert_eq!(j.outcome, Outcome::Resumed);
        assert_eq!(
            j.defect.as_deref(),
            Some("resumes from an older id (s1-0, not s1-1)")
        );
    }

    #[test]
    fn a_get_naming_another_streams_id_is_the_calls_defect_only_when_the_call_was_not_resumed() {
        let script = |also_resume: bool| {
            let mut s = Script::ticking();
            s.initialize("2025-11-25")
                .post(
                    4,
                    S1,
                    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}),
                )
                .respond(4, 200, "text/event-stream", S1)
                .event(
                    4,
                    Some("o1"),
                    Some(json!({"jsonrpc": "2.0", "id": 9, "result": {"tools": []}})),
                )
                .finish(4, EndHow::Eof, Leg::Upstream)
                .post(
                    2,
                    S1,
                    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "poke"}}),
                )
                .respond(2, 200, "text/event-stream", S1)
                .event(2, Some("e1"), None)
                .finish(2, EndHow::Reset, Leg::Upstream)
                .open_with(3, "GET", &[("mcp-session-id", "s1"), ("last-event-id", "o1")]);
            if also_resume {
                s.open_with(
                    5,
                    "GET",
                    &[("mcp-session-id", "s1"), ("last-event-id", "e1")],
                )
                .respond(5, 200, "text/event-stream", S1)
                .event(
                    5,
                    Some("e2"),
                    Some(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})),
                );
            }
            let model = s.fold().0;
            judge(
                &model,
                &Target::AnyTool,
                (None, Expect::Death),
                &Evidence::default(),
                &killed(),
            )
        };
        let resumed = script(true);
        assert_eq!((resumed.outcome, resumed.defect), (Outcome::Resumed, None));
        let lost = script(false);
        assert_eq!(
            lost.defect.as_deref(),
            Some("resumes from another stream's id (o1, not e1)")
        );
    }

    /// A `slow` call whose stream carries a notification every 2 s; the client closes it at
    /// `close_ms` (or the result comes at 30 s when `None`).
    fn slow_call(close_ms: Option<i64>) -> Model {
        let mut s = Script::ticking();
        s.initialize("2025-11-25")
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}),
            )
            .respond(2, 200, "text/event-stream", S1);
        let end = close_ms.unwrap_or(30_000);
        for _ in 0..end / 2_000 {
            s.wait(2_000).event(
                2,
                None,
                Some(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "step"}})),
            );
        }
        match close_ms {
            Some(_) => {
                s.wait(end % 2_000)
                    .finish(2, EndHow::Cancelled, Leg::Client);
            }
            None => {
                s.event(
                    2,
                    None,
                    Some(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})),
                )
                .finish(2, EndHow::Eof, Leg::Upstream);
            }
        }
        s.fold().0
    }

    #[test]
    fn a_slow_call_is_awaited_while_notifications_flow_and_giving_up_on_silence_is_a_fact() {
        let judged = |model: &Model, expect| {
            judge(
                model,
                &Target::AnyTool,
                (None, expect),
                &Evidence::default(),
                &killed(),
            )
        };
        let answered = slow_call(None);
        for expect in [Expect::SlowAnswer, Expect::Silent] {
            let j = judged(&answered, expect);
            assert_eq!((j.outcome, j.verdict.as_str()), (Outcome::Ok, "correct"));
            assert!(j.reaction_ms.is_some_and(|ms| ms >= 30_000), "{j:?}");
        }
        let closed = slow_call(Some(12_500));
        let j = judged(&closed, Expect::SlowAnswer);
        assert_eq!(j.outcome, Outcome::Failed);
        assert!(
            j.defect
                .as_deref()
                .is_some_and(|d| d.starts_with(ABORTS_LIVE_CALL)
                    && d.contains("gave up after 13 s, 1 s after the last")),
            "{j:?}"
        );
        let j = judged(&closed, Expect::Silent);
        assert_eq!((j.outcome, j.defect.as_deref()), (Outcome::Failed, None));
        assert!(j.verdict.starts_with("gave up after 13 s"), "{j:?}");
        // Neither ended nor given up when the client was stopped: not judged.
        let mut s = Script::ticking();
        s.initialize("2025-11-25")
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}),
            )
            .respond(2, 200, "text/event-stream", S1);
        let j = judged(&s.fold().0, Expect::SlowAnswer);
        assert_eq!(j.outcome, Outcome::Inconclusive, "{j:?}");
    }

    /// A task-augmented `slow_task` (stream 2) whose `tasks/result` stream (3) is reset; then,
    /// when `reask` is given, a second `tasks/result` (stream 4) `reask` ms later brings the result.
    fn task_wait_reset(reask: Option<i64>) -> Model {
        let task = json!({"taskId": "t1", "status": "working", "ttl": 60000});
        let about = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tasks/result", "params": {"taskId": "t1"}});
        let mut s = Script::ticking();
        s.initialize("2025-11-25")
            .post(
                2,
                S1,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "slow_task", "arguments": {}, "task": {"ttl": 60000}}}),
            )
            .respond(2, 200, "application/json", S1)
            .json_body(
                2,
                json!({"jsonrpc": "2.0", "id": 1, "result": {"task": task}}),
            )
            .finish(2, EndHow::Eof, Leg::Upstream)
            .post(3, S1, about(2))
            .respond(3, 200, "text/event-stream", S1)
            .finish(3, EndHow::Reset, Leg::Upstream);
        if let Some(after) = reask {
            s.wait(after)
                .post(4, S1, about(3))
                .respond(4, 200, "application/json", S1)
                .json_body(
                    4,
                    json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "done"}]}}),
                )
                .finish(4, EndHow::Eof, Leg::Upstream);
        }
        s.fold().0
    }

    fn fired_on(stream: u64) -> Evidence {
        let mut e = Evidence::default();
        e.see(&mcpscope_engine::event::EventKind::FaultInjected {
            stream,
            fault: "reset".into(),
            rule: Some("reset when method=tasks/result nth=1 once".into()),
        });
        e
    }

    /// Asking `tasks/result` again after its wait died is correct (retried, the reaction timed
    /// from the death); a client that exits or hangs instead has the defect named plainly; a
    /// client that uses no tasks is skipped.
    #[test]
    fn a_task_wait_reset_is_correct_only_when_the_client_asks_again() {
        let judged = |model: &Model, run: &ClientRun| {
            judge(
                model,
                &Target::AnyTool,
                (Some("reset"), Expect::TaskWait),
                &fired_on(3),
                run,
            )
        };
        let reasked = task_wait_reset(Some(400));
        let j = judged(&reasked, &killed());
        assert_eq!(
            (j.outcome, j.defect.as_deref()),
            (Outcome::Retried, None),
            "{j:?}"
        );
        assert_eq!(j.verdict, "correct");
        assert_eq!(j.call_verdict.as_deref(), Some("answered"));
        assert!(j.reaction_ms.is_some_and(|ms| ms >= 400), "{j:?}");

        let left = task_wait_reset(None);
        let died = left
            .calls
            .iter()
            .find(|c| c.method == "tasks/result")
            .and_then(|c| c.ended_at)
            .expect("the wait died");
        let j = judged(&left, &exited(died + ms(30), 1, "error"));
        assert_eq!(
            (j.outcome, j.defect.as_deref()),
            (Outcome::Failed, Some(NO_REASK)),
            "{j:?}"
        );
        let j = judged(&left, &killed());
        assert_eq!(
            (j.outcome, j.defect.as_deref()),
            (Outcome::Hung, Some(NO_REASK)),
            "{j:?}"
        );

        let plain = death("2025-11-25", None);
        let j = judge(
            &plain,
            &Target::AnyTool,
            (Some("reset"), Expect::TaskWait),
            &Evidence::default(),
            &exited(died_at(&plain) + ms(5), 0, "done"),
        );
        assert_eq!(j.outcome, Outcome::Skipped, "{j:?}");
        assert_eq!(
            j.skipped.as_deref(),
            Some("the client made no task-augmented call (it does not use tasks)")
        );
    }

    #[test]
    fn a_client_that_never_calls_is_not_judged_and_says_how_far_it_got() {
        let model = Model::new();
        let judged = |run: &ClientRun| {
            judge(
                &model,
                &Target::Tool("slow".into()),
                (None, Expect::Answer),
                &Evidence::default(),
                run,
            )
        };
        let slow_start = ClientRun {
            stop: Some(Stop::Startup),
            ..killed()
        };
        let j = judged(&slow_start);
        assert_eq!(
            (j.outcome, j.defect.as_deref()),
            (Outcome::Inconclusive, None)
        );
        assert!(
            j.inconclusive
                .as_deref()
                .is_some_and(|r| r.contains("start-up bound")),
            "{j:?}"
        );
        let j = judged(&exited(chrono::Utc::now(), 0, "no tool called"));
        assert_eq!(
            j.inconclusive.as_deref(),
            Some("the client exited (0) without sending the call")
        );
        assert!(!j.judged());
        // A host that answered with text: the names its model was offered are said.
        let host = ClientRun {
            model_tools: Some(vec!["read_file".into(), "web_fetch".into()]),
            ..exited(chrono::Utc::now(), 0, "done")
        };
        assert_eq!(
            judged(&host).inconclusive.as_deref(),
            Some(
                "the client exited (0) without sending the call; the model was offered: \
                 read_file, web_fetch"
            )
        );
    }

    /// Busy intervals of 200 ms from `from` for `ms`.
    fn busy_for(from: DateTime<Utc>, ms_total: i64) -> super::super::activity::Activity {
        let mut activity = super::super::activity::Activity::default();
        let mut at = from;
        while at < from + ms(ms_total) {
            activity
                .intervals
                .push_back(super::super::activity::Interval {
                    start: at,
                    end: at + ms(200),
                    active_ns: 150_000_000,
                });
            at += ms(200);
        }
        activity
    }

    #[test]
    fn a_slow_client_is_not_a_hung_one() {
        let model = death("2025-06-18", None);
        let at = died_at(&model);
        let judged = |run: &ClientRun| {
            judge(
                &model,
                &Target::AnyTool,
                (None, Expect::Death),
                &Evidence::default(),
                run,
            )
        };
        // Exits 6 s after the death, busy (running or waiting for a CPU) all along: prompt.
        let busy_exit = ClientRun {
            activity: busy_for(at, 6_000),
            ..exited(at + ms(6_000), 1, "error: stream reset")
        };
        let j = judged(&busy_exit);
        assert_eq!((j.outcome, j.reaction_ms), (Outcome::Failed, Some(6_000)));
        assert_eq!(j.defect, None);
        // The same exit after sitting idle: a hang.
        let idle_exit = exited(at + ms(6_000), 1, "error: timed out");
        assert_eq!(judged(&idle_exit).outcome, Outcome::Hung);
        // Still busy when stopped at the cap, no reaction: not judged.
        let still_busy = ClientRun {
            stop: Some(Stop::Busy),
            killed_at: Some(at + ms(8_000)),
            activity: busy_for(at, 8_000),
            ..killed()
        };
        let j = judged(&still_busy);
        assert_eq!(
            (j.outcome, j.defect.as_deref()),
            (Outcome::Inconclusive, None)
        );
        // Idle for the whole window: hung.
        let idle = ClientRun {
            stop: Some(Stop::Idle),
            killed_at: Some(at + ms(8_000)),
            ..killed()
        };
        assert_eq!(
            judged(&idle).defect.as_deref(),
            Some("hangs on stream death")
        );
    }
}
