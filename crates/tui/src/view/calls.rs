//! The pending calls table (home): one row per call, orphans first. Only visible rows are built.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table};

use super::fmt::{duration_ms, stream_state, stream_state_narrow, verdict_style};
use crate::app::{App, Pane};
use mcpscope_engine::model::{Call, Model, Verdict};

/// A column of the calls table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    /// The call's session.
    Session,
    /// The call's server (shown when more than one is seen).
    Server,
    /// The JSON-RPC id.
    Id,
    /// The method, or `tools/call NAME`.
    Title,
    /// The owning stream.
    Stream,
    /// Whether the owning stream is open, closed or died (and when).
    StreamState,
    /// Time since the call was sent.
    Elapsed,
    /// Time since the owning stream died.
    SinceDeath,
    /// The verdict.
    Verdict,
    /// What the client did about a lost call.
    Reaction,
}

impl Column {
    /// Every column, left to right.
    pub(crate) const ALL: [Column; 10] = [
        Column::Session,
        Column::Server,
        Column::Id,
        Column::Title,
        Column::Stream,
        Column::StreamState,
        Column::Elapsed,
        Column::SinceDeath,
        Column::Verdict,
        Column::Reaction,
    ];

    /// The header.
    pub(crate) fn header(self) -> &'static str {
        match self {
            Column::Session => "session",
            Column::Server => "server",
            Column::Id => "id",
            Column::Title => "method / tool",
            Column::Stream => "stream",
            Column::StreamState => "stream state",
            Column::Elapsed => "elapsed",
            Column::SinceDeath => "since death",
            Column::Verdict => "verdict",
            Column::Reaction => "reaction",
        }
    }

    /// The width: fixed, except the title, which takes what is left (at least this).
    pub(crate) fn width(self) -> Constraint {
        match self {
            Column::Session => Constraint::Length(10),
            Column::Server => Constraint::Length(16),
            Column::Id => Constraint::Length(5),
            Column::Title => Constraint::Min(18),
            Column::Stream => Constraint::Length(13),
            Column::StreamState => Constraint::Length(34),
            Column::Elapsed => Constraint::Length(8),
            Column::SinceDeath => Constraint::Length(11),
            Column::Verdict => Constraint::Length(9),
            Column::Reaction => Constraint::Length(16),
        }
    }

    /// Whether the column is shown when the pane is tiny (under 70 columns inside): the
    /// owning stream and the elapsed time give way to the death's cause and age.
    pub(crate) fn when_tiny(self) -> bool {
        self.when_narrow() && !matches!(self, Column::Stream | Column::Elapsed)
    }

    /// Whether the column is shown when the pane is narrow (the server gives way with the
    /// session: the death's cause and age come first).
    pub(crate) fn when_narrow(self) -> bool {
        !matches!(
            self,
            Column::Session | Column::Server | Column::SinceDeath | Column::Reaction
        )
    }
}

