//! A Mermaid `sequenceDiagram` of calls: Client, mcpscope and Server; the request, the
//! response head, progress on the stream, then the result or the stream's death (with how,
//! leg and time) and what the client did about it (retry, cancel, re-initialize, new GET).
//! A task-augmented call (MCP tasks) is drawn as one operation: the create, the task created,
//! each `tasks/get` poll and status, a dead `tasks/result` wait, and the result its
//! `tasks/result` brought; the requests about the task are not drawn as calls of their own.

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{Direction, EndHow, Leg};
use mcpscope_engine::model::{Call, Model, StepKind, Stream, Verdict};
use mcpscope_engine::wire::jsonrpc::{Kind, classify};

use crate::otlp::reactions;
use crate::{Error, Folded};
use mcpscope_analysis::describe;

/// How many calls a diagram of every call shows before it stops with a note.
pub(crate) const MAX_CALLS: usize = 40;

/// Makes text safe in a message or note: Mermaid's entity codes for the characters that end a
/// statement (`;`), start an entity (`#`) or read as markup (`<`, `>`), line breaks flattened.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '#' => out.push_str("#35;"),
            ';' => out.push_str("#59;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\r' | '\n' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// A stream named without `#`: `POST 6 sse`.
fn stream_name(stream: &Stream) -> String {
    stream.label().replacen('#', " ", 1)
}

/// The diagram of call number `call` (as the calls table numbers them), or of every call,
/// capped at [`MAX_CALLS`] with a note.
pub(crate) fn build(folded: &Folded, call: Option<usize>) -> Result<String, Error> {
    build_model(&folded.model, call)
}

/// [`build`] over a model already folded (the live view's).
pub(crate) fn build_model(model: &Model, call: Option<usize>) -> Result<String, Error> {
    let mut lines = vec![
        "sequenceDiagram".to_string(),
        "    participant Client".to_string(),
        "    participant mcpscope".to_string(),
        "    participant Server".to_string(),
    ];
    let chosen: Vec<&Call> = match call {
        Some(number) => {
            let found = number
                .checked_sub(1)
                .and_then(|i| model.calls.get(i))
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "--call {number}: the recording has {} calls (1–{})",
                        model.calls.len(),
                        model.calls.len()
                    ))
                })?;
            // A request about a task is drawn in its operation.
            let root = model
                .operation(found.index)
                .map_or(found.index, |op| op.root);
            vec![model.calls.get(root).unwrap_or(found)]
        }
        None => model
            .calls
            .iter()
            .filter(|c| c.stands_alone())
            .take(MAX_CALLS)
            .collect(),
    };
    let shown = model.calls.iter().filter(|c| c.stands_alone()).count();
    for call in &chosen {
        diagram_call(model, call, &mut lines);
    }
    if call.is_none() && shown > MAX_CALLS {
        lines.push(format!(
            "    Note over Client,Server: {} more calls not shown (export one with --call N)",
            shown - MAX_CALLS
        ));
    }
    if model.calls.is_empty() {
        lines.push("    Note over Client,Server: no calls in this recording".to_string());
    }
    let mut text = lines.join("\n");
    text.push('\n');
    Ok(text)
}

/// Diagram lines with the time they happened, sorted (stably) before they are written.
#[derive(Default)]
struct Timeline(Vec<(DateTime<Utc>, String)>);

impl Timeline {
    fn arrow(&mut self, at: DateTime<Utc>, from: &str, to: &str, kind: &str, text: &str) {
        self.0
            .push((at, format!("    {from}{kind}{to}: {}", escape(text))));
    }

    fn note(&mut self, at: DateTime<Utc>, over: &str, text: &str) {
        self.0
            .push((at, format!("    Note over {over}: {}", escape(text))));
    }

    fn hop(&mut self, at: DateTime<Utc>, from: &str, to: &str, kind: &str, text: &str) {
        self.arrow(at, from, "mcpscope", kind, text);
        self.arrow(at, "mcpscope", to, kind, text);
    }
}

/// One call's lines: its request, its streams, a task's steps, its outcome and what the client
/// did about it, in the order they happened.
fn diagram_call(model: &Model, call: &Call, lines: &mut Vec<String>) {
    let mut timeline = Timeline::default();
    // Who asks and who answers: the client, or the server for a request of its own.
    let sides = match call.dir {
        Direction::ClientToServer => ("Client", "Server"),
        Direction::ServerToClient => ("Server", "Client"),
    };
    request(model, call, sides, &mut timeline);
    call_streams(model, call, sides, &mut timeline);
    task_steps(model, call, &mut timeline);
    outcome(model, call, sides, &mut timeline);
    client_reactions(model, call, &mut timeline);
    timeline.0.sort_by_key(|(at, _)| *at);
    lines.extend(timeline.0.into_iter().map(|(_, line)| line));
}

