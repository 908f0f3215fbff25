//! The matrix's live grid: one row per case, one column per client, each cell's verdict as it
//! lands, a progress line, and Enter on a cell to open its recording at the death.
//!
//! The state ([`Grid`]) is pure and drawn by [`render`]; [`run_grid`] owns the terminal, takes
//! [`GridUpdate`]s from the running matrix and keys from the user.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use ratatui::Frame;
use ratatui::crossterm::event::{
    Event as TermEvent, EventStream, KeyCode, KeyEventKind, KeyModifiers,
};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::term::Term;
use crate::theme::Theme;

/// How a finished cell reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Correct.
    Correct,
    /// A defect.
    Defect,
    /// Skipped or inconclusive: not judged.
    NotJudged,
}

/// One cell of the grid.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum GridCell {
    /// Not started.
    #[default]
    Waiting,
    /// Running.
    Running,
    /// Done: its verdict.
    Done {
        /// `outcome: verdict`.
        text: String,
        /// How it reads.
        mark: Mark,
        /// The cell's recording, if kept.
        recording: Option<PathBuf>,
        /// The moment to open it at (the death, or the call's end).
        at: Option<DateTime<Utc>>,
    },
}

/// What the running matrix tells the grid.
#[derive(Debug, Clone, PartialEq)]
pub enum GridUpdate {
    /// A cell started.
    Running {
        /// Its case's row.
        row: usize,
        /// Its client's column.
        col: usize,
    },
    /// A cell ended.
    Done {
        /// Its case's row.
        row: usize,
        /// Its client's column.
        col: usize,
        /// What it ended as.
        cell: GridCell,
    },
    /// The whole run ended: its summary.
    Finished(String),
}

/// The grid's state.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// What runs (`claude-code 2.1.332 in a loopback-only network namespace`).
    pub title: String,
    /// The cases.
    pub rows: Vec<String>,
    /// The clients.
    pub columns: Vec<String>,
    cells: Vec<Vec<GridCell>>,
    selected: (usize, usize),
    finished: Option<String>,
    flash: Option<String>,
}

impl Grid {
    /// An empty grid of `rows` cases × `columns` clients.
    pub fn new(title: String, rows: Vec<String>, columns: Vec<String>) -> Self {
        let cells = vec![vec![GridCell::Waiting; columns.len()]; rows.len()];
        Grid {
            title,
            rows,
            columns,
            cells,
            selected: (0, 0),
            finished: None,
            flash: None,
        }
    }

    /// Takes an update.
    pub fn apply(&mut self, update: GridUpdate) {
        match update {
            GridUpdate::Running { row, col } => self.set(row, col, GridCell::Running),
            GridUpdate::Done { row, col, cell } => self.set(row, col, cell),
            GridUpdate::Finished(summary) => self.finished = Some(summary),
        }
    }

    fn set(&mut self, row: usize, col: usize, cell: GridCell) {
        if let Some(slot) = self.cells.get_mut(row).and_then(|r| r.get_mut(col)) {
            *slot = cell;
        }
    }

    /// The cell at (row, column).
    pub fn cell(&self, row: usize, col: usize) -> Option<&GridCell> {
        self.cells.get(row).and_then(|r| r.get(col))
    }

    /// Cells done, of all.
    pub fn progress(&self) -> (usize, usize) {
        let all = self.rows.len() * self.columns.len();
        let done = self
            .cells
            .iter()
            .flatten()
            .filter(|c| matches!(c, GridCell::Done { .. }))
            .count();
        (done, all)
    }

    /// Moves the selection by (rows, columns), within the grid.
    pub fn step(&mut self, rows: isize, cols: isize) {
        let clamp = |at: usize, by: isize, len: usize| {
            at.saturating_add_signed(by).min(len.saturating_sub(1))
        };
        self.selected = (
            clamp(self.selected.0, rows, self.rows.len()),
            clamp(self.selected.1, cols, self.columns.len()),
        );
        self.flash = None;
    }

