//! Where a session records: the file asked for, a new file in the default directory, or
//! nowhere; with the live index kept beside it as it is written.

use std::path::Path;

use anyhow::Context;

use mcpscope_engine::model::Retention;
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_timeline::liveindex::LiveIndex;

/// What happens when the default place for a recording (a new file in `recordings/`) cannot be
/// written. A file asked for by name that cannot be created always stops the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultPlace {
    /// The run stops with the error (the proxy: the user is there to read it).
    Required,
    /// The run goes on unrecorded, with a warning on stderr (the stdio shim, which a host starts
    /// as its server: refusing to start would break the host's server).
    BestEffort,
}

/// The recording a run asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted<'a> {
    /// None (`--no-record`).
    Off,
    /// This file (`--record PATH`), refused if it exists unless `overwrite`.
    File {
        /// Where.
        path: &'a Path,
        /// Replace an existing file (never through a link).
        overwrite: bool,
    },
    /// A new uniquely named file in `recordings/`, its failure handled as the place says.
    Default(DefaultPlace),
}

/// Creates the recording `wanted` names, with its live index; `redacted` is written in its
/// header (whether secrets were hidden).
pub fn create(wanted: Wanted<'_>, redacted: bool) -> anyhow::Result<Option<Recorder>> {
    let default = match wanted {
        Wanted::Off => return Ok(None),
        Wanted::File { path, overwrite } => {
            let how = if overwrite {
                Create::Replace
            } else {
                Create::New
            };
            let recorder = Recorder::create(path, how, redacted)
                .with_context(|| format!("cannot create the recording {}", path.display()))?;
            return Ok(Some(with_live_index(recorder)));
        }
        Wanted::Default(default) => default,
    };
    let dir = Recorder::default_dir();
    match Recorder::create_in(&dir, redacted) {
        Ok(recorder) => Ok(Some(with_live_index(recorder))),
        Err(e) if default == DefaultPlace::BestEffort => {
            crate::say!(
                "mcpscope: WARNING: cannot create a recording in {}: {e}; running unrecorded",
                dir.display()
            );
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| format!("cannot create a recording in {}", dir.display())),
    }
}

/// The recording with its live index: a sidecar index beside it, kept up to date as it is
/// written, folded as `replay` folds by default, so that its first opening skips the pass.
fn with_live_index(mut recorder: Recorder) -> Recorder {
    let retention = Retention::window(Retention::DEFAULT_KEEP_CALLS);
    let index = LiveIndex::start(recorder.path(), retention);
    recorder.follow(Box::new(index));
    recorder
}
