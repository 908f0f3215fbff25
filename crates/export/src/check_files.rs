//! `mcpscope check` over files: each recording read and checked, then the reports written
//! (text or JSON lines to the output, JUnit XML and SARIF 2.1.0 to files).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, junit, sarif};
use mcpscope_analysis::check::{FileCheck, Rule};

/// What `mcpscope check` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The rules that fail a recording.
    pub rules: Vec<Rule>,
    /// Where to write JUnit XML, if anywhere.
    pub junit: Option<PathBuf>,
    /// One JSON object per file instead of text.
    pub json: bool,
    /// Where to write SARIF 2.1.0, if anywhere.
    pub sarif: Option<PathBuf>,
}

/// Checks every file, writes the reports to `out` (and the JUnit file); returns whether all
/// passed. Every file is read before anything is reported, so a corrupt one stops the run
/// with its `file:line` and no partial verdict.
pub fn run(
    paths: &[PathBuf],
    options: &Options,
    out: &mut dyn Write,
    warn: &mut dyn Write,
) -> Result<bool, Error> {
    if paths.is_empty() {
        return Err(Error::Usage("check needs at least one recording".into()));
    }
    let mut checks = Vec::new();
    for path in paths {
        let folded = crate::load(path, warn)?;
        checks.push(FileCheck::new(
            path.display().to_string(),
            folded,
            &options.rules,
        ));
    }
    for check in &checks {
        if options.json {
            serde_json::to_writer(&mut *out, &check.json()).map_err(std::io::Error::from)?;
            writeln!(out)?;
        } else {
            out.write_all(check.text().as_bytes())?;
        }
    }
    if let Some(path) = &options.junit {
        write_file(path, &junit::build(&checks))?;
    }
    if let Some(path) = &options.sarif {
        let mut text = serde_json::to_string_pretty(&sarif::build(&checks, &options.rules))
            .map_err(std::io::Error::from)?;
        text.push('\n');
        mcpscope_engine::record::write_private(path, &text)
            .map_err(|e| Error::Usage(format!("--sarif {}: {e}", path.display())))?;
    }
    Ok(checks.iter().all(FileCheck::passed))
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    mcpscope_engine::record::write_private(path, text)
        .map_err(|e| Error::Usage(format!("--junit {}: {e}", path.display())))
}
