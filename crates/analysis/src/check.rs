//! `mcpscope check`: which calls of a recording went wrong, by a list of rules, reported as
//! text, JSON or JUnit XML, with a pass/fail answer for CI.

use std::collections::{BTreeMap, BTreeSet};

use mcpscope_engine::event::StreamId;
use mcpscope_engine::model::{Call, Model, Name, OrphanCause, ToolInfo, Verdict};
use mcpscope_engine::schema::{Checker, Side, Violation};
use serde_json::{Value, json};

use crate::{Error, Folded, describe};

/// The rules `--fail-on` takes when none are given.
pub const DEFAULT_FAIL_ON: &str =
    "orphaned,pending,double-execution,resume-mismatch,invalid-message";

/// What makes a recording fail a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A call's owning stream died before its result.
    Orphaned,
    /// A call still waiting for its response at the end.
    Pending,
    /// A call left resumable whose stream no resumption picked up.
    ResumableNeverResumed,
    /// A call answered with an error.
    Failed,
    /// A `tools/call` result with `isError: true`.
    ToolError,
    /// A non-idempotent tool retried after a first arrival that may have executed.
    DoubleExecution,
    /// Any retry of a tool not marked read-only or idempotent.
    NonIdempotentRetry,
    /// A resumption that named another `Last-Event-ID` than the last one the client received
    /// on the stream whose calls waited.
    ResumeMismatch,
    /// Bytes that should have been a JSON-RPC message but were not.
    InvalidMessage,
    /// An HTTP status of 400 or more.
    HttpError,
    /// A fault the proxy injected.
    InjectedFault,
    /// A `tools/call` whose arguments break its tool's `inputSchema`.
    SchemaInput,
    /// A `tools/call` result whose `structuredContent` breaks (or lacks) its tool's
    /// `outputSchema`, or an accepted elicitation whose content breaks its `requestedSchema`.
    SchemaOutput,
    /// A tool's schema (or one value against it) that was not checked: past the budget that
    /// keeps a hostile schema from taking the process down.
    SchemaUnchecked,
    /// A task's ttl ran out before its result was fetched.
    TaskExpired,
    /// A `tasks/result` wait died and the client never got the task's result.
    TaskResultLost,
}

impl Rule {
    /// Every rule, in the order reports list them.
    pub const ALL: [Rule; 16] = [
        Rule::Orphaned,
        Rule::Pending,
        Rule::ResumableNeverResumed,
        Rule::Failed,
        Rule::ToolError,
        Rule::DoubleExecution,
        Rule::NonIdempotentRetry,
        Rule::ResumeMismatch,
        Rule::InvalidMessage,
        Rule::HttpError,
        Rule::InjectedFault,
        Rule::SchemaInput,
        Rule::SchemaOutput,
        Rule::SchemaUnchecked,
        Rule::TaskExpired,
        Rule::TaskResultLost,
    ];

    /// The help of `--fail-on`: what it takes, every rule named.
    pub fn fail_on_help() -> String {
        format!(
            "Comma-separated rules that fail a recording: {}",
            Rule::ALL.map(Rule::word).join(", ")
        )
    }

