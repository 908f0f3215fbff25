//! The stream waterfall: each stream a bar from open to end, with marks for SSE events, the
//! result and the death. The window scrolls with the selection.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::fmt::{clock, duration_ms};
use crate::action::{WaterfallRow, waterfall_rows};
use crate::app::{App, Pane};
use mcpscope_engine::model::{Model, Operation, StepKind, Stream, Verdict};

const LABEL: usize = 16;

/// Draws the waterfall into `area`.
pub(crate) fn render(frame: &mut Frame, app: &App, model: &Model, now: DateTime<Utc>, area: Rect) {
    let theme = &app.theme;
    let focused = app.focus == Pane::Waterfall;
    let inner_h = usize::from(area.height.saturating_sub(2));
    let streams = model.streams.as_slice();
    let rows: Vec<Row> = waterfall_rows(model, app.waterfall.stream, inner_h)
        .into_iter()
        .filter_map(|row| match row {
            WaterfallRow::Stream(pos) => streams.get(pos).map(|s| Row::Stream(pos, s)),
            WaterfallRow::Task(call) => model.operation(call).map(Row::Task),
        })
        .collect();
    let t0 = rows.iter().map(Row::start).min();
    let t1 = rows.iter().map(|r| r.end(now)).max();
    let span_ms = match (t0, t1) {
        (Some(a), Some(b)) => (b - a).num_milliseconds().max(1),
        _ => 1,
    };
    let mut title = vec![Span::styled(" Waterfall ", theme.title())];
    if let Some(t0) = t0 {
        title.push(Span::styled(
            format!("{} + {} ", clock(t0, app.tz), duration_ms(span_ms)),
            theme.dim(),
        ));
    }
    let block = Block::bordered()
        .title(Line::from(title))
        .border_style(theme.pane_border(focused));
    let inner = block.inner(area);
    let width = usize::from(inner.width).saturating_sub(LABEL + 1).max(1);
    let col = |t: DateTime<Utc>| -> usize {
        let Some(t0) = t0 else { return 0 };
        let ms = (t - t0).num_milliseconds().clamp(0, span_ms);
        ((ms as f64 / span_ms as f64) * (width as f64 - 1.0)).round() as usize
    };
    let lines: Vec<Line> = rows
        .iter()
        .map(|row| {
            let (label, label_style, cells) = match row {
                Row::Stream(pos, stream) => {
                    let style = if *pos == app.waterfall.stream {
                        theme.selection()
                    } else {
                        theme.text()
                    };
                    (
                        stream.label(),
                        style,
                        stream_cells(app, model, stream, now, width, &col),
                    )
                }
                Row::Task(op) => (
                    task_label(model, op),
                    theme.dim(),
                    task_cells(app, op, now, width, &col),
                ),
            };
            let label = format!("{label:<w$.w$}", w = LABEL);
            let mut spans = vec![Span::styled(label, label_style), Span::raw(" ")];
            let mut run = String::new();
            let mut run_style = Style::default();
            for (ch, style) in cells {
                if style != run_style && !run.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut run), run_style));
                }
                run_style = style;
                run.push(ch);
            }
            spans.push(Span::styled(run, run_style));
            Line::from(spans)
        })
        .collect();
    // Plain text takes the screen's base style (`view::render`).
    let para = Paragraph::new(lines).block(block);
    frame.render_widget(para, area);
}

/// A row as drawn: a stream, or a task operation.
enum Row<'a> {
    Stream(usize, &'a Stream),
    Task(Operation<'a>),
}

impl Row<'_> {
    fn start(&self) -> DateTime<Utc> {
        match self {
            Self::Stream(_, stream) => stream.opened_at,
            Self::Task(op) => op.started_at,
        }
    }

    fn end(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Self::Stream(_, stream) => end_of(stream, now),
            Self::Task(op) => op.ended_at.unwrap_or(now.max(op.started_at)),
        }
    }
}

/// One cell of a bar.
type Cell = (char, Style);

