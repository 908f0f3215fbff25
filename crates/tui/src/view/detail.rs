//! The detail pane: the selected call, stream, message or session — JSON, HTTP heads, SSE event
//! ids and byte spans, and timings (sent, first byte, each event, end).

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::fmt::{clock, duration_ms, verdict_style};
use super::json;
use crate::app::{App, Node, Pane, Selected};
use crate::grouping;
use crate::theme::Theme;
use mcpscope_engine::event::Header;
use mcpscope_engine::model::{Call, Model, Stream, SubscriptionState, Verdict, listen};

/// The layout pass: builds the pane's lines for the selection once for the frame, and keeps the
/// scroll within them.
pub(crate) fn settle(app: &mut App, model: &Model, now: DateTime<Utc>) {
    let (title, lines) = content(app, model, now);
    app.detail.show(title, lines);
}

/// Draws the detail pane into `area`, scrolled by `app.detail.scroll`: the lines the layout
/// pass built (built here only when it did not run for this pane).
pub(crate) fn render(frame: &mut Frame, app: &App, model: &Model, now: DateTime<Utc>, area: Rect) {
    let theme = &app.theme;
    let built;
    let (title, lines): (&str, Vec<Line>) = match app.detail.shown() {
        Some((title, lines)) => (title, lines.iter().map(borrowed).collect()),
        None => {
            built = content(app, model, now);
            (built.0, built.1.iter().map(borrowed).collect())
        }
    };
    let focused = app.focus == Pane::Detail;
    let block = Block::bordered()
        .title(Span::styled(title, theme.title()))
        .border_style(theme.pane_border(focused));
    // Plain text takes the screen's base style (`view::render`).
    let para = Paragraph::new(lines)
        .block(block)
        .scroll((app.detail.scroll, 0));
    frame.render_widget(para, area);
}

/// A line that borrows `line`'s text, to draw it without copying.
fn borrowed<'a>(line: &'a Line<'static>) -> Line<'a> {
    Line {
        style: line.style,
        alignment: line.alignment,
        spans: line
            .spans
            .iter()
            .map(|s| Span::styled(s.content.as_ref(), s.style))
            .collect(),
    }
}

/// The pane's title and lines for the selection.
fn content(app: &App, model: &Model, now: DateTime<Utc>) -> (&'static str, Vec<Line<'static>>) {
    let theme = &app.theme;
    match app.selected {
        Selected::Call(c) => match model.calls.get(c) {
            Some(call) if call.evicted.is_some() => {
                (" Call ", evicted_lines(app, model, call, now))
            }
            Some(call) => (" Call ", call_lines(app, model, call, now)),
            None => (" Detail ", Vec::new()),
        },
        Selected::Stream(id) => match model.stream(id) {
            Some(stream) => (" Stream ", stream_lines(app, model, stream)),
            None => (" Detail ", Vec::new()),
        },
        Selected::Message(m) => (" Message ", message_lines(app, model, m)),
        Selected::Session(s) => (" Session ", session_lines(app, model, s)),
        Selected::Server(node) => (" Server ", server_lines(app, model, node)),
        Selected::Nothing => (
            " Detail ",
            vec![Line::from(Span::styled(
                "select a call, stream or message",
                theme.dim(),
            ))],
        ),
    }
}

fn kv(theme: &Theme, key: &str, value: impl Into<String>) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{key:<11}"), theme.header()),
        Span::styled(value.into(), theme.text()),
    ])
}

fn head(theme: &Theme, text: &str) -> Line<'static> {
    Line::from(Span::styled(text.to_string(), theme.header()))
}

fn since(t: DateTime<Utc>, from: DateTime<Utc>) -> String {
    format!("+{}", duration_ms((t - from).num_milliseconds()))
}