    /// The word `--fail-on` takes.
    pub fn word(self) -> &'static str {
        match self {
            Rule::Orphaned => "orphaned",
            Rule::Pending => "pending",
            Rule::ResumableNeverResumed => "resumable-never-resumed",
            Rule::Failed => "failed",
            Rule::ToolError => "tool-error",
            Rule::DoubleExecution => "double-execution",
            Rule::NonIdempotentRetry => "non-idempotent-retry",
            Rule::ResumeMismatch => "resume-mismatch",
            Rule::InvalidMessage => "invalid-message",
            Rule::HttpError => "http-error",
            Rule::InjectedFault => "injected-fault",
            Rule::SchemaInput => "schema-input",
            Rule::SchemaOutput => "schema-output",
            Rule::SchemaUnchecked => "schema-unchecked",
            Rule::TaskExpired => "task-expired",
            Rule::TaskResultLost => "task-result-lost",
        }
    }

    /// What the rule means, in one line (SARIF's rule descriptions).
    pub fn description(self) -> &'static str {
        match self {
            Rule::Orphaned => "A call's owning stream died before its result.",
            Rule::Pending => "A call was still waiting for its response at the end.",
            Rule::ResumableNeverResumed => {
                "A call was left resumable and no resumption picked its stream up."
            }
            Rule::Failed => "A call was answered with a JSON-RPC error.",
            Rule::ToolError => "A tools/call result had isError: true.",
            Rule::DoubleExecution => {
                "A tool not annotated read-only or idempotent may have run twice."
            }
            Rule::NonIdempotentRetry => "A tool not annotated read-only or idempotent was retried.",
            Rule::ResumeMismatch => {
                "A resumption named another Last-Event-ID than the last one the client received on \
                 the stream whose calls waited."
            }
            Rule::InvalidMessage => "Bytes that should have been a JSON-RPC message were not.",
            Rule::HttpError => "An HTTP status of 400 or more, or an unreachable upstream.",
            Rule::InjectedFault => "A fault the proxy injected.",
            Rule::SchemaInput => "A tools/call's arguments break the tool's inputSchema.",
            Rule::SchemaOutput => {
                "A result's structuredContent breaks (or lacks) the tool's outputSchema, or an \
                 accepted elicitation's content breaks its requestedSchema."
            }
            Rule::SchemaUnchecked => {
                "A schema was not checked: its references loop, it fans out past the budget, or \
                 it is too large or deep to check safely."
            }
            Rule::TaskExpired => "A task's ttl ran out before its result was fetched.",
            Rule::TaskResultLost => {
                "A tasks/result wait died and the client never got the task's result."
            }
        }
    }

    /// How a finding of this rule is reported when the check was not asked to fail on it:
    /// `warning` for what is wrong with the traffic or went unchecked, `note` for what is only
    /// information (a fault the proxy itself injected).
    pub fn quiet_level(self) -> &'static str {
        match self {
            Rule::InjectedFault => "note",
            _ => "warning",
        }
    }

    /// Parses a comma-separated list; an unknown word is a usage error that names it and lists
    /// the valid ones.
    pub fn parse_list(text: &str) -> Result<Vec<Rule>, Error> {
        let mut rules = BTreeSet::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let rule = Rule::ALL
                .into_iter()
                .find(|r| r.word() == word)
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "--fail-on: unknown rule {word:?} (valid: {})",
                        Rule::ALL.map(Rule::word).join(", ")
                    ))
                })?;
            rules.insert(rule);
        }
        if rules.is_empty() {
            return Err(Error::Usage(format!(
                "--fail-on needs at least one rule (valid: {})",
                Rule::ALL.map(Rule::word).join(", ")
            )));
        }
        Ok(rules.into_iter().collect())
    }
}

/// One reason a recording fails: about a call, or about a stream that carried none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule it breaks.
    pub rule: Rule,
    /// The call's index in the model, if it is about a call.
    pub call: Option<usize>,
    /// The stream it is about, when no call is.
    pub stream: Option<StreamId>,
    /// What happened, in words.
    pub detail: String,
    /// For `schema-input` and `schema-output`: what broke which schema.
    pub schema: Option<Violation>,
}

/// Whether running the call's tool twice is unsafe: a tool not annotated read-only or
/// idempotent by `tools/list` (other methods count as safe, as the model's retry notice does).
pub fn non_idempotent(model: &Model, call: &Call) -> bool {
    call.tool.as_ref().is_some_and(|tool| {
        !model
            .tool_info(call.session, tool)
            .is_some_and(ToolInfo::safe_to_retry)
    })
}

/// Whether the call's request may have reached the server and run: its exchange reached the
/// upstream and was not refused with an HTTP error.
pub fn may_have_executed(model: &Model, call: &Call) -> bool {
    model
        .stream(call.request_stream)
        .is_some_and(|s| s.unreachable.is_none() && s.status.is_none_or(|status| status < 400))
}