/// A bar from column `a` to `b` in `style`, opening with `├`.
fn bar(width: usize, a: usize, b: usize, style: Style) -> Vec<Cell> {
    let mut cells: Vec<Cell> = vec![(' ', Style::default()); width];
    for cell in cells.iter_mut().take(b + 1).skip(a) {
        *cell = ('─', style);
    }
    if let Some(c) = cells.get_mut(a) {
        *c = ('├', style);
    }
    cells
}

/// A stream's bar: `•` SSE events, `◆` the result, `┤` a clean end, `✕` a death.
fn stream_cells(
    app: &App,
    model: &Model,
    stream: &Stream,
    now: DateTime<Utc>,
    width: usize,
    col: &dyn Fn(DateTime<Utc>) -> usize,
) -> Vec<Cell> {
    let theme = &app.theme;
    let dead = model.fate(stream).is_death();
    let bar_style = if dead {
        theme.stream_dead()
    } else if stream.is_open() {
        theme.stream_open()
    } else {
        theme.dim()
    };
    let b = col(end_of(stream, now));
    let mut cells = bar(width, col(stream.opened_at), b, bar_style);
    if let Some(end) = &stream.ended
        && !dead
        && let Some(c) = cells.get_mut(col(end.at))
    {
        *c = ('┤', bar_style);
    }
    for mark in &stream.marks {
        if let Some(c) = cells.get_mut(col(mark.at)) {
            *c = if mark.response {
                ('◆', theme.result())
            } else {
                ('•', theme.mark())
            };
        }
    }
    if let Some(end) = &stream.ended {
        if dead && let Some(c) = cells.get_mut(col(end.at)) {
            *c = ('✕', theme.death());
        }
    } else if stream.unreachable.is_some()
        && let Some(c) = cells.get_mut(b)
    {
        *c = ('✕', theme.death());
    }
    cells
}

/// `⧗ TOOL TASKID`: a task operation's label.
fn task_label(model: &Model, op: &Operation) -> String {
    let tool = model
        .calls
        .get(op.root)
        .and_then(|call| call.tool.as_deref())
        .unwrap_or("task");
    match op.task {
        Some(task) => format!("⧗ {tool} {}", task.short_id()),
        None => format!("⧗ {tool}"),
    }
}

/// A task operation's bar from its request to its end: `·` each `tasks/get`, `•` each
/// `tasks/result` asked, `○` a status change, `✕` a result wait that died (the task lives) or
/// the ttl running out, `◆` the result, `┤` the end.
fn task_cells(
    app: &App,
    op: &Operation,
    now: DateTime<Utc>,
    width: usize,
    col: &dyn Fn(DateTime<Utc>) -> usize,
) -> Vec<Cell> {
    let theme = &app.theme;
    let orphaned = matches!(op.verdict, Verdict::Orphaned { .. });
    let bar_style = if orphaned {
        theme.stream_dead()
    } else if op.ended_at.is_none() {
        theme.stream_open()
    } else {
        theme.dim()
    };
    let end = op.ended_at.unwrap_or(now.max(op.started_at));
    let mut cells = bar(width, col(op.started_at), col(end), bar_style);
    if op.ended_at.is_some()
        && let Some(c) = cells.get_mut(col(end))
    {
        *c = ('┤', bar_style);
    }
    for step in op.task.map_or(&[][..], |t| t.steps.as_slice()) {
        let cell = match &step.what {
            StepKind::Created { .. } => ('├', bar_style),
            StepKind::Asked { method, .. } if method == "tasks/get" => ('·', theme.mark()),
            StepKind::Asked { .. } => ('•', theme.mark()),
            StepKind::Status { .. } => ('○', theme.mark()),
            StepKind::WaitDied { .. } | StepKind::Expired => ('✕', theme.death()),
            StepKind::Result { error: false, .. } => ('◆', theme.result()),
            StepKind::Result { error: true, .. } => ('◆', theme.death()),
        };
        if let Some(c) = cells.get_mut(col(step.at)) {
            *c = cell;
        }
    }
    if orphaned && let Some(c) = cells.get_mut(col(end)) {
        *c = ('✕', theme.death());
    }
    cells
}

fn end_of(stream: &Stream, now: DateTime<Utc>) -> DateTime<Utc> {
    stream
        .ended
        .as_ref()
        .map_or(now.max(stream.opened_at), |e| e.at)
}
