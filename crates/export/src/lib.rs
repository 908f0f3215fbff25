//! mcpscope's exports: a recording folded by the engine's model (read by
//! `mcpscope_analysis::load`), written in a format other tools read: HAR 1.2 (`har`),
//! OTLP/JSON traces ([`otlp`]), a Mermaid sequence diagram (`mermaid`) or a Markdown calls
//! table ([`markdown`]); the check command's reports ([`check_files`]: text, JSON, JUnit
//! [`junit`], SARIF); the headless view's lines ([`headless`]). Pure functions over events and
//! the model; the only I/O is reading recordings and writing the requested output.

pub mod check_files;
pub(crate) mod har;
pub mod headless;
pub mod junit;
pub mod markdown;
pub(crate) mod mermaid;
pub mod otlp;
pub(crate) mod sarif;

use std::io::Write;

pub use mcpscope_analysis::{Error, Folded, load};

/// The mcpscope version written into exports (HAR `log.creator`, OTLP scope).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

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