/// A call's start: a note naming it (number, time, session), and its request from the asker
/// through mcpscope to the answerer.
fn request(model: &Model, call: &Call, (asker, answerer): (&str, &str), timeline: &mut Timeline) {
    let number = describe::number(call);
    let title = format!("{} id {}", call.title(), call.id_text());
    let start = call.started_at;
    timeline.note(
        start,
        "Client,Server",
        &format!(
            "call {number} at {}, session {}",
            describe::clock(start),
            describe::session(model, call)
        ),
    );
    let via = model
        .stream(call.request_stream)
        .map(stream_name)
        .unwrap_or_default();
    timeline.arrow(start, asker, "mcpscope", "->>", &format!("{title} ({via})"));
    timeline.arrow(start, "mcpscope", answerer, "->>", &title);
}

/// What a call's streams (the one it was sent on, and the one that owns it when another, a
/// resumption) show of it: a resumption's request, response heads, the proxy's notes, its
/// progress, and a death under it when the call was answered elsewhere.
fn call_streams(
    model: &Model,
    call: &Call,
    (asker, answerer): (&str, &str),
    timeline: &mut Timeline,
) {
    let mut streams: Vec<&Stream> = model.stream(call.request_stream).into_iter().collect();
    if let Some(owner) = model
        .stream(call.owner)
        .filter(|s| s.id != call.request_stream)
    {
        streams.push(owner);
    }
    for (i, stream) in streams.iter().enumerate() {
        if i > 0 {
            timeline.arrow(
                stream.opened_at,
                "Client",
                "mcpscope",
                "->>",
                &format!(
                    "{} resumes{}",
                    stream_name(stream),
                    stream
                        .request_header("last-event-id")
                        .map(|id| format!(" after event {id}"))
                        .unwrap_or_default()
                ),
            );
        }
        if call.dir == Direction::ClientToServer || i > 0 {
            head(stream, timeline);
        }
        for (at, _, text) in model.notes.iter().filter(|n| n.1 == Some(stream.id)) {
            timeline.note(*at, "mcpscope", text);
        }
        progress(model, call, stream, (answerer, asker), timeline);
        // A stream that died under a call later answered elsewhere (a resumption).
        if let Some(end) = &stream.ended
            && end.how != EndHow::Eof
            && call.verdict.death().is_none_or(|d| d.stream != stream.id)
        {
            death(timeline, stream, end.at, Some(end.how), Some(end.leg));
        }
    }
}

/// How a call ended, by its verdict: its result or error back to the asker, its stream's death
/// and why it was orphaned or left resumable, or a note that it was still pending. (A task's
/// result is drawn with its steps; a cancellation with the client's reactions.)
fn outcome(model: &Model, call: &Call, (asker, answerer): (&str, &str), timeline: &mut Timeline) {
    let number = describe::number(call);
    let start = call.started_at;
    let end = call.ended_at.unwrap_or(start);
    let id = call.id_text();
    match &call.verdict {
        // A task's result came with its `tasks/result` (drawn with the task's steps).
        Verdict::Answered if call.task().is_some() => {}
        Verdict::Answered => {
            let what = if describe::tool_error(call) {
                "result (isError)"
            } else {
                "result"
            };
            timeline.arrow(
                end,
                answerer,
                "mcpscope",
                "-->>",
                &format!("{what} id {id}"),
            );
            timeline.arrow(
                end,
                "mcpscope",
                asker,
                "-->>",
                &format!("{what} id {id} at {}", describe::clock(end)),
            );
        }
        Verdict::Error { message } => {
            timeline.arrow(end, answerer, "mcpscope", "-->>", &format!("error id {id}"));
            timeline.arrow(
                end,
                "mcpscope",
                asker,
                "-->>",
                &format!("error: {message} at {}", describe::clock(end)),
            );
        }
        Verdict::Orphaned { death: d, .. } | Verdict::Resumable { death: d, .. } => {
            if let Some(stream) = model.stream(d.stream) {
                death(timeline, stream, d.at, d.how, d.leg);
            }
            timeline.note(
                call.ended_at.unwrap_or(d.at),
                "Client,mcpscope",
                &format!(
                    "call {number} {}: {}",
                    call.verdict.name(),
                    describe::cause(call).unwrap_or_default()
                ),
            );
        }
        Verdict::Pending => {
            let last = model.clock().unwrap_or(start);
            timeline.note(
                last,
                "Client,Server",
                &format!("call {number} still pending at the end of the recording"),
            );
        }
        Verdict::Cancelled { .. } => {}
    }
}

/// What the client did about a call, as arrows from it: a retry, a cancellation, an
/// `initialize` again, a new GET.
fn client_reactions(model: &Model, call: &Call, timeline: &mut Timeline) {
    let id = call.id_text();
    for (at, reaction) in reactions(model, call) {
        let text = match reaction {
            "retry" => format!("retry: {} at {}", call.title(), describe::clock(at)),
            "cancel" => format!("notifications/cancelled id {id} at {}", describe::clock(at)),
            "re-initialize" => format!("initialize again at {}", describe::clock(at)),
            other => format!("{other} at {}", describe::clock(at)),
        };
        timeline.arrow(at, "Client", "mcpscope", "->>", &text);
    }
}

