//! The headless view: one readable line (or one JSON object) per notable change.

use std::io::Write;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc::UnboundedReceiver;

use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Notice, Retention};
use mcpscope_proxy::hub::ViewPace;

/// Output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Readable lines.
    Lines,
    /// JSON Lines.
    Json,
}

/// Formats one notice.
pub fn format(notice: &Notice, style: Style) -> String {
    match style {
        Style::Lines => notice.line(),
        Style::Json => serde_json::to_string(notice)
            .unwrap_or_else(|e| format!("{{\"kind\":\"error\",\"error\":{:?}}}", e.to_string())),
    }
}

/// Folds events as they come and prints the notices until the feed closes; returns the model.
/// With `pace`, each event taken is reported to the hub, which waits for a view that falls
/// behind (a stdout nobody reads) instead of queueing without bound.
pub async fn run(feed: UnboundedReceiver<Event>, style: Style, pace: Option<ViewPace>) -> Model {
    run_to(feed, style, pace, &mut std::io::stdout()).await
}

/// [`run`], writing the notices to `out` (a file, stderr) instead of stdout.
pub async fn run_to(
    mut feed: UnboundedReceiver<Event>,
    style: Style,
    pace: Option<ViewPace>,
    out: &mut (dyn Write + Send),
) -> Model {
    // Each fact is printed as it happens: the model holds only what is still open.
    let mut model = Model::with_retention(Retention::none());
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        let notices = tokio::select! {
            event = feed.recv() => match event {
                Some(event) => {
                    if let Some(pace) = &pace {
                        pace.release(&event);
                    }
                    model.apply(&event)
                }
                None => break,
            },
            _ = tick.tick() => model.advance(Utc::now()),
        };
        if notices.is_empty() {
            continue;
        }
        for notice in &notices {
            if writeln!(out, "{}", format(notice, style)).is_err() {
                return model;
            }
        }
        let _ = out.flush();
    }
    model
}