/// Draws the calls table into `area`.
pub(crate) fn render(frame: &mut Frame, app: &App, model: &Model, now: DateTime<Utc>, area: Rect) {
    let theme = &app.theme;
    let focused = app.focus == Pane::Calls;
    let title = pane_title(app, model);
    let block = Block::bordered()
        .title(Line::from(title))
        .border_style(theme.pane_border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let layout = Layout::of(inner, model);
    let header = Row::new(layout.cols.iter().map(|c| Cell::from(c.header()))).style(theme.header());
    if app.calls.rows.is_empty() {
        let text = empty_text(app);
        let rows = vec![Row::new(vec![Cell::from(Span::styled(text, theme.dim()))])];
        let table = Table::new(rows, [Constraint::Min(1)]).header(header);
        frame.render_widget(table, inner);
        return;
    }
    let first = app.calls.offset.min(app.calls.rows.len());
    let visible = app.calls.visible();
    let rows: Vec<Row> = visible
        .iter()
        .enumerate()
        .filter_map(|(i, &ci)| {
            let call = model.calls.get(ci)?;
            let selected = first + i == app.calls.row;
            Some(call_row(app, model, now, &layout, call, selected))
        })
        .collect();
    // The stream column grows to the longest label shown (`GET#23 resumed`).
    let stream_width = visible
        .iter()
        .filter_map(|&ci| model.calls.get(ci))
        .filter_map(|call| model.stream(call.owner))
        .map(|s| s.label().chars().count() as u16)
        .max()
        .unwrap_or(0);
    let widths: Vec<Constraint> = layout
        .cols
        .iter()
        .map(|c| match (c, c.width()) {
            (Column::Stream, Constraint::Length(n)) => Constraint::Length(n.max(stream_width)),
            (Column::StreamState, _) if layout.narrow => Constraint::Length(layout.state_room),
            (_, width) => width,
        })
        .collect();
    // Plain text takes the screen's base style (`view::render`).
    let table = Table::new(rows, widths).header(header);
    frame.render_widget(table, inner);
}

/// The pane's title: how many calls are shown and orphaned, and what hides or follows them.
fn pane_title<'a>(app: &App, model: &Model) -> Vec<Span<'a>> {
    let theme = &app.theme;
    let counts = model.counts();
    let mut title = vec![Span::styled(" Calls ", theme.title())];
    title.push(Span::styled(
        format!("{} shown ", app.calls.rows.len()),
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
    title
}

/// The columns that fit a pane, and how much room the stream state gets.
struct Layout {
    cols: Vec<Column>,
    narrow: bool,
    state_room: u16,
}

impl Layout {
    /// The columns for a pane `inner` wide: fewer when narrow or tiny, the server's only when
    /// more than one server is seen and every column fits.
    fn of(inner: Rect, model: &Model) -> Self {
        let narrow = inner.width < 110;
        let tiny = inner.width < 70;
        // The server column, when more than one server is seen, only where every column fits: a
        // narrower pane keeps the death's cause and age first.
        let server_column = inner.width >= 150 && model.servers().len() > 1;
        let cols: Vec<Column> = Column::ALL
            .into_iter()
            .filter(|c| *c != Column::Server || server_column)
            .filter(|c| !narrow || c.when_narrow())
            .filter(|c| !tiny || c.when_tiny())
            .collect();
        // Narrow, the stream state takes what the other columns leave (the title keeps its
        // minimum): a death's cause and age first, its leg and clock time when they fit.
        let state_room = if narrow {
            let others: u16 = cols
                .iter()
                .filter(|c| **c != Column::StreamState)
                .map(|c| match c.width() {
                    Constraint::Length(n) | Constraint::Min(n) => n,
                    _ => 0,
                })
                .sum();
            let spacing = u16::try_from(cols.len().saturating_sub(1)).unwrap_or(u16::MAX);
            inner.width.saturating_sub(others + spacing).clamp(8, 40)
        } else {
            34
        };
        Self {
            cols,
            narrow,
            state_room,
        }
    }
}

/// What an empty pane says: why no call is shown.
fn empty_text(app: &App) -> &'static str {
    if !app.filter.is_empty() {
        "no call matches the filter (Esc clears it)"
    } else if app.replay.as_ref().is_some_and(|r| !r.playing) {
        "no calls yet at this point: space plays, . steps one event, ] goes to the end"
    } else if app.replay.is_some() {
        "no calls yet at this point of the recording"
    } else {
        "no calls yet: waiting for traffic"
    }
}

/// A call's title with its marks: its task and status, injected (⚡), re-sent (↻), and its
/// schema findings.
fn call_title(app: &App, model: &Model, call: &Call) -> String {
    let mut title = call.title();
    if let Some(task) = call.task() {
        title.push_str(&format!(
            " [task {} {}",
            task.short_id(),
            task.status.name()
        ));
        if task.wait_died.is_some() && call.verdict.is_open() {
            title.push_str(", result wait died: ask again");
        }
        title.push(']');
    }
    if call.injected {
        title.push_str(" ⚡");
    }
    if resent_of(model, call).is_some() {
        title.push_str(" ↻");
    }
    let found = app.schema.of(call);
    if found.iter().any(|v| !v.is_unchecked()) {
        title.push_str(" ⚠schema");
    } else if !found.is_empty() {
        title.push_str(" ?schema");
    }
    title
}

/// One call's row, its cells in the layout's columns.
fn call_row<'a>(
    app: &App,
    model: &Model,
    now: DateTime<Utc>,
    layout: &Layout,
    call: &Call,
    selected: bool,
) -> Row<'a> {
    let theme = &app.theme;
    let style = if call.is_tool_error() {
        theme.error()
    } else if call.superseded_by().is_some() {
        theme.dim()
    } else {
        verdict_style(theme, &call.verdict)
    };
    let (state, dead) = if layout.narrow {
        stream_state_narrow(model, call, app.tz, now, usize::from(layout.state_room))
    } else {
        stream_state(model, call, app.tz)
    };
    let owner = model
        .stream(call.owner)
        .map(|s| s.label())
        .unwrap_or_default();
    let session = model
        .sessions
        .get(call.session)
        .map(|s| s.label())
        .unwrap_or_default();
    let server = model
        .call_server(call)
        .map(server_label)
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
    let title = call_title(app, model, call);
    let cells: Vec<Cell> = layout
        .cols
        .iter()
        .map(|c| match c {
            Column::Session => Cell::from(session.clone()),
            Column::Server => Cell::from(server.clone()),
            Column::Id => Cell::from(call.id_text()),
            Column::Title => Cell::from(title.clone()),
            Column::Stream => Cell::from(owner.clone()),
            Column::StreamState => Cell::from(Span::styled(
                state.clone(),
                if dead {
                    theme.stream_dead()
                } else if matches!(call.verdict, Verdict::Answered) {
                    style
                } else {
                    theme.stream_open()
                },
            )),
            Column::Elapsed => Cell::from(duration_ms(call.elapsed_ms(now))),
            Column::SinceDeath => Cell::from(since.clone()),
            Column::Verdict => Cell::from(if call.is_tool_error() {
                "isError"
            } else if call.superseded_by().is_some() {
                "fell back"
            } else {
                call.verdict.name()
            }),
            Column::Reaction => Cell::from(reaction.clone()),
        })
        .collect();
    let row_style = if selected {
        style.patch(theme.selection())
    } else {
        style
    };
    Row::new(cells).style(row_style)
}

/// A server as the views name it: its origin without the scheme (`127.0.0.1:4001`,
/// `api.example`), or a stdio process's name.
pub(crate) fn server_label(origin: &str) -> String {
    origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .to_string()
}

/// The id of the call a request re-sent by mcpscope (`r`) copies, if it is one.
pub(crate) fn resent_of(model: &Model, call: &mcpscope_engine::model::Call) -> Option<String> {
    model
        .stream(call.request_stream)?
        .request_header(mcpscope_engine::fault::RESENT_HEADER)
        .map(str::to_string)
}
