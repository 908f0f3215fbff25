//! Rewrites a recording of any readable version in the current one.

use std::path::Path;

use super::reader::{Events, ReadError};
use super::writer::{Create, Recorder};

/// What a conversion did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The source's format version.
    pub from_version: u32,
    /// Events written.
    pub events: u64,
    /// The source's size in bytes.
    pub bytes_in: u64,
    /// The new file's size in bytes.
    pub bytes_out: u64,
    /// Warnings from reading the source (a truncated last line, dropped).
    pub warnings: Vec<String>,
}

/// Why a conversion failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The source could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The new file could not be written.
    #[error("{path}: {source}")]
    Write {
        /// The new file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Reads `input` event by event and writes it to `output` in the current format (created like
/// a live recording: mode 0600, never through a symbolic link; an existing file only with
/// [`Create::Replace`]). A bad line stops it with that line's error; the partial output stays.
pub fn convert(input: &Path, output: &Path, how: Create) -> Result<Converted, ConvertError> {
    let write_err = |source| ConvertError::Write {
        path: output.to_path_buf(),
        source,
    };
    let mut events = Events::open(input)?;
    let from_version = events.header().version;
    let mut recorder = Recorder::create_like(output, how, events.header()).map_err(write_err)?;
    for event in events.by_ref() {
        recorder.write(&event?).map_err(write_err)?;
    }
    recorder.flush().map_err(write_err)?;
    let size = |path: &Path| std::fs::metadata(path).map(|m| m.len());
    Ok(Converted {
        from_version,
        events: recorder.events(),
        bytes_in: size(input).map_err(|source| {
            ConvertError::Read(ReadError::Io {
                path: input.to_path_buf(),
                source,
            })
        })?,
        bytes_out: size(output).map_err(write_err)?,
        warnings: events.warnings().to_vec(),
    })
}
