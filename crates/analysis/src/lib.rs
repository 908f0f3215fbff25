//! mcpscope's analysis of a recording folded by the engine's model: which calls went wrong
//! ([`check`]: rules and findings), what a server changed between two recordings ([`diff`]),
//! latency by tool and method ([`latency`]), and the words a report uses for a call
//! ([`describe`]). No output formats: those are `mcpscope-export`'s.

pub mod check;
pub mod describe;
pub mod diff;
pub mod latency;

use std::io::Write;
use std::path::Path;

use mcpscope_engine::event::Event;
use mcpscope_engine::model::Model;
use mcpscope_engine::record;

/// Why a check or an export could not run.
#[derive(Debug)]
pub enum Error {
    /// Bad arguments or an unreadable or corrupt recording: reported in one line, exit code 2.
    Usage(String),
    /// The output could not be written.
    Io(std::io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(text) => f.write_str(text),
            Error::Io(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// A recording read and folded: its events and the model at its end (the model's clock moved
/// with each event, so resumption windows closed as they did live).
#[derive(Debug, Clone)]
pub struct Folded {
    /// The events, in order.
    pub events: Vec<Event>,
    /// The model after every event.
    pub model: Model,
}

impl Folded {
    /// Folds events already in memory, holding the whole history (checks and exports look at
    /// every call, however old).
    pub fn from_events(events: Vec<Event>) -> Self {
        let mut model = Model::with_retention(mcpscope_engine::model::Retention::unbounded());
        for event in &events {
            model.apply(event);
        }
        Self { events, model }
    }
}

/// Reads and folds a recording; an unreadable or corrupt file is a usage error naming
/// `file:line`. Reader warnings (a truncated last line) go to `warn`.
pub fn load(path: &Path, warn: &mut dyn Write) -> Result<Folded, Error> {
    let recording = record::read_file(path).map_err(|e| Error::Usage(e.to_string()))?;
    for warning in &recording.warnings {
        writeln!(warn, "mcpscope: warning: {warning}")?;
    }
    Ok(Folded::from_events(recording.events))
}
