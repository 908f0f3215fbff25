//! The pending calls table (home): one row per call, orphans first. Only visible rows are built.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table};

use super::fmt::{duration_ms, stream_state, verdict_style};
use crate::app::{App, Pane};
use mcpscope_engine::model::{Model, Verdict};

/// Columns: (header, width, shown when the pane is narrow).
const COLUMNS: &[(&str, u16, bool)] = &[
    ("session", 10, false),
    ("id", 5, true),
    ("method / tool", 18, true),
    ("stream", 13, true),
    ("stream state", 34, true),
    ("elapsed", 8, true),
    ("since death", 11, false),
    ("verdict", 9, true),
    ("reaction", 16, false),
];

/// Draws the calls table into `area`.
pub fn render(frame: &mut Frame, app: &mut App, model: &Model, now: DateTime<Utc>, area: Rect) {
    let theme = &app.theme;
    let focused = app.focus == Pane::Calls;
    let counts = model.counts();
    let mut title = vec![Span::styled(" Calls ", theme.title())];
    title.push(Span::styled(
        format!("{} shown ", app.rows.len()),
        theme.dim(),
    ));
    if counts.orphaned > 0 {
        title.push(Span::styled(
            format!("{} orphaned ", counts.orphaned),
            theme.orphaned(),
        ));
    }
    if app.hide_answered {
        title.push(Span::styled("answered hidden ", theme.dim()));
    }
    if app.follow {
        title.push(Span::styled("following ", theme.dim()));
    }
    let block = Block::bordered()
        .title(Line::from(title))
        .border_style(theme.pane_border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    app.areas.calls = area;
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let narrow = inner.width < 110;
    let cols: Vec<usize> = (0..COLUMNS.len())
        .filter(|&i| !narrow || COLUMNS[i].2)
        .collect();
    let page = usize::from(inner.height.saturating_sub(1)).max(1);
    app.page = page;
    if app.row < app.row_offset {
        app.row_offset = app.row;
    } else if app.row >= app.row_offset + page {
        app.row_offset = app.row + 1 - page;
    }
    app.row_offset = app.row_offset.min(app.rows.len().saturating_sub(page));
    app.areas.calls_rows = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    if app.rows.is_empty() {
        let text = if app.filter.is_empty() {
            "no calls yet: waiting for traffic"
        } else {
            "no call matches the filter (Esc clears it)"
        };
        let header = Row::new(cols.iter().map(|&i| Cell::from(COLUMNS[i].0))).style(theme.header());
        let rows = vec![Row::new(vec![Cell::from(Span::styled(text, theme.dim()))])];
        let table = Table::new(rows, [Constraint::Min(1)]).header(header);
        frame.render_widget(table, inner);
        return;
    }
    let visible = &app.rows[app.row_offset..(app.row_offset + page).min(app.rows.len())];
    let rows: Vec<Row> = visible
        .iter()
        .enumerate()
        .filter_map(|(i, &ci)| {
            let call = model.calls.get(ci)?;
            let style = verdict_style(theme, &call.verdict);
            let (state, dead) = stream_state(model, call, app.tz);
            let owner = model
                .stream(call.owner)
                .map(|s| s.label())
                .unwrap_or_default();
            let session = model
                .sessions
                .get(call.session)
                .map(|s| s.label())
                .unwrap_or_default();
            let since = call
                .verdict
                .death()
                .map(|d| duration_ms((now - d.at).num_milliseconds()))
                .unwrap_or_default();
            let reaction = match call.verdict {
                Verdict::Answered | Verdict::Pending => String::new(),
                _ => call.reaction.summary(),
            };
            let mut title = call.title();
            if call.injected {
                title.push_str(" ⚡");
            }
            let cells: Vec<Cell> = cols
                .iter()
                .map(|&c| match c {
                    0 => Cell::from(session.clone()),
                    1 => Cell::from(call.id_text()),
                    2 => Cell::from(title.clone()),
                    3 => Cell::from(owner.clone()),
                    4 => Cell::from(Span::styled(
                        state.clone(),
                        if dead {
                            theme.stream_dead()
                        } else if matches!(call.verdict, Verdict::Answered) {
                            style
                        } else {
                            theme.stream_open()
                        },
                    )),
                    5 => Cell::from(duration_ms(call.elapsed_ms(now))),
                    6 => Cell::from(since.clone()),
                    7 => Cell::from(call.verdict.name()),
                    _ => Cell::from(reaction.clone()),
                })
                .collect();
            let selected = app.row_offset + i == app.row;
            let row_style = if selected {
                style.patch(theme.selection())
            } else {
                style
            };
            Some(Row::new(cells).style(row_style))
        })
        .collect();
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|&c| {
            if c == 2 {
                Constraint::Min(COLUMNS[c].1)
            } else {
                Constraint::Length(COLUMNS[c].1)
            }
        })
        .collect();
    let header = Row::new(cols.iter().map(|&i| Cell::from(COLUMNS[i].0))).style(theme.header());
    let table = Table::new(rows, widths)
        .header(header)
        .style(Style::default().patch(theme.text()));
    frame.render_widget(table, inner);
}
