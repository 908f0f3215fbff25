//! The status bar: addresses, recording, counts, armed faults, filter, mode; or the input line.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::fmt::clock;
use crate::app::{App, Input, InputKind, ReplayStatus};
use mcpscope_engine::model::Model;

/// Draws the status bar (or the line being typed) into `area`.
pub(crate) fn render(frame: &mut Frame, app: &App, model: &Model, now: DateTime<Utc>, area: Rect) {
    let theme = &app.theme;
    if let Some(input) = &app.input {
        render_input(frame, app, input, area);
        return;
    }
    let bar = theme.status_bar();
    let alert = theme.status_alert();
    let sep = || Span::styled(" │ ", bar);
    let mut spans = Vec::new();
    if let Some(r) = &app.replay {
        spans.push(Span::styled(replay_text(app, r, now), alert));
        spans.push(sep());
    }
    let fixed_start = spans.len();
    where_spans(app, model, &mut spans);
    // Where the addresses and the recording end: the first to go when the bar is too long.
    let fixed_end = spans.len();
    state_spans(app, model, &mut spans);
    // The message takes the lines above the bar, wrapped, so that it is never cut.
    let [message_area, bar_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    if let Some(flash) = &app.flash {
        if message_area.height > 0 {
            let message = Paragraph::new(Span::styled(flash.clone(), alert))
                .style(bar)
                .wrap(Wrap { trim: false });
            frame.render_widget(message, message_area);
        } else {
            spans.push(sep());
            spans.push(Span::styled(flash.clone(), alert));
        }
    }
    let help = " │ ? help";
    let help_width = help.chars().count();
    let fits = |spans: &[Span]| {
        spans.iter().map(Span::width).sum::<usize>() + help_width <= usize::from(bar_area.width)
    };
    if !fits(&spans) {
        spans.drain(fixed_start..fixed_end);
    }
    let line = Line::from(spans);
    if line.width() + help_width <= usize::from(bar_area.width) {
        let mut line = line;
        line.push_span(Span::styled(help, bar));
        frame.render_widget(Paragraph::new(line).style(bar), bar_area);
        return;
    }
    // Too long for the width: `? help` keeps its place at the right end, the rest is cut.
    let help_width = u16::try_from(help_width)
        .unwrap_or(u16::MAX)
        .min(bar_area.width);
    let [left, right] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(help_width)]).areas(bar_area);
    frame.render_widget(Paragraph::new(line).style(bar), left);
    frame.render_widget(Paragraph::new(Span::styled(help, bar)).style(bar), right);
}

/// The input line: its prompt and what is typed so far.
fn render_input(frame: &mut Frame, app: &App, input: &Input, area: Rect) {
    let theme = &app.theme;
    let prompt = match input.kind {
        InputKind::Filter => crate::filter::PROMPT,
        InputKind::Arm => "arm fault rule: ",
        InputKind::Seek => "seek to HH:MM:SS[.mmm]: ",
        InputKind::Intercept => "intercept (tool:NAME method:M; empty turns it off): ",
    };
    let line = Line::from(vec![
        Span::styled(prompt, theme.header()),
        Span::styled(format!("{}█", input.text), theme.input()),
    ]);
    frame.render_widget(Paragraph::new(line).style(theme.input()), area);
}

/// A replay's state: playing or paused, speed, clock and position.
fn replay_text(app: &App, r: &ReplayStatus, now: DateTime<Utc>) -> String {
    format!(
        " REPLAY {} {} {} · event {}/{}{}{}{}",
        if r.playing { "▶" } else { "⏸" },
        r.speed,
        clock(now, app.tz),
        r.position,
        r.len,
        if r.complete { "" } else { "+" },
        r.note
            .as_deref()
            .map(|n| format!(" · {n}"))
            .unwrap_or_default(),
        if r.playing { "" } else { " · space plays" }
    )
}

/// Where the session runs: its addresses and its recording (the first to go when the bar is
/// too long).
fn where_spans(app: &App, model: &Model, spans: &mut Vec<Span<'static>>) {
    let bar = app.theme.status_bar();
    let sep = || Span::styled(" │ ", bar);
    let listen = app
        .info
        .listen
        .clone()
        .or_else(|| model.proxy.as_ref().map(|p| p.listen.clone()));
    let upstream = app
        .info
        .upstream
        .clone()
        .or_else(|| model.proxy.as_ref().map(|p| p.upstream.clone()));
    if listen.is_some() || upstream.is_some() {
        spans.push(Span::styled(
            format!(
                " {} → {}",
                listen.as_deref().unwrap_or("?"),
                upstream.as_deref().unwrap_or("?")
            ),
            bar,
        ));
        spans.push(sep());
    }
    if let Some(rec) = &app.info.recording {
        spans.push(Span::styled(format!("rec {}", rec.display()), bar));
        spans.push(sep());
    }
}

/// The counts, and every state the user set or should know of: evictions, armed rules, the
/// intercept, the filter, a pause, the exporter, a closed feed.
fn state_spans(app: &App, model: &Model, spans: &mut Vec<Span<'static>>) {
    let bar = app.theme.status_bar();
    let alert = app.theme.status_alert();
    let sep = || Span::styled(" │ ", bar);
    let c = model.counts();
    spans.push(Span::styled(
        format!(
            "{} sessions · {} open · {} pending · ",
            c.sessions, c.open_streams, c.pending
        ),
        bar,
    ));
    spans.push(Span::styled(
        format!("{} orphaned", c.orphaned),
        if c.orphaned > 0 { alert } else { bar },
    ));
    if let Some(text) = evicted_text(model) {
        spans.push(sep());
        spans.push(Span::styled(text, bar));
    }
    if !app.armed.is_empty() {
        let labels: Vec<&str> = app.armed.iter().map(|(_, label)| label.as_str()).collect();
        spans.push(sep());
        spans.push(Span::styled(format!("armed: {}", labels.join(", ")), alert));
    }
    if app.intercept.is_some() || !app.intercepted.is_empty() {
        spans.push(sep());
        spans.push(Span::styled(
            format!(
                "INTERCEPT {} · {} held (I lists)",
                app.intercept.as_deref().unwrap_or("off"),
                app.intercepted.len()
            ),
            alert,
        ));
    }
    if !app.filter.is_empty() {
        spans.push(sep());
        spans.push(Span::styled(format!("filter: {}", app.filter.text), bar));
    }
    if app.paused {
        spans.push(sep());
        spans.push(Span::styled(
            format!("PAUSED (+{} events)", app.held),
            alert,
        ));
    }
    if let Some(text) = app.info.telemetry.as_ref().and_then(|t| (t.0)()) {
        spans.push(sep());
        spans.push(Span::styled(text, alert));
    }
    if app.feed_closed {
        spans.push(sep());
        spans.push(Span::styled("feed closed", alert));
    }
}

/// What the model let go of to stay within its memory policy, when it let go of anything:
/// `evicted 120 compacted · 40 calls · 7 streams · 9100 msgs`. Compacted calls keep a row;
/// the rest are only counted (a recording has them all).
pub(crate) fn evicted_text(model: &Model) -> Option<String> {
    let e = model.evicted();
    let parts: Vec<String> = [
        (e.compacted, "compacted"),
        (e.dropped, "calls"),
        (e.streams, "streams"),
        (e.messages, "msgs"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    (!parts.is_empty()).then(|| format!("evicted {}", parts.join(" · ")))
}
