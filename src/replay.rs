//! Replays: a recording read back into the same events, folded by the same model (viewer or
//! headless, with a time cursor), or served as a mock upstream that re-enacts the server side.

use std::path::Path;

use anyhow::Context;
use chrono::{DateTime, Utc};

pub use mcpscope_proxy::mock::{ServeHandle, serve};

use crate::app::{UsageError, check_listen, shutdown_signal};
use crate::cli::ReplayArgs;
use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Notice};
use mcpscope_engine::record::{self, Recording};
use mcpscope_tui::headless::{self, View};

/// Reads a recording, printing its warnings (a truncated last line) to stderr.
pub fn load(path: &Path) -> anyhow::Result<Recording> {
    let recording = record::read_file(path)?;
    for warning in &recording.warnings {
        crate::say!("mcpscope: warning: {warning}");
    }
    Ok(recording)
}

/// The model at a time cursor: every event up to and including `t` folded, and the model's
/// clock advanced to `t`.
pub fn model_at(events: &[Event], t: DateTime<Utc>) -> Model {
    let mut model = Model::new();
    for event in events.iter().take_while(|e| e.t <= t) {
        model.apply(event);
    }
    model.advance(t);
    model
}

/// Folds a whole recording (the model's clock moves with each event's time, so resumption
/// windows close as they did live); returns the model and every notice, in order.
pub fn fold(events: &[Event]) -> (Model, Vec<Notice>) {
    Model::from_events(events)
}

/// `mcpscope replay FILE`: the viewer on a terminal, headless lines or JSON otherwise, or with
/// `--serve` the mock upstream until Ctrl-C.
pub async fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    if let Some(speed) = args.speed.filter(|s| !(*s >= 0.0 && s.is_finite())) {
        anyhow::bail!(UsageError(format!(
            "--speed {speed} must be a number ≥ 0 (0 = as fast as possible)"
        )));
    }
    if args.serve {
        let recording = load(&args.file)?;
        check_listen(args.listen, false)?;
        let exchanges = mcpscope_proxy::mock::matching::exchanges(&recording.events)
            .iter()
            .filter(|e| e.http_method != "POST" || e.has_request())
            .count();
        let speed = args.speed.unwrap_or(1.0);
        let handle = serve(recording, args.listen.0, speed).await?;
        crate::say!(
            "mcpscope replay: serving {} as a mock upstream on {} ({exchanges} recorded exchanges, speed {})",
            args.file.display(),
            handle.url(),
            speed
        );
        shutdown_signal().await;
        handle.shutdown();
        let unused = handle.unused();
        if !unused.is_empty() {
            crate::say!(
                "mcpscope replay: {} recorded exchange(s) never requested: {}",
                unused.len(),
                unused.join(", ")
            );
        }
        return Ok(());
    }
    if args.at.is_some() && (args.headless || args.json) {
        anyhow::bail!(UsageError(
            "--at opens the viewer at a moment: not with --headless or --json".into()
        ));
    }
    let style = match View::chosen(args.headless, args.json) {
        View::Headless(style) => style,
        View::Tui => {
            let info = mcpscope_tui::Info {
                listen: None,
                upstream: None,
                recording: Some(args.file.clone()),
                theme: args.theme.clone(),
                speed: args.speed,
                telemetry: None,
                retention: mcpscope_engine::model::Retention::window(args.keep),
                taken: None,
                ca_cert: crate::forward::known_ca_cert(),
            };
            // The viewer reads the file as it needs it (first screen at once, index in the
            // background): a recording of any length opens without being loaded.
            let cache = (!args.no_index_cache)
                .then(mcpscope_timeline::savedindex::IndexCache::from_env)
                .flatten();
            return mcpscope_tui::run_replay_file_at(&args.file, info, cache, args.at)
                .await
                .with_context(|| format!("replaying {}", args.file.display()));
        }
    };
    let recording = load(&args.file)?;
    headless::print_replay(&recording.events, style, args.speed.unwrap_or(0.0)).await?;
    Ok(())
}