/// An evicted call: its detail read back from the recording, or its compact row and why the
/// rest is not shown.
fn evicted_lines(app: &App, model: &Model, call: &Call, now: DateTime<Utc>) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let (from, to) = call.evicted.unwrap_or(call.seq);
    let recalled = app.recalled.as_ref().filter(|r| r.call == call.index);
    let (note, mut lines) = match recalled.map(|r| &r.detail) {
        Some(Ok((scratch, index))) => match scratch.calls.get(*index) {
            Some(found) => (
                format!("read back from the recording (events {from}–{to})"),
                call_lines(app, scratch, found, now),
            ),
            None => (String::new(), call_lines(app, model, call, now)),
        },
        Some(Err(reason)) => (reason.clone(), call_lines(app, model, call, now)),
        None => (
            match &app.info.recording {
                Some(_) => format!(
                    "evicted (past --keep {}): Enter reads it back from the recording",
                    model.retention().keep_calls
                ),
                None => format!(
                    "evicted (past --keep {}); not recorded (--no-record)",
                    model.retention().keep_calls
                ),
            },
            call_lines(app, model, call, now),
        ),
    };
    lines.insert(1, Line::from(Span::styled(note, theme.dim())));
    lines
}

fn call_lines(app: &App, model: &Model, call: &Call, now: DateTime<Utc>) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let session = model
        .sessions
        .get(call.session)
        .map(|s| s.label())
        .unwrap_or_default();
    let mut out = vec![Line::from(vec![
        Span::styled(call.title(), theme.title()),
        Span::styled(
            format!("  id={}  session {session}", call.id_text()),
            theme.dim(),
        ),
    ])];
    verdict_lines(app, model, call, &mut out);
    let owner = model
        .stream(call.owner)
        .map(|s| s.label())
        .unwrap_or_default();
    let request = model
        .stream(call.request_stream)
        .map(|s| s.label())
        .unwrap_or_default();
    out.push(kv(
        theme,
        "owner",
        format!("{owner}   (request on {request})"),
    ));
    out.push(kv(theme, "elapsed", duration_ms(call.elapsed_ms(now))));
    schema_lines(app, call, &mut out);
    death_lines(app, model, call, now, &mut out);
    mark_lines(app, model, call, &mut out);
    task_lines(app, model, call, &mut out);
    out.push(Line::default());
    out.push(head(theme, "Timings"));
    out.push(kv(theme, "  sent", clock(call.started_at, app.tz)));
    if let Some(stream) = model.stream(call.owner) {
        timing_lines(app, model, stream, call.started_at, &mut out);
    }
    call_message_lines(app, model, call, &mut out);
    out
}

/// The verdict, and what a listening call listens to.
fn verdict_lines(app: &App, model: &Model, call: &Call, out: &mut Vec<Line<'static>>) {
    let theme = &app.theme;
    let verdict = match &call.verdict {
        Verdict::Orphaned { cause, .. } => format!("orphaned — {}", cause.describe()),
        Verdict::Resumable { last_event_id, .. } => format!(
            "resumable — may be resumed from event id {}",
            last_event_id.as_deref().unwrap_or("-")
        ),
        Verdict::Error { message } => match call.superseded_by().and_then(|c| model.calls.get(c)) {
            Some(by) => format!(
                "a probe that failed ({message}); the client fell back to {} id={}",
                by.method,
                by.id_text()
            ),
            None => format!("error — {message}"),
        },
        other => other.name().to_string(),
    };
    out.push(Line::from(vec![
        Span::styled(format!("{:<11}", "verdict"), theme.header()),
        Span::styled(verdict, verdict_style(theme, &call.verdict)),
    ]));
    if call.method == listen::LISTEN {
        let heard = listen::listens_to(&call.params());
        let state = listen::state(&call.verdict);
        let style = match state {
            SubscriptionState::Dead(_) => theme.stream_dead(),
            _ => theme.dim(),
        };
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "listens to"), theme.header()),
            Span::styled(
                format!("{} — subscription {}", heard.join(", "), state.describe()),
                style,
            ),
        ]));
    }
}