    /// The selected cell's recording and moment, or why there is none (said in the view).
    pub fn open_selected(&mut self) -> Option<(PathBuf, Option<DateTime<Utc>>)> {
        let (row, col) = self.selected;
        let why = match self.cell(row, col) {
            Some(GridCell::Done {
                recording: Some(path),
                at,
                ..
            }) => return Some((path.clone(), *at)),
            Some(GridCell::Done { .. }) => "this cell kept no recording",
            _ => "this cell has not finished yet",
        };
        self.flash = Some(why.into());
        None
    }

    /// Says `text` in the view until the selection moves.
    pub fn say(&mut self, text: String) {
        self.flash = Some(text);
    }
}

fn style_of(theme: &Theme, cell: &GridCell, selected: bool) -> Style {
    let style = match cell {
        GridCell::Waiting => theme.dim(),
        GridCell::Running => theme.pending(),
        GridCell::Done { mark, .. } => match mark {
            Mark::Correct => theme.stream_open(),
            Mark::Defect => theme.orphaned(),
            Mark::NotJudged => theme.dim(),
        },
    };
    match selected {
        true => style.patch(theme.selection()),
        false => style,
    }
}

fn text_of(cell: &GridCell) -> &str {
    match cell {
        GridCell::Waiting => "·",
        GridCell::Running => "running…",
        GridCell::Done { text, .. } => text,
    }
}

/// Draws the grid into `area`.
pub fn render(frame: &mut Frame, grid: &Grid, theme: &Theme, area: Rect) {
    let [table_area, detail_area, status_area] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let case_width = grid.rows.iter().map(|r| r.len()).max().unwrap_or(4).max(4) as u16;
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(case_width))
        .chain(grid.columns.iter().map(|_| Constraint::Fill(1)))
        .collect();
    let header = Row::new(
        std::iter::once(Cell::from("case"))
            .chain(grid.columns.iter().map(|c| Cell::from(c.as_str())))
            .collect::<Vec<_>>(),
    )
    .style(theme.header());
    let rows = grid.rows.iter().enumerate().map(|(r, case)| {
        let cells = grid.cells[r].iter().enumerate().map(|(c, cell)| {
            let selected = grid.selected == (r, c);
            Cell::from(text_of(cell).to_string()).style(style_of(theme, cell, selected))
        });
        Row::new(std::iter::once(Cell::from(case.as_str())).chain(cells))
    });
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(2)
        .block(
            Block::bordered()
                .title(Span::styled(
                    format!(" matrix: {} ", grid.title),
                    theme.title(),
                ))
                .border_style(theme.border_focused()),
        );
    frame.render_widget(table, table_area);
    let (row, col) = grid.selected;
    let mut detail = vec![Line::from(vec![
        Span::styled(
            format!(
                "{} × {}: ",
                grid.rows.get(row).map_or("", String::as_str),
                grid.columns.get(col).map_or("", String::as_str)
            ),
            theme.header(),
        ),
        Span::styled(
            grid.cell(row, col).map_or("", text_of).to_string(),
            grid.cell(row, col)
                .map_or(theme.text(), |c| style_of(theme, c, false)),
        ),
    ])];
    let second = match (&grid.flash, grid.cell(row, col)) {
        (Some(flash), _) => Span::styled(flash.clone(), theme.status_alert()),
        (
            None,
            Some(GridCell::Done {
                recording: Some(path),
                at,
                ..
            }),
        ) => Span::styled(
            format!(
                "Enter: open {} at {}",
                path.display(),
                at.map_or_else(
                    || "its start".into(),
                    |t| t.format("%H:%M:%S%.3f").to_string()
                )
            ),
            theme.dim(),
        ),
        _ => Span::raw(""),
    };
    detail.push(Line::from(second));
    frame.render_widget(Paragraph::new(detail), detail_area);
    let (done, all) = grid.progress();
    let status = match &grid.finished {
        Some(summary) => format!(
            " done: {summary} │ arrows move · Enter opens a cell's recording at the death · q quits"
        ),
        None => format!(
            " {done}/{all} cells │ arrows move · Enter opens a finished cell's recording · q leaves the grid (the run goes on)"
        ),
    };
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(status, theme.status_bar()))),
        status_area,
    );
}

/// What opens a cell's recording at a moment (the replay viewer, on the terminal the grid
/// gave back; blocking until it is closed).
pub type Opener = Box<dyn Fn(&Path, Option<DateTime<Utc>>) -> std::io::Result<()> + Send + Sync>;

