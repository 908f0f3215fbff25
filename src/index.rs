//! `mcpscope index FILE…`: builds (or brings up to date) the saved index of recordings ahead of
//! time, so that the viewer opens them without its background pass.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpscope_engine::model::Retention;
use mcpscope_timeline::indexer::{IndexConfig, Indexer, SavedState};
use mcpscope_timeline::savedindex::IndexCache;

use crate::cli::IndexArgs;

/// Indexes every file and prints one line each; exit 1 if any could not be read or saved.
pub fn main(args: &IndexArgs) -> ExitCode {
    let Some(mut cache) = IndexCache::from_env() else {
        crate::say!("mcpscope index: no cache directory (set XDG_CACHE_HOME or HOME)");
        return ExitCode::FAILURE;
    };
    cache.save_from_bytes = 0;
    let retention = Retention::window(args.keep);
    let mut ok = true;
    for file in &args.files {
        let (line, good) = index_one(file, &cache, retention);
        ok &= good;
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return ExitCode::FAILURE;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One file: its line of output, and whether it went well.
fn index_one(file: &Path, cache: &IndexCache, retention: Retention) -> (String, bool) {
    let name = file.display();
    if let Err(e) = mcpscope_engine::record::Events::open(file) {
        return (format!("{name}: {e}"), false);
    }
    let started = Instant::now();
    let indexer =
        Indexer::start_cached(file, retention, IndexConfig::default(), Some(cache.clone()));
    let saved = loop {
        let saved = indexer.wait_saved(Duration::from_secs(3600));
        if saved != SavedState::Pending {
            break saved;
        }
    };
    let took = started.elapsed().as_secs_f64();
    let state = indexer.state();
    let events = state.events;
    // A bad line stops the pass there: the index covers only what came before it.
    let whole = state.error.is_none();
    let problem = state
        .error
        .as_ref()
        .map(|e| format!(" (read up to a bad line: {e})"))
        .unwrap_or_default();
    match saved {
        SavedState::Fresh(path) => (
            format!(
                "{name}: {events} events, {took:.2} s, up to date: {}{problem}",
                path.display()
            ),
            whole,
        ),
        SavedState::Written(path) => {
            let how = match state.loaded {
                Some(from) => format!("updated from event {from}"),
                None => "saved".to_string(),
            };
            (
                format!(
                    "{name}: {events} events, {took:.2} s, {how}: {}{problem}",
                    path.display()
                ),
                whole,
            )
        }
        SavedState::Off => (
            format!("{name}: {events} events, {took:.2} s, too short to need an index{problem}"),
            whole,
        ),
        SavedState::Unwritten(reason) => (
            format!("{name}: {events} events, {took:.2} s, index not saved: {reason}"),
            false,
        ),
        SavedState::Pending => (format!("{name}: still indexing"), false),
    }
}
