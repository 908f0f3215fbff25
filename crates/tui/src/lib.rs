//! The terminal UI: pending calls, their owning streams and the moment each stream died, live
//! or in a replay with a time cursor.
//!
//! Each frame, the loop in `run` lays the view out ([`App::layout`]), then draws it with the pure
//! `view::render(frame, &app, model, now)`; keys become actions ([`App::update`]) and effects
//! (`run::perform`). Everything but the terminal itself runs on fakes in tests (`TestBackend`,
//! synthetic events).

pub use mcpscope_session::{hold_stderr, say, stderr_held};

pub(crate) mod action;
pub(crate) mod app;
pub(crate) mod curl;
pub(crate) mod edit;
pub(crate) mod filter;
pub(crate) mod geometry;
pub mod grid;
pub(crate) mod grouping;
pub mod headless;
pub(crate) mod keys;
pub(crate) mod layout;
pub(crate) mod node;
pub(crate) mod pane;
pub(crate) mod rows;
pub mod run;
pub(crate) mod save;
pub(crate) mod schemas;
#[cfg(any(test, feature = "test-util"))]
pub mod screen;
pub(crate) mod term;
pub mod theme;
pub mod view;

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{FixedOffset, Offset};
use tokio::sync::mpsc::UnboundedReceiver;

pub use app::{App, Effect, Pane, ReplayStatus, Selected};
pub use grouping::server_node;
pub use keys::keys_markdown;
pub use node::Node;
#[cfg(any(test, feature = "test-util"))]
pub use screen::render_to_buffer;
pub use theme::{Theme, ThemeError};

use mcpscope_engine::event::Event;
use mcpscope_engine::fault::FaultControl;
use mcpscope_engine::model::Retention;
use mcpscope_session::publish::wire::SessionInfo;
use mcpscope_timeline::{FileCursor, indexer, savedindex};

/// Where the session runs, for the status bar.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Info {
    /// The proxy's listen address.
    pub listen: Option<String>,
    /// The upstream URL.
    pub upstream: Option<String>,
    /// The recording being written or replayed.
    pub recording: Option<PathBuf>,
    /// `--theme`: a built-in name or a path to a TOML file.
    pub theme: Option<String>,
    /// Replay: the `--speed` to play at when playing starts (1×, 10× or as fast as possible).
    pub speed: Option<f64>,
    /// Live: a line for the status bar, when there is something to say (the OTLP exporter's
    /// state, the `--pass-host` warning).
    pub telemetry: Option<StatusText>,
    /// What the view's model holds in memory (`--keep`); older detail is read back from the
    /// recording when asked for.
    pub retention: Retention,
    /// Live: told of each event the view takes from its feed (the proxy paces itself by it).
    pub taken: Option<mcpscope_session::pace::Pace>,
    /// A forward proxy's local CA certificate, which a request copied as `curl` trusts.
    pub ca_cert: Option<PathBuf>,
}

impl Info {
    /// A live view of the session `session` describes (its own, or one attached to), paced by
    /// `pace`; theme, status line and CA certificate are left for the caller.
    pub fn live(session: &SessionInfo, pace: Option<mcpscope_session::pace::Pace>) -> Self {
        Self {
            listen: session.listen.clone(),
            upstream: session
                .upstream
                .clone()
                .or_else(|| session.command.as_ref().map(|c| c.join(" "))),
            recording: session.recording.clone(),
            retention: Retention::window(session.keep_calls),
            taken: pace,
            ..Self::default()
        }
    }
}

/// A status bar item read each frame (`None`: nothing to show).
#[derive(Clone)]
pub struct StatusText(pub Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl std::fmt::Debug for StatusText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatusText")
    }
}

impl PartialEq for StatusText {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn local_offset() -> FixedOffset {
    chrono::Local::now().offset().fix()
}

fn app_for(info: Info) -> anyhow::Result<App> {
    let theme = match &info.theme {
        Some(name) => Theme::load(name)?,
        None => Theme::dark(),
    };
    Ok(App::new(info, theme, local_offset()))
}

/// Live: events arrive on `feed`; the TUI folds them into its own Model each frame.
pub async fn run_live(
    feed: UnboundedReceiver<Event>,
    info: Info,
    faults: Option<Arc<dyn FaultControl>>,
) -> anyhow::Result<()> {
    let retention = info.retention;
    let taken = info.taken.clone();
    let mut app = app_for(info)?;
    app.faults = faults;
    run::run(app, run::LiveSource::new(feed, retention).telling(taken)).await
}

/// Replay viewer: the whole recording, with a time cursor.
pub async fn run_replay(events: Vec<Event>, info: Info) -> anyhow::Result<()> {
    let speed = mcpscope_timeline::Speed::nearest(info.speed.unwrap_or(1.0));
    let retention = info.retention;
    let app = app_for(info)?;
    let source = run::ReplaySource::with_speed(events, speed).with_retention(retention);
    run::run(app, source).await
}

/// Replay viewer over a recording file: the first screen after reading its first event, the
/// rest read as needed while an index pass runs in the background (see [`FileCursor`]).
pub async fn run_replay_file(path: &std::path::Path, info: Info) -> anyhow::Result<()> {
    run_replay_file_cached(path, info, None).await
}

/// [`run_replay_file`] with the recording's index saved in `cache` (read if it fits, written
/// after the pass).
pub async fn run_replay_file_cached(
    path: &std::path::Path,
    info: Info,
    cache: Option<savedindex::IndexCache>,
) -> anyhow::Result<()> {
    run_replay_file_at(path, info, cache, None).await
}

/// [`run_replay_file_cached`] opened at the moment `at` (once the index reaches it), paused.
pub async fn run_replay_file_at(
    path: &std::path::Path,
    info: Info,
    cache: Option<savedindex::IndexCache>,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> anyhow::Result<()> {
    let speed = mcpscope_timeline::Speed::nearest(info.speed.unwrap_or(1.0));
    let config = indexer::IndexConfig::default();
    let cursor = FileCursor::open_cached(path, info.retention, config, cache)?;
    let app = app_for(info)?;
    let mut source = run::ReplaySource::from_file(cursor, speed);
    if let Some(at) = at {
        source.seek(at);
    }
    run::run(app, source).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use mcpscope_engine::fixtures;
    use mcpscope_engine::model::Model;

    /// Not a timing assertion: prints the frame time for a look with `--nocapture`.
    #[test]
    fn a_fresh_view_renders_100k_calls() {
        let (model, _) = Model::from_events(&fixtures::many_calls(100_000));
        for _ in 0..3 {
            let start = std::time::Instant::now();
            let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
            let buf = render_to_buffer(&mut app, &model, fixtures::at(200_000), 160, 48);
            eprintln!("100k-call frame: {:?}", start.elapsed());
            assert_eq!(buf.area.width, 160);
        }
    }
}
