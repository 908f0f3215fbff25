//! The matrix's live grid on a terminal: the cells feed it as they start and end; Enter on a
//! finished cell opens its recording in the replay viewer at the death.

use std::path::Path;

use chrono::{DateTime, Utc};
use mcpscope_tui::grid::{Grid, GridCell, GridUpdate, Mark};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::cases::Case;
use super::cell::CellResult;

/// Where the cells send what the grid shows.
pub type Feed = UnboundedSender<GridUpdate>;

/// The grid, running on the terminal.
pub struct GridRun {
    /// Its updates.
    pub updates: Feed,
    task: JoinHandle<anyhow::Result<()>>,
}

/// Starts the grid: one row per case, one column per client (`labels`); the matrix's own
/// lines on stderr are held while it owns the terminal.
pub fn start(labels: &[String], cases: &[&'static Case], title: Option<String>) -> GridRun {
    let grid = Grid::new(
        title
            .as_deref()
            .map_or("", |t| t.trim_start_matches("mcpscope matrix: "))
            .to_string(),
        cases.iter().map(|c| c.name.to_string()).collect(),
        labels.to_vec(),
    );
    let (updates, received) = tokio::sync::mpsc::unbounded_channel();
    mcpscope_tui::hold_stderr(true);
    let task = tokio::spawn(async move {
        let ran = mcpscope_tui::grid::run_grid(
            grid,
            mcpscope_tui::Theme::default(),
            received,
            Box::new(open_recording),
        )
        .await;
        mcpscope_tui::hold_stderr(false);
        ran
    });
    GridRun { updates, task }
}

impl GridRun {
    /// Says the run is over and waits for the user to leave the grid.
    pub async fn finish(self, summary: String) {
        let _ = self.updates.send(GridUpdate::Finished(summary));
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => mcpscope_tui::say!("mcpscope matrix: the grid failed: {e:#}"),
            Err(e) => mcpscope_tui::say!("mcpscope matrix: the grid failed: {e}"),
        }
        mcpscope_tui::hold_stderr(false);
    }
}

impl GridRun {
    /// Closes the grid at once (the run failed): the terminal is restored and stderr is free
    /// again.
    pub async fn abort(self) {
        self.task.abort();
        let _ = self.task.await;
        mcpscope_tui::hold_stderr(false);
    }
}

/// A cell started.
pub fn running(feed: &Feed, row: usize, col: usize) {
    let _ = feed.send(GridUpdate::Running { row, col });
}

/// A cell ended.
pub fn done(feed: &Feed, row: usize, col: usize, cell: &CellResult) {
    let j = &cell.judgement;
    let mark = match (j.defect.is_some(), j.judged()) {
        (true, _) => Mark::Defect,
        (false, true) => Mark::Correct,
        (false, false) => Mark::NotJudged,
    };
    let _ = feed.send(GridUpdate::Done {
        row,
        col,
        cell: GridCell::Done {
            text: super::report::cell_text(j),
            mark,
            recording: cell.recording.clone(),
            at: cell.broke_at,
        },
    });
}

/// Opens `path` in the replay viewer (this same program) at `at`, on the terminal the grid gave
/// back, until the user closes it.
fn open_recording(path: &Path, at: Option<DateTime<Utc>>) -> std::io::Result<()> {
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.arg("replay").arg(path);
    if let Some(at) = at {
        command
            .arg("--at")
            .arg(at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
    }
    let status = command.status()?;
    match status.success() {
        true => Ok(()),
        false => Err(std::io::Error::other(format!(
            "the viewer ended with {status}"
        ))),
    }
}