/// The schema findings on the call's request and result.
fn schema_lines(app: &App, call: &Call, out: &mut Vec<Line<'static>>) {
    let theme = &app.theme;
    for violation in app.schema.of(call) {
        if violation.is_unchecked() {
            out.push(Line::from(vec![
                Span::styled(format!("{:<11}", "schema"), theme.header()),
                Span::styled(
                    format!("{}: {}", violation.side.word(), violation.message),
                    theme.dim(),
                ),
            ]));
            continue;
        }
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "schema"), theme.header()),
            Span::styled(
                format!(
                    "{}: {} {} — {}: {}",
                    violation.side.word(),
                    violation.side.instance(),
                    violation.path,
                    violation.keyword,
                    violation.message
                ),
                theme.error(),
            ),
        ]));
    }
}

/// When the owning stream died, and the first stream that died under the call when it was
/// another.
fn death_lines(
    app: &App,
    model: &Model,
    call: &Call,
    now: DateTime<Utc>,
    out: &mut Vec<Line<'static>>,
) {
    let theme = &app.theme;
    if let Some(death) = call.verdict.death() {
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "died"), theme.header()),
            Span::styled(
                format!(
                    "{} {} ({}) — {} ago",
                    clock(death.at, app.tz),
                    death.how.map(|h| h.as_str()).unwrap_or("no body"),
                    death.leg.map(|l| l.as_str()).unwrap_or("-"),
                    duration_ms((now - death.at).num_milliseconds())
                ),
                theme.stream_dead(),
            ),
        ]));
    }
    if let Some(first) = call
        .first_death()
        .filter(|first| Some(first) != call.verdict.death())
    {
        let label = model
            .stream(first.stream)
            .map(|s| s.label())
            .unwrap_or_default();
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "first died"), theme.header()),
            Span::styled(
                format!(
                    "{label} {} {} ({}) — {} ago",
                    clock(first.at, app.tz),
                    first.how.map(|h| h.as_str()).unwrap_or("no body"),
                    first.leg.map(|l| l.as_str()).unwrap_or("-"),
                    duration_ms((now - first.at).num_milliseconds())
                ),
                theme.stream_dead(),
            ),
        ]));
    }
}

/// What marks the call: a tool error, the client's reaction, a retry, a re-send, an injected
/// fault, a rescue.
fn mark_lines(app: &App, model: &Model, call: &Call, out: &mut Vec<Line<'static>>) {
    let theme = &app.theme;
    if call.is_tool_error() {
        out.push(Line::from(Span::styled(
            "the tool reported an error (isError: true)",
            theme.error(),
        )));
    }
    if !matches!(call.verdict, Verdict::Pending | Verdict::Answered) {
        out.push(kv(theme, "reaction", call.reaction.summary()));
    }
    if call.arrival > 1 {
        out.push(kv(
            theme,
            "arrival",
            format!("{} (a client retry)", call.arrival),
        ));
    }
    if let Some(of) = super::calls::resent_of(model, call) {
        out.push(kv(
            theme,
            "re-sent",
            format!("by mcpscope (a copy of id={of})"),
        ));
    }
    if call.injected {
        out.push(Line::from(Span::styled(
            "hit by an injected fault",
            theme.injected(),
        )));
    }
    if let Some(message) = call.rescued() {
        out.push(kv(theme, "rescued", format!("the client got: {message}")));
    }
}

/// The request and the response, highlighted where the filter's terms match.
fn call_message_lines(app: &App, model: &Model, call: &Call, out: &mut Vec<Line<'static>>) {
    let theme = &app.theme;
    let terms = app.filter.search_terms();
    let mark = Style::default().add_modifier(Modifier::REVERSED);
    if let Some(req) = model.request_message(call) {
        out.push(Line::default());
        out.push(head(theme, "Request"));
        out.extend(json::highlight(
            json::lines(&req.body.value(), theme, 2),
            &terms,
            mark,
        ));
    }
    if let Some(resp) = model.response_message(call) {
        out.push(Line::default());
        out.push(head(theme, "Response"));
        out.extend(json::highlight(
            json::lines(&resp.body.value(), theme, 2),
            &terms,
            mark,
        ));
    }
}

