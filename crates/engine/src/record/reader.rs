//! Reads a recording back, with exact errors for bad files.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::{FORMAT_NAME, Header};
use crate::event::{Event, FORMAT_VERSION};

/// Why a recording cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not what it should be.
    #[error("{path}:{line}: {reason}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// A recording read into memory.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Its header.
    pub header: Header,
    /// Its events, in order.
    pub events: Vec<Event>,
    /// Warnings (a truncated last line, from a crash while recording).
    pub warnings: Vec<String>,
}

/// Reads a recording; a truncated last line is dropped with a warning.
pub fn read_file(path: &Path) -> Result<Recording, ReadError> {
    let io_err = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    read_from(file, path)
}

/// Reads a recording from any source; `path` names it in errors and warnings.
pub fn read_from(source: impl std::io::Read, path: &Path) -> Result<Recording, ReadError> {
    let io_err = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let line_err = |line: usize, reason: String| ReadError::Line {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut lines = BufReader::new(source).split(b'\n').enumerate().peekable();
    let header: Header = match lines.next() {
        None => return Err(line_err(1, "empty file: not an mcpscope recording".into())),
        Some((_, line)) => {
            let line = line.map_err(io_err)?;
            let value: serde_json::Value = serde_json::from_slice(&line)
                .map_err(|e| line_err(1, format!("not JSON Lines: {}", json_reason(&e))))?;
            if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
                return Err(line_err(
                    1,
                    format!("not an mcpscope recording (no \"format\": \"{FORMAT_NAME}\" header)"),
                ));
            }
            let header: Header = serde_json::from_value(value)
                .map_err(|e| line_err(1, format!("bad header: {}", json_reason(&e))))?;
            if header.version != FORMAT_VERSION {
                return Err(line_err(
                    1,
                    format!(
                        "unknown format version {} (this mcpscope reads version {FORMAT_VERSION})",
                        header.version
                    ),
                ));
            }
            header
        }
    };
    let mut events = Vec::new();
    let mut warnings = Vec::new();
    while let Some((index, line)) = lines.next() {
        let line = line.map_err(io_err)?;
        let number = index + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Event>(&line) {
            Ok(event) => events.push(event),
            Err(e) if lines.peek().is_none() && e.is_eof() => {
                warnings.push(format!(
                    "{}:{number}: the last line is truncated (the recording was cut off); ignored",
                    path.display()
                ));
            }
            Err(e) if e.is_syntax() || e.is_eof() => {
                return Err(line_err(
                    number,
                    format!("not JSON Lines: {}", json_reason(&e)),
                ));
            }
            Err(_) if is_header(&line) => {
                return Err(line_err(
                    number,
                    "a second recording header: concatenated recordings are not supported \
                     (record several sessions through one proxy run instead)"
                        .into(),
                ));
            }
            Err(e) => return Err(line_err(number, format!("bad event: {}", json_reason(&e)))),
        }
    }
    Ok(Recording {
        header,
        events,
        warnings,
    })
}

/// A serde error without its "at line 1 column N" (every line is one JSON text): the column
/// is kept, the line number is the file's.
fn json_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(reason) if e.column() > 0 => format!("{reason} (column {})", e.column()),
        Some(reason) => reason.to_string(),
        None => text,
    }
}

/// Whether a line is a recording header.
fn is_header(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| {
            v.get("format")
                .and_then(|f| f.as_str())
                .map(|f| f == FORMAT_NAME)
        })
        .unwrap_or(false)
}
