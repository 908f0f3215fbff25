//! The headless view: one readable line (or one JSON object) per notable change, for a live
//! feed or a replay.

use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc::UnboundedReceiver;

use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Notice, Retention};
use mcpscope_engine::schema::Watch;
use mcpscope_session::pace::Pace;

/// Output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Readable lines.
    Lines,
    /// JSON Lines.
    Json,
}

/// The view a run shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The TUI.
    Tui,
    /// Headless output in this style.
    Headless(Style),
}

impl View {
    /// The TUI on a terminal; headless when `--headless` or `--json` is given or stdout is not
    /// a terminal (JSON with `--json`, readable lines otherwise).
    pub fn chosen(headless: bool, json: bool) -> View {
        use std::io::IsTerminal;
        if json {
            View::Headless(Style::Json)
        } else if headless || !std::io::stdout().is_terminal() {
            View::Headless(Style::Lines)
        } else {
            View::Tui
        }
    }
}

/// Formats one notice; a readable line names its server when `model` says lines do
/// ([`Model::names_servers`]).
pub fn format(notice: &Notice, style: Style, model: &Model) -> String {
    match style {
        Style::Lines => mcpscope_export::headless::line_for(notice, model.names_servers()),
        Style::Json => serde_json::to_string(notice)
            .unwrap_or_else(|e| format!("{{\"kind\":\"error\",\"error\":{:?}}}", e.to_string())),
    }
}

/// The most events taken from the feed between two writes.
const BATCH: usize = 256;

/// Appends the lines of `notices` to `text`, each as [`format`] writes it (a JSON object
/// written straight into `text`, not into a string of its own first).
fn print_into(text: &mut Vec<u8>, notices: &[Notice], style: Style, model: &Model) {
    for notice in notices {
        let start = text.len();
        let written = match style {
            Style::Json => serde_json::to_writer(&mut *text, notice).is_ok(),
            Style::Lines => false,
        };
        if !written {
            text.truncate(start);
            text.extend_from_slice(format(notice, style, model).as_bytes());
        }
        text.push(b'\n');
    }
}

/// Folds events as they come and prints the notices until the feed closes; returns the model.
/// With `taken`, each event taken is reported to whoever feeds the view (the hub, an attached
/// session's feed), which waits for a view that falls behind (a stdout nobody reads) instead
/// of queueing without bound.
pub async fn run(feed: UnboundedReceiver<Event>, style: Style, taken: Option<Pace>) -> Model {
    run_to(feed, style, taken, &mut std::io::stdout()).await
}

/// [`run`], writing the notices to `out` (a file, stderr) instead of stdout.
pub async fn run_to(
    mut feed: UnboundedReceiver<Event>,
    style: Style,
    taken: Option<Pace>,
    out: &mut (dyn Write + Send),
) -> Model {
    // Each fact is printed as it happens: the model holds only what is still open. What has
    // gathered is taken at once and printed with one write.
    let mut model = Model::with_retention(Retention::none());
    let mut schemas = Watch::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut batch = Vec::with_capacity(BATCH);
    let mut text = Vec::new();
    loop {
        tokio::select! {
            taken_now = feed.recv_many(&mut batch, BATCH) => {
                if taken_now == 0 {
                    break;
                }
                for event in batch.drain(..) {
                    if let Some(taken) = &taken {
                        taken.release(&event);
                    }
                    let notices = model.apply_inspected(&event, &mut |m, n| schemas.notices(m, n));
                    print_into(&mut text, &notices, style, &model);
                }
            }
            _ = tick.tick() => {
                let notices = model.advance(Utc::now());
                print_into(&mut text, &notices, style, &model);
            }
        };
        if text.is_empty() {
            continue;
        }
        if out.write_all(&text).is_err() {
            return model;
        }
        text.clear();
        let _ = out.flush();
    }
    model
}

/// Prints the notices of a replay, pacing the events by their recorded times divided by
/// `speed` (0 = as fast as possible).
pub async fn print_replay(events: &[Event], style: Style, speed: f64) -> std::io::Result<Model> {
    let mut model = Model::new();
    let mut schemas = Watch::new();
    let mut previous: Option<DateTime<Utc>> = None;
    let stdout = std::io::stdout();
    for event in events {
        if let Some(prev) = previous
            && speed > 0.0
            && speed.is_finite()
        {
            let gap = (event.t - prev).num_microseconds().unwrap_or(0).max(0) as f64;
            tokio::time::sleep(Duration::from_secs_f64(gap / 1e6 / speed)).await;
        }
        previous = Some(event.t);
        let notices = model.apply_inspected(event, &mut |m, n| schemas.notices(m, n));
        write_notices(&stdout, &notices, style, &model)?;
    }
    Ok(model)
}

fn write_notices(
    stdout: &std::io::Stdout,
    notices: &[Notice],
    style: Style,
    model: &Model,
) -> std::io::Result<()> {
    if notices.is_empty() {
        return Ok(());
    }
    let mut out = stdout.lock();
    for notice in notices {
        writeln!(out, "{}", format(notice, style, model))?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines written straight into the output are the lines [`format`] writes, in both
    /// styles, over every notice the shipped recordings fold to.
    #[test]
    fn printed_lines_are_the_formatted_notices() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).expect("recordings") {
            let path = entry.expect("entry").path();
            let recording = mcpscope_engine::record::read_file(&path).expect("recording");
            let (model, notices) = Model::from_events(&recording.events);
            assert!(!notices.is_empty(), "{}", path.display());
            for style in [Style::Json, Style::Lines] {
                let mut text = Vec::new();
                print_into(&mut text, &notices, style, &model);
                let expected: String = notices
                    .iter()
                    .map(|n| format(n, style, &model) + "\n")
                    .collect();
                assert_eq!(String::from_utf8(text).expect("utf-8"), expected);
                checked += notices.len();
            }
        }
        assert!(checked > 20, "{checked}");
    }
}