/// First byte, each SSE event (id, byte span, message), and the end, relative to `from`.
fn timing_lines(
    app: &App,
    model: &Model,
    stream: &Stream,
    from: DateTime<Utc>,
    out: &mut Vec<Line<'static>>,
) {
    let theme = &app.theme;
    if let Some(head_at) = stream.head_at {
        out.push(kv(
            theme,
            "  1st byte",
            format!(
                "{}  {}  HTTP {}",
                clock(head_at, app.tz),
                since(head_at, from),
                stream.status.unwrap_or(0)
            ),
        ));
    }
    // Events past the stream's detail limit: counted, never silently missing from the list.
    if stream.dropped_marks > 0 {
        let elsewhere = if app.info.recording.is_some() {
            "; the recording has them"
        } else {
            ""
        };
        out.push(Line::from(Span::styled(
            format!(
                "  … {} earlier events not held in memory{elsewhere}",
                stream.dropped_marks
            ),
            theme.dim(),
        )));
    }
    for mark in &stream.marks {
        let summary = mark
            .message
            .and_then(|m| model.messages.get(m))
            .map(|m| m.summary())
            .unwrap_or_else(|| "(no message)".to_string());
        let id = mark
            .id
            .as_deref()
            .map(|i| format!("id={i} "))
            .unwrap_or_default();
        let style = if mark.response {
            theme.result()
        } else {
            theme.mark()
        };
        out.push(Line::from(vec![
            Span::styled(
                format!("{:<11}", if mark.response { "  result" } else { "  event" }),
                theme.header(),
            ),
            Span::styled(
                format!("{}  {}  ", clock(mark.at, app.tz), since(mark.at, from)),
                theme.text(),
            ),
            Span::styled(
                format!("{id}bytes {}..{}  ", mark.span.0, mark.span.1),
                theme.dim(),
            ),
            Span::styled(summary, style),
        ]));
    }
    if let (Some(end), Some(err)) = (&stream.ended, &stream.unreachable) {
        // The answer mcpscope made itself: no upstream stream ended.
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "  end"), theme.header()),
            Span::styled(
                format!(
                    "{}  {}  answered by mcpscope (upstream unreachable: {err})",
                    clock(end.at, app.tz),
                    since(end.at, from),
                ),
                theme.stream_dead(),
            ),
        ]));
    } else if let Some(end) = &stream.ended {
        let style = if model.fate(stream).is_death() {
            theme.stream_dead()
        } else {
            theme.text()
        };
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "  end"), theme.header()),
            Span::styled(
                format!(
                    "{}  {}  {} ({})  {} bytes{}",
                    clock(end.at, app.tz),
                    since(end.at, from),
                    end.how.as_str(),
                    end.leg.as_str(),
                    end.bytes,
                    end.detail
                        .as_deref()
                        .map(|d| format!("  {d}"))
                        .unwrap_or_default()
                ),
                style,
            ),
        ]));
    } else if let Some(err) = &stream.unreachable {
        out.push(Line::from(Span::styled(
            format!("  unreachable: {err}"),
            theme.stream_dead(),
        )));
    } else {
        out.push(Line::from(Span::styled(
            "  still open",
            theme.stream_open(),
        )));
    }
}

fn headers(theme: &Theme, list: &[Header], out: &mut Vec<Line<'static>>) {
    for (k, v) in list {
        out.push(Line::from(vec![
            Span::styled(format!("  {k}: "), theme.json_key()),
            Span::styled(v.clone(), theme.text()),
        ]));
    }
}