/// Every finding of the given rules, calls first in call order, then streams.
pub fn findings(model: &Model, rules: &[Rule]) -> Vec<Finding> {
    let mut out = Vec::new();
    let has = |rule| rules.contains(&rule);
    let mut schemas = Checker::new();
    let check_schemas =
        has(Rule::SchemaInput) || has(Rule::SchemaOutput) || has(Rule::SchemaUnchecked);
    // An unchecked schema is said once, on the first call that needed it.
    let mut unchecked_said = BTreeSet::new();
    for call in &model.calls {
        if check_schemas {
            schema_findings(
                model,
                call,
                rules,
                &mut schemas,
                &mut unchecked_said,
                &mut out,
            );
        }
        if !call.stands_alone() {
            // Judged on its task's operation (task-result-lost, task-expired, its verdict).
            continue;
        }
        let mut hit = |rule: Rule, detail: String| {
            if has(rule) {
                out.push(Finding {
                    rule,
                    call: Some(call.index),
                    stream: None,
                    detail,
                    schema: None,
                });
            }
        };
        outcome_findings(model, call, &mut hit);
        retry_findings(model, call, &mut hit);
    }
    invalid_message_findings(model, rules, &mut out);
    stream_findings(model, rules, &mut out);
    out.sort_by_key(|f| (f.call.is_none(), f.call, f.stream, f.rule));
    out
}

/// The schema rules on one call: what its arguments, its result or an elicitation's content
/// break (`schema-input`, `schema-output`), and the schemas it needed that were not checked
/// (`schema-unchecked`, said once per tool, side and reason: `unchecked_said`).
fn schema_findings(
    model: &Model,
    call: &Call,
    rules: &[Rule],
    schemas: &mut Checker,
    unchecked_said: &mut BTreeSet<(Option<Name>, Side, String)>,
    out: &mut Vec<Finding>,
) {
    let has = |rule| rules.contains(&rule);
    for violation in schemas.check(model, call) {
        let rule = match violation.side {
            _ if violation.is_unchecked() => Rule::SchemaUnchecked,
            Side::Input => Rule::SchemaInput,
            Side::Output | Side::Elicitation => Rule::SchemaOutput,
        };
        let first = rule != Rule::SchemaUnchecked
            || unchecked_said.insert((
                call.tool.clone(),
                violation.side,
                violation.message.clone(),
            ));
        if has(rule) && first {
            out.push(Finding {
                rule,
                call: Some(call.index),
                stream: None,
                detail: violation.text(),
                schema: Some(violation),
            });
        }
    }
}

/// How a stand-alone call ended, by the rules: orphaned (and never resumed), pending, left
/// resumable, failed, a tool error, a task's ttl run out, a task's result lost.
fn outcome_findings(model: &Model, call: &Call, hit: &mut impl FnMut(Rule, String)) {
    let cause = describe::cause(call).unwrap_or_default();
    match &call.verdict {
        Verdict::Orphaned { cause: why, death } => {
            hit(Rule::Orphaned, cause.clone());
            let resumed = model
                .streams
                .iter()
                .any(|s| s.resumes == Some(death.stream));
            if *why == OrphanCause::ResumeFailed && !resumed {
                hit(Rule::ResumableNeverResumed, cause.clone());
            }
        }
        Verdict::Pending => hit(Rule::Pending, cause.clone()),
        Verdict::Resumable { .. } => hit(Rule::ResumableNeverResumed, cause.clone()),
        Verdict::Error { .. } => hit(Rule::Failed, cause.clone()),
        Verdict::Answered | Verdict::Cancelled { .. } => {}
    }
    if describe::tool_error(call) {
        hit(Rule::ToolError, cause.clone());
    }
    if matches!(
        call.verdict,
        Verdict::Orphaned {
            cause: OrphanCause::TaskExpired,
            ..
        }
    ) {
        hit(Rule::TaskExpired, cause.clone());
    }
    if let Some(task) = call.task()
        && task.waits_lost > 0
        && call.verdict != Verdict::Answered
        && !matches!(call.verdict, Verdict::Error { .. })
    {
        hit(
            Rule::TaskResultLost,
            format!(
                "task {}: {} tasks/result wait(s) died, the client asked again ×{}; no result reached it",
                task.id, task.waits_lost, task.reasked
            ),
        );
    }
}

