//! mcpscope's exports: a recording folded by the engine's model, then checked for calls that
//! went wrong ([`check`], with text, JSON and JUnit reports) or written in a format other tools
//! read: HAR 1.2 ([`har`]), OTLP/JSON traces ([`otlp`]), a Mermaid sequence diagram
//! ([`mermaid`]) or a Markdown calls table ([`markdown`]). Pure functions over events and the
//! model; the only I/O is reading recordings and writing the requested output.

pub mod check;
pub mod check_files;
pub(crate) mod describe;
pub mod diff;
pub(crate) mod har;
pub mod headless;
pub mod junit;
pub(crate) mod latency;
pub mod markdown;
pub(crate) mod mermaid;
pub mod otlp;
pub(crate) mod sarif;

use std::io::Write;
use std::path::Path;

use mcpscope_engine::event::Event;
use mcpscope_engine::model::Model;
use mcpscope_engine::record;

/// The mcpscope version written into exports (HAR `log.creator`, OTLP scope).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

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

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// HAR 1.2 (HTTP Archive): one entry per HTTP exchange.
    Har,
    /// OTLP/JSON `ExportTraceServiceRequest`: a trace per session, a span per call.
    Otlp,
    /// A Mermaid `sequenceDiagram`.
    Mermaid,
    /// A Markdown calls table.
    Markdown,
}

impl Format {
    /// Every format's name, as `--format` takes it.
    pub const NAMES: [&'static str; 4] = ["har", "otlp", "mermaid", "markdown"];

    /// The format named `name`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        match name {
            "har" => Ok(Self::Har),
            "otlp" => Ok(Self::Otlp),
            "mermaid" => Ok(Self::Mermaid),
            "markdown" | "md" => Ok(Self::Markdown),
            other => Err(Error::Usage(format!(
                "unknown export format {other:?} (valid: {})",
                Self::NAMES.join(", ")
            ))),
        }
    }
}

/// Writes `folded` in `format` to `out`. `call` is a call's number as the calls table shows it
/// (1-based); only Mermaid narrows to one call, the other formats reject it.
pub fn export(
    folded: &Folded,
    format: Format,
    call: Option<usize>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    if call.is_some() && format != Format::Mermaid {
        return Err(Error::Usage(
            "--call applies to --format mermaid only".to_string(),
        ));
    }
    match format {
        Format::Har => write_json(out, &har::build(folded)),
        Format::Otlp => write_json(out, &otlp::build(folded)),
        Format::Mermaid => {
            let diagram = mermaid::build(folded, call)?;
            out.write_all(diagram.as_bytes())?;
            Ok(())
        }
        Format::Markdown => {
            out.write_all(markdown::build(&folded.model).as_bytes())?;
            Ok(())
        }
    }
}

fn write_json(out: &mut dyn Write, value: &serde_json::Value) -> Result<(), Error> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}