fn stream_lines(app: &App, model: &Model, stream: &Stream) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let session = model.session_of(stream).label();
    let mut out = vec![Line::from(vec![
        Span::styled(stream.label(), theme.title()),
        Span::styled(
            format!("  conn {}  session {session}", stream.conn),
            theme.dim(),
        ),
    ])];
    if let Some(r) = stream.resumes {
        out.push(kv(theme, "resumes", format!("#{r}")));
    }
    if let Some(m) = &stream.resume_mismatch {
        out.push(Line::from(Span::styled(
            format!(
                "resume mismatch: Last-Event-ID {} is {}; the last id #{} carried was {}",
                stream.request_header("last-event-id").unwrap_or("-"),
                m.kind.words(),
                m.waiting,
                m.expected
            ),
            theme.error(),
        )));
    }
    if !stream.faults.is_empty() {
        out.push(Line::from(Span::styled(
            format!("faults: {}", stream.faults.join(", ")),
            theme.injected(),
        )));
    }
    // The proxy's notes on it (a rewritten legacy `endpoint`, an intercept's release), faults
    // aside (listed above).
    for (_, _, text) in model
        .notes
        .iter()
        .filter(|(_, s, text)| *s == Some(stream.id) && !text.starts_with("fault "))
    {
        out.push(Line::from(Span::styled(
            format!("note: {text}"),
            theme.injected(),
        )));
    }
    out.push(Line::default());
    out.push(head(
        theme,
        &format!("Request  {} {}", stream.method, stream.path),
    ));
    headers(theme, &stream.request_headers, &mut out);
    if let Some(status) = stream.status {
        out.push(head(theme, &format!("Response  {status}")));
        headers(theme, &stream.response_headers, &mut out);
    }
    out.push(Line::default());
    out.push(head(theme, "Timings"));
    out.push(kv(theme, "  opened", clock(stream.opened_at, app.tz)));
    timing_lines(app, model, stream, stream.opened_at, &mut out);
    if !stream.calls.is_empty() {
        out.push(Line::default());
        out.push(head(theme, "Calls"));
        for &c in &stream.calls {
            if let Some(call) = model.calls.get(c) {
                out.push(Line::from(vec![
                    Span::styled(
                        format!("  {} id={}  ", call.title(), call.id_text()),
                        theme.text(),
                    ),
                    Span::styled(call.verdict.name(), verdict_style(theme, &call.verdict)),
                ]));
            }
        }
    }
    out
}

fn message_lines(app: &App, model: &Model, index: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let Some(rec) = model.messages.get(index) else {
        return Vec::new();
    };
    let stream = model
        .stream(rec.stream)
        .map(|s| s.label())
        .unwrap_or_default();
    let mut out = vec![
        Line::from(Span::styled(rec.summary(), theme.title())),
        kv(theme, "at", clock(rec.at, app.tz)),
        kv(theme, "stream", stream),
    ];
    if let Some(id) = &rec.sse_id {
        out.push(kv(theme, "sse id", id.clone()));
    }
    if let Some(reason) = &rec.invalid {
        out.push(Line::from(Span::styled(
            format!("invalid: {reason}"),
            theme.error(),
        )));
    }
    out.push(Line::default());
    let terms = app.filter.search_terms();
    let mark = Style::default().add_modifier(Modifier::REVERSED);
    out.extend(json::highlight(
        json::lines(&rec.body.value(), theme, 0),
        &terms,
        mark,
    ));
    out
}

/// A server of a grouped tree: its origin, its sessions and how their calls stand.
fn server_lines(app: &App, model: &Model, node: Node) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let Some(origin) = grouping::server_of(model, node) else {
        return Vec::new();
    };
    let sessions: Vec<usize> = model
        .sessions
        .indexed()
        .filter(|(_, session)| session.origin.as_deref() == origin && !session.streams.is_empty())
        .map(|(si, _)| si)
        .collect();
    let (mut calls, mut open, mut orphaned, mut ended) = (0, 0, 0, 0);
    for call in model.calls.iter().filter(|c| sessions.contains(&c.session)) {
        calls += 1;
        open += usize::from(call.verdict.is_open());
        orphaned += usize::from(matches!(call.verdict, Verdict::Orphaned { .. }));
    }
    for &si in &sessions {
        ended += usize::from(model.sessions[si].ended.is_some());
    }
    vec![
        Line::from(Span::styled(
            origin.unwrap_or("(unknown server)").to_string(),
            theme.title(),
        )),
        kv(
            theme,
            "sessions",
            format!("{} ({ended} ended)", sessions.len()),
        ),
        kv(
            theme,
            "calls",
            format!("{calls} held · {open} waiting · {orphaned} orphaned"),
        ),
    ]
}