/// A retry of a tool not annotated read-only or idempotent (`non-idempotent-retry`), and
/// when both arrivals may have reached the server, a tool that may have run twice
/// (`double-execution`).
fn retry_findings(model: &Model, call: &Call, hit: &mut impl FnMut(Rule, String)) {
    if let Some(prev) = call.retry_of.and_then(|p| model.calls.get(p))
        && non_idempotent(model, call)
    {
        let tool = call.tool.as_deref().unwrap_or("?");
        hit(
            Rule::NonIdempotentRetry,
            format!(
                "arrival {} of {tool} (retries id={}); {tool} is not annotated read-only or idempotent",
                call.arrival,
                prev.id_text()
            ),
        );
        if may_have_executed(model, prev) && may_have_executed(model, call) {
            hit(
                Rule::DoubleExecution,
                format!(
                    "{tool} may have run twice: id={} reached the server ({}) and arrival {} (id={}) ran again",
                    prev.id_text(),
                    prev.verdict.name(),
                    call.arrival,
                    call.id_text()
                ),
            );
        }
    }
}

/// Bytes that should have been a JSON-RPC message but were not (`invalid-message`): on the
/// call they belong to, else on each call of their stream, or on the stream alone.
fn invalid_message_findings(model: &Model, rules: &[Rule], out: &mut Vec<Finding>) {
    let has = |rule| rules.contains(&rule);
    for message in &model.messages {
        if let Some(reason) = &message.invalid
            && has(Rule::InvalidMessage)
        {
            let detail = format!("invalid message: {reason}");
            match message.call {
                Some(index) => out.push(Finding {
                    rule: Rule::InvalidMessage,
                    call: Some(index),
                    stream: None,
                    detail,
                    schema: None,
                }),
                None => out.extend(on_calls(
                    model,
                    Rule::InvalidMessage,
                    message.stream,
                    detail,
                )),
            }
        }
    }
}

/// What went wrong on the streams: an HTTP error status or an unreachable upstream
/// (`http-error`), a resumption from the wrong event (`resume-mismatch`), an injected fault
/// (`injected-fault`); each on the calls it concerns, or on the stream alone.
fn stream_findings(model: &Model, rules: &[Rule], out: &mut Vec<Finding>) {
    let has = |rule| rules.contains(&rule);
    for stream in &model.streams {
        if let Some(status) = stream.status.filter(|&s| s >= 400)
            && has(Rule::HttpError)
        {
            out.extend(on_calls(
                model,
                Rule::HttpError,
                stream.id,
                format!("HTTP {status} on {}", stream.label()),
            ));
        }
        if let Some(error) = &stream.unreachable
            && has(Rule::HttpError)
        {
            out.extend(on_calls(
                model,
                Rule::HttpError,
                stream.id,
                format!("upstream unreachable (502): {error}"),
            ));
        }
        if let Some(mismatch) = &stream.resume_mismatch
            && has(Rule::ResumeMismatch)
        {
            let detail = format!(
                "{} resumed from event id {}, {}; the last id #{} carried was {}",
                stream.label(),
                stream.request_header("last-event-id").unwrap_or("-"),
                mismatch.kind.words(),
                mismatch.waiting,
                mismatch.expected
            );
            out.extend(on_waiting_calls(model, stream.id, mismatch.waiting, detail));
        }
        for fault in &stream.faults {
            if has(Rule::InjectedFault) {
                out.extend(on_calls(
                    model,
                    Rule::InjectedFault,
                    stream.id,
                    format!("fault injected on {}: {fault}", stream.label()),
                ));
            }
        }
    }
}

/// A resume mismatch, on each call of the `waiting` stream that had not been answered on it
/// (those that waited for the resumption), or on the resuming stream alone.
fn on_waiting_calls(
    model: &Model,
    resuming: StreamId,
    waiting: StreamId,
    detail: String,
) -> Vec<Finding> {
    let calls: Vec<usize> = model
        .stream(waiting)
        .map(|s| s.calls.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|&i| {
            model
                .calls
                .get(i)
                .is_some_and(|c| !(c.owner == waiting && c.verdict == Verdict::Answered))
        })
        .collect();
    if calls.is_empty() {
        return vec![Finding {
            rule: Rule::ResumeMismatch,
            call: None,
            stream: Some(resuming),
            detail,
            schema: None,
        }];
    }
    calls
        .into_iter()
        .map(|index| Finding {
            rule: Rule::ResumeMismatch,
            call: Some(index),
            stream: None,
            detail: detail.clone(),
            schema: None,
        })
        .collect()
}