/// A task operation's steps: the task created, each request about it (a `tasks/get` poll, a
/// `tasks/result`, a `tasks/cancel`), status changes, a dead result wait, the result.
fn task_steps(model: &Model, call: &Call, timeline: &mut Timeline) {
    let Some(task) = call.task() else {
        return;
    };
    let id_of = |index: usize| {
        model
            .calls
            .get(index)
            .map(|c| c.id_text())
            .unwrap_or_else(|| "?".into())
    };
    let short = task.short_id();
    for step in &task.steps {
        let at = step.at;
        let clock = describe::clock(at);
        match &step.what {
            StepKind::Created { status } => timeline.hop(
                at,
                "Server",
                "Client",
                "-->>",
                &format!("task {short} created ({}) at {clock}", status.name()),
            ),
            StepKind::Asked { method, call } => timeline.hop(
                at,
                "Client",
                "Server",
                "->>",
                &format!("{method} id {} (task {short}) at {clock}", id_of(*call)),
            ),
            StepKind::Status { .. } => {
                timeline.hop(
                    at,
                    "Server",
                    "Client",
                    "-->>",
                    &format!("task {short} {} at {clock}", step.what.describe()),
                );
            }
            StepKind::WaitDied { call, stream } => {
                if let Some(s) = model.stream(*stream) {
                    let end = s.ended.as_ref();
                    death(timeline, s, at, end.map(|e| e.how), end.map(|e| e.leg));
                }
                timeline.note(
                    at,
                    "Client,mcpscope",
                    &format!(
                        "tasks/result id {} lost: the task {short} lives, ask again",
                        id_of(*call)
                    ),
                );
            }
            StepKind::Result { call, error } => timeline.hop(
                at,
                "Server",
                "Client",
                "-->>",
                &format!(
                    "{} id {} (task {short}) at {clock}",
                    if *error { "result (error)" } else { "result" },
                    id_of(*call)
                ),
            ),
            StepKind::Expired => {
                timeline.note(
                    at,
                    "Client,Server",
                    &format!("task {short} ttl expired at {clock}"),
                );
            }
        }
    }
}

/// The death of a stream: a lost message on the leg that ended it, and a note.
fn death(
    timeline: &mut Timeline,
    stream: &Stream,
    at: DateTime<Utc>,
    how: Option<EndHow>,
    leg: Option<Leg>,
) {
    let how = how.map(EndHow::as_str).unwrap_or("ended");
    let name = stream_name(stream);
    let from = match leg {
        Some(Leg::Client) => "Client",
        _ => "Server",
    };
    timeline.arrow(at, from, "mcpscope", "-x", &format!("{name} {how}"));
    timeline.note(
        at,
        "Client,Server",
        &format!(
            "{name} died: {how} on the {} leg at {}",
            leg.map(Leg::as_str).unwrap_or("no"),
            describe::clock(at)
        ),
    );
}

fn head(stream: &Stream, timeline: &mut Timeline) {
    let Some(status) = stream.status else {
        if let Some(error) = &stream.unreachable {
            let at = stream.ended.as_ref().map_or(stream.opened_at, |e| e.at);
            timeline.note(
                at,
                "mcpscope,Server",
                &format!("upstream unreachable: {error}"),
            );
            timeline.arrow(at, "mcpscope", "Client", "-->>", "HTTP 502");
        }
        return;
    };
    let kind = stream
        .body
        .map(|b| format!(" {}", b.word()))
        .unwrap_or_default();
    let text = format!("HTTP {status}{kind} ({})", stream_name(stream));
    let at = stream.head_at.unwrap_or(stream.opened_at);
    timeline.hop(at, "Server", "Client", "-->>", &text);
}

/// Notifications about the call on one of its streams (progress, messages): everything on its
/// own POST or a resumption, elsewhere what the model tied to it or its progress token.
fn progress(
    model: &Model,
    call: &Call,
    stream: &Stream,
    (answerer, asker): (&str, &str),
    timeline: &mut Timeline,
) {
    let whole =
        (stream.method == "POST" && stream.id == call.request_stream) || stream.resumes.is_some();
    let params = call.params();
    let token = params.get("_meta").and_then(|m| m.get("progressToken"));
    for mark in &stream.marks {
        let Some(message) = mark.message.and_then(|m| model.messages.get(m)) else {
            continue;
        };
        if mark.response || message.dir == call.dir {
            continue;
        }
        let body = message.body.value();
        let Kind::Notification { method, params } = classify(&body) else {
            continue;
        };
        let tied = message.call == Some(call.index)
            || (token.is_some() && params.get("progressToken") == token);
        if !whole && !tied {
            continue;
        }
        let mut text = method.to_string();
        if let Some(progress) = params.get("progress") {
            text.push_str(&format!(" {progress}"));
            if let Some(total) = params.get("total") {
                text.push_str(&format!("/{total}"));
            }
        }
        if let Some(id) = &mark.id {
            text.push_str(&format!(" (event {id})"));
        }
        text.push_str(&format!(" at {}", describe::clock(mark.at)));
        timeline.hop(mark.at, answerer, asker, "-->>", &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_mermaid() {
        assert_eq!(escape("POST#6; done"), "POST#35;6#59; done");
        assert_eq!(escape("a<b>\nc"), "a#lt;b#gt; c");
    }
}
