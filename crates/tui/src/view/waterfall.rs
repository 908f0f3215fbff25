//! The stream waterfall: each stream a bar from open to end, with marks for SSE events, the
//! result and the death. The window scrolls with the selection.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::fmt::{clock, duration_ms};
use crate::action::waterfall_first;
use crate::app::{App, Pane};
use mcpscope_engine::model::{Model, Stream};

const LABEL: usize = 16;

/// Draws the waterfall into `area`.
pub fn render(frame: &mut Frame, app: &App, model: &Model, now: DateTime<Utc>, area: Rect) {
    let theme = &app.theme;
    let focused = app.focus == Pane::Waterfall;
    let inner_h = usize::from(area.height.saturating_sub(2));
    let streams = model.streams.as_slice();
    let first = waterfall_first(app.wf_stream, inner_h, streams.len());
    let shown = &streams[first.min(streams.len())..(first + inner_h).min(streams.len())];
    let t0 = shown.iter().map(|s| s.opened_at).min();
    let t1 = shown.iter().map(|s| end_of(s, now)).max();
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
    let lines: Vec<Line> = shown
        .iter()
        .enumerate()
        .map(|(i, stream)| {
            let selected = first + i == app.wf_stream;
            let dead = model.fate(stream).is_death();
            let bar_style = if dead {
                theme.stream_dead()
            } else if stream.is_open() {
                theme.stream_open()
            } else {
                theme.dim()
            };
            let mut cells: Vec<(char, Style)> = vec![(' ', Style::default()); width];
            let (a, b) = (col(stream.opened_at), col(end_of(stream, now)));
            for cell in cells.iter_mut().take(b + 1).skip(a) {
                *cell = ('─', bar_style);
            }
            if let Some(c) = cells.get_mut(a) {
                *c = ('├', bar_style);
            }
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
            let label = format!("{:<w$.w$}", stream.label(), w = LABEL);
            let label_style = if selected {
                theme.selection()
            } else {
                theme.text()
            };
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
    let para = Paragraph::new(lines).block(block).style(theme.text());
    frame.render_widget(para, area);
}

fn end_of(stream: &Stream, now: DateTime<Utc>) -> DateTime<Utc> {
    stream
        .ended
        .as_ref()
        .map_or(now.max(stream.opened_at), |e| e.at)
}