/// A finding about a stream, repeated on each call it carried, or on the stream alone.
fn on_calls(model: &Model, rule: Rule, stream: StreamId, detail: String) -> Vec<Finding> {
    let calls: Vec<usize> = model
        .stream(stream)
        .map(|s| s.calls.clone())
        .unwrap_or_default();
    if calls.is_empty() {
        return vec![Finding {
            rule,
            call: None,
            stream: Some(stream),
            detail,
            schema: None,
        }];
    }
    calls
        .into_iter()
        .map(|index| Finding {
            rule,
            call: Some(index),
            stream: None,
            detail: detail.clone(),
            schema: None,
        })
        .collect()
}

/// One recording, folded and checked.
#[derive(Debug, Clone)]
pub struct FileCheck {
    /// The file as named on the command line.
    pub file: String,
    /// The recording.
    pub folded: Folded,
    /// What fails, by the rules asked for.
    pub findings: Vec<Finding>,
    /// What the other rules found: reported, never failing the check.
    pub warnings: Vec<Finding>,
}

/// The verdict names in the order reports count them.
const VERDICTS: [&str; 6] = [
    "answered",
    "pending",
    "error",
    "orphaned",
    "resumable",
    "cancelled",
];

impl FileCheck {
    /// Checks a folded recording by `rules`.
    pub fn new(file: impl Into<String>, folded: Folded, rules: &[Rule]) -> Self {
        let (findings, warnings) = findings(&folded.model, &Rule::ALL)
            .into_iter()
            .partition(|f| rules.contains(&f.rule));
        Self {
            file: file.into(),
            folded,
            findings,
            warnings,
        }
    }

    /// Whether nothing fails.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    /// The calls counted on their own (a request about a task belongs to its operation).
    pub fn calls(&self) -> usize {
        self.folded
            .model
            .calls
            .iter()
            .filter(|c| c.stands_alone())
            .count()
    }

    /// Calls by verdict name (only verdicts that occur).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for call in self.folded.model.calls.iter().filter(|c| c.stands_alone()) {
            *counts.entry(call.verdict.name()).or_insert(0) += 1;
        }
        counts
    }

    fn counts_text(&self) -> String {
        let counts = self.counts();
        let parts: Vec<String> = VERDICTS
            .iter()
            .filter_map(|v| counts.get(v).map(|n| format!("{n} {v}")))
            .collect();
        let calls = self.calls();
        if parts.is_empty() {
            format!("{calls} calls")
        } else {
            format!("{calls} calls: {}", parts.join(", "))
        }
    }

    /// The findings grouped by call (in call order), then those about streams alone.
    pub fn grouped(&self) -> (BTreeMap<usize, Vec<&Finding>>, Vec<&Finding>) {
        Self::group(&self.findings)
    }

    fn group(found: &[Finding]) -> (BTreeMap<usize, Vec<&Finding>>, Vec<&Finding>) {
        let mut by_call: BTreeMap<usize, Vec<&Finding>> = BTreeMap::new();
        let mut streams = Vec::new();
        for finding in found {
            match finding.call {
                Some(index) => by_call.entry(index).or_default().push(finding),
                None => streams.push(finding),
            }
        }
        (by_call, streams)
    }

    /// The short report: a line with the counts, then each failing call or stream, then the
    /// warnings (what the rules not failing this check found; notes only in JSON and SARIF).
    pub fn text(&self) -> String {
        let mut out = format!(
            "{}: {} — {}\n",
            self.file,
            if self.passed() { "ok" } else { "FAIL" },
            self.counts_text()
        );
        self.list(&self.findings, "✗", &mut out);
        let warnings: Vec<Finding> = self
            .warnings
            .iter()
            .filter(|f| f.rule.quiet_level() == "warning")
            .cloned()
            .collect();
        if !warnings.is_empty() {
            out.push_str(&format!(
                "  {} warning(s), not failing this check:\n",
                warnings.len()
            ));
            self.list(&warnings, "!", &mut out);
        }
        out
    }

    /// Each call or stream of `found`, marked with `mark`, with its findings' details.
    fn list(&self, found: &[Finding], mark: &str, out: &mut String) {
        let model = &self.folded.model;
        let (by_call, streams) = Self::group(found);
        for (index, found) in by_call {
            let Some(call) = model.calls.get(index) else {
                continue;
            };
            let rules: Vec<&str> = found.iter().map(|f| f.rule.word()).collect();
            out.push_str(&format!(
                "  {mark} #{} {} id={} [{}] session {} stream {}\n",
                describe::number(call),
                call.title(),
                call.id_text(),
                rules.join(", "),
                describe::session(model, call),
                describe::owner(model, call),
            ));
            if let Some(death) = call.verdict.death() {
                out.push_str(&format!("      died {}\n", describe::death(model, death)));
            }
            let mut seen = BTreeSet::new();
            for finding in found {
                if !finding.detail.is_empty() && seen.insert(&finding.detail) {
                    out.push_str(&format!(
                        "      {}: {}\n",
                        finding.rule.word(),
                        finding.detail
                    ));
                }
            }
        }
        for finding in streams {
            let label = finding
                .stream
                .and_then(|s| model.stream(s))
                .map(|s| s.label())
                .unwrap_or_default();
            out.push_str(&format!(
                "  {mark} stream {label} [{}] {}\n",
                finding.rule.word(),
                finding.detail
            ));
        }
    }

    /// The report as one JSON object.
    pub fn json(&self) -> Value {
        json!({
            "file": self.file,
            "ok": self.passed(),
            "calls": self.calls(),
            "counts": self.counts(),
            "failures": self.findings_json(&self.findings),
            "warnings": self.findings_json(&self.warnings),
            "latency": crate::latency::json(&self.folded.model),
        })
    }

    fn findings_json(&self, found: &[Finding]) -> Vec<Value> {
        let model = &self.folded.model;
        found
            .iter()
            .map(|f| {
                let mut object = json!({ "rule": f.rule.word(), "detail": f.detail });
                if let Some(call) = f.call.and_then(|i| model.calls.get(i)) {
                    object["call"] = call_json(model, call);
                }
                if let Some(v) = &f.schema {
                    object["schema"] = schema_json(v);
                }
                if let Some(stream) = f.stream.and_then(|s| model.stream(s)) {
                    object["stream"] = json!({ "id": stream.id, "label": stream.label() });
                }
                object
            })
            .collect()
    }
}