fn session_lines(app: &App, model: &Model, index: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let Some(s) = model.sessions.get(index) else {
        return Vec::new();
    };
    let mut out = vec![
        Line::from(Span::styled(s.label(), theme.title())),
        kv(
            theme,
            "revision",
            s.revision.clone().unwrap_or_else(|| "?".into()),
        ),
        kv(
            theme,
            "client",
            s.client.clone().unwrap_or_else(|| "?".into()),
        ),
        kv(
            theme,
            "server",
            s.server.clone().unwrap_or_else(|| "?".into()),
        ),
        kv(theme, "started", clock(s.started_at, app.tz)),
        kv(theme, "streams", s.streams.len().to_string()),
    ];
    if let Some((at, how)) = &s.ended {
        out.push(kv(
            theme,
            "ended",
            format!("{} {how:?}", clock(*at, app.tz)),
        ));
    }
    let mut tools: Vec<_> = s.tools.iter().collect();
    tools.sort_by(|a, b| a.0.cmp(b.0));
    for (name, info) in tools {
        let hint = if info.safe_to_retry() {
            "safe to retry"
        } else {
            "not idempotent"
        };
        out.push(kv(theme, "  tool", format!("{name} ({hint})")));
    }
    out.push(Line::default());
    out.extend(super::notifications::lines(app, model, index));
    out
}

/// A task operation's task (id, status, ttl, the result wait) and its timeline: create, polls,
/// status changes, lost waits, result. A request about a task names its operation.
fn task_lines(app: &App, model: &Model, call: &Call, out: &mut Vec<Line<'static>>) {
    let theme = &app.theme;
    if let Some(op) = call.about_task().and_then(|op| model.calls.get(op)) {
        let task = op.task().map(|t| t.id.clone()).unwrap_or_default();
        out.push(kv(
            theme,
            "task",
            format!("{task}: part of {} id={}", op.title(), op.id_text()),
        ));
        return;
    }
    let Some(task) = call.task() else {
        return;
    };
    let status = match &task.status_message {
        Some(m) => format!("{} — {m}", task.status.name()),
        None => task.status.name().to_string(),
    };
    out.push(kv(theme, "task", format!("{}  {status}", task.id)));
    let ttl = task.ttl_ms.map_or("unlimited".to_string(), |ms| {
        duration_ms(i64::try_from(ms).unwrap_or(i64::MAX))
    });
    let poll = task.poll_ms.map_or("-".to_string(), |ms| {
        duration_ms(i64::try_from(ms).unwrap_or(i64::MAX))
    });
    out.push(kv(theme, "ttl", format!("{ttl}   poll every {poll}")));
    if let Some(death) = task.wait_died.filter(|_| call.verdict.is_open()) {
        out.push(Line::from(vec![
            Span::styled(format!("{:<11}", "result"), theme.header()),
            Span::styled(
                format!(
                    "the tasks/result wait died on #{} ({}); the task lives: the client must ask again",
                    death.stream,
                    death.how.map(|h| h.as_str()).unwrap_or("no body")
                ),
                theme.stream_dead(),
            ),
        ]));
    }
    if task.reasked > 0 {
        out.push(kv(theme, "asked again", format!("×{}", task.reasked)));
    }
    out.push(Line::default());
    out.push(head(theme, "Task timeline"));
    if task.dropped_steps > 0 {
        out.push(Line::from(Span::styled(
            format!("  … {} earlier steps", task.dropped_steps),
            theme.dim(),
        )));
    }
    for step in &task.steps {
        let verdict = match step.what {
            mcpscope_engine::model::StepKind::Asked { call: c, .. } => model
                .calls
                .get(c)
                .map(|c| format!("  id={} {}", c.id_text(), c.verdict.name()))
                .unwrap_or_default(),
            _ => String::new(),
        };
        out.push(kv(
            theme,
            &format!("  {}", since(step.at, call.started_at)),
            format!("{}{verdict}", step.what.describe()),
        ));
    }
}