/// Runs the grid on the terminal until the user quits: draws `grid` as `updates` arrive, moves
/// with the arrow keys (or hjkl), opens a finished cell with Enter through `open` (the grid
/// gives the terminal back meanwhile). Returns when the user quits (q, Esc, ctrl-c); the
/// matrix goes on without it if it has not finished.
pub async fn run_grid(
    mut grid: Grid,
    theme: Theme,
    mut updates: UnboundedReceiver<GridUpdate>,
    open: Opener,
) -> anyhow::Result<()> {
    let open = std::sync::Arc::new(open);
    let mut term = Term::enter()?;
    let mut keys = EventStream::new();
    loop {
        term.terminal
            .draw(|frame| render(frame, &grid, &theme, frame.area()))?;
        tokio::select! {
            update = updates.recv() => match update {
                Some(update) => grid.apply(update),
                None => {
                    // The matrix ended without its summary (an error): wait for the user.
                    if grid.finished.is_none() {
                        grid.finished = Some("the run stopped".into());
                    }
                    updates = tokio::sync::mpsc::unbounded_channel().1;
                }
            },
            key = keys.next() => {
                let Some(Ok(TermEvent::Key(key))) = key else {
                    if key.is_none() {
                        return Ok(());
                    }
                    continue;
                };
                if key.kind != KeyEventKind::Press {
                    continue;
                }
                match key.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(());
                    }
                    KeyCode::Up | KeyCode::Char('k') => grid.step(-1, 0),
                    KeyCode::Down | KeyCode::Char('j') => grid.step(1, 0),
                    KeyCode::Left | KeyCode::Char('h') => grid.step(0, -1),
                    KeyCode::Right | KeyCode::Char('l') => grid.step(0, 1),
                    KeyCode::Enter => {
                        if let Some((path, at)) = grid.open_selected() {
                            drop(term);
                            let opener = std::sync::Arc::clone(&open);
                            let opened =
                                tokio::task::spawn_blocking(move || opener(&path, at)).await;
                            term = Term::enter()?;
                            keys = EventStream::new();
                            match opened {
                                Ok(Ok(())) => {}
                                Ok(Err(e)) => grid.say(format!("cannot open the recording: {e}")),
                                Err(e) => grid.say(format!("cannot open the recording: {e}")),
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn text(grid: &Grid, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        terminal
            .draw(|f| render(f, grid, &Theme::dark(), f.area()))
            .expect("draw");
        let buffer = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn cells_fill_in_as_they_land_and_enter_opens_only_a_finished_recorded_one() {
        let mut grid = Grid::new(
            "two clients".into(),
            vec!["healthy".into(), "reset-after-event".into()],
            vec!["claude-code 2.1.304".into(), "claude-code 2.1.332".into()],
        );
        grid.apply(GridUpdate::Running { row: 0, col: 0 });
        let at = Utc::now();
        grid.apply(GridUpdate::Done {
            row: 1,
            col: 1,
            cell: GridCell::Done {
                text: "hung: hangs on stream death".into(),
                mark: Mark::Defect,
                recording: Some(PathBuf::from("/tmp/cells/reset-after-event.jsonl")),
                at: Some(at),
            },
        });
        let screen = text(&grid, 110, 12);
        assert!(screen.contains("claude-code 2.1.304"), "{screen}");
        assert!(screen.contains("running…"), "{screen}");
        assert!(screen.contains("hung: hangs on stream death"), "{screen}");
        assert!(screen.contains("1/4 cells"), "{screen}");
        assert_eq!(
            grid.open_selected(),
            None,
            "the running cell has nothing to open"
        );
        assert!(text(&grid, 110, 12).contains("has not finished yet"));
        grid.step(5, 5);
        assert_eq!(
            grid.open_selected(),
            Some((
                PathBuf::from("/tmp/cells/reset-after-event.jsonl"),
                Some(at)
            ))
        );
        grid.apply(GridUpdate::Finished("4 cells, 1 with a defect".into()));
        assert!(text(&grid, 110, 12).contains("done: 4 cells, 1 with a defect"));
        // A tiny terminal draws without a panic.
        let _ = text(&grid, 10, 3);
    }
}