/// A schema violation as the JSON report and SARIF describe it: `side` (`input`, `output`,
/// `elicitation`), `member` (`arguments`, `structuredContent`, `content`), `path`, `keyword`,
/// `message`.
pub fn schema_json(v: &Violation) -> Value {
    json!({
        "side": v.side.word(),
        "member": v.side.instance(),
        "path": v.path,
        "keyword": v.keyword,
        "message": v.message,
    })
}

/// A call as the JSON report and other exports describe it.
pub fn call_json(model: &Model, call: &Call) -> Value {
    let death = call.verdict.death().map(|d| {
        json!({
            "stream": d.stream,
            "at": describe::time(d.at),
            "how": d.how.map(|h| h.as_str()),
            "leg": d.leg.map(|l| l.as_str()),
        })
    });
    json!({
        "number": describe::number(call),
        "method": call.method,
        "tool": call.tool,
        "id": call.id.value(),
        "session": model.sessions.get(call.session).and_then(|s| s.id.clone()),
        "stream": call.owner,
        "stream_label": describe::owner(model, call),
        "verdict": call.verdict.name(),
        "death": death,
        "cause": describe::cause(call),
        "reaction": call.reaction.summary(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_lists_parse_and_name_unknown_words() {
        let rules = Rule::parse_list(DEFAULT_FAIL_ON).expect("default list");
        assert_eq!(
            rules,
            [
                Rule::Orphaned,
                Rule::Pending,
                Rule::DoubleExecution,
                Rule::ResumeMismatch,
                Rule::InvalidMessage
            ]
        );
        let all = Rule::ALL.map(Rule::word).join(",");
        assert_eq!(Rule::parse_list(&all).expect("all").len(), Rule::ALL.len());
        match Rule::parse_list("orphaned,nope") {
            Err(Error::Usage(text)) => {
                assert!(
                    text.contains("\"nope\"") && text.contains("tool-error"),
                    "{text}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(Rule::parse_list(" , ").is_err());
    }
}
