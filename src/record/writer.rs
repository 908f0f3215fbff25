//! Writes a recording line by line, each line flushed as it is written, so a crash leaves a
//! valid file up to the last whole line.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};

use super::{FORMAT_NAME, Header};
use crate::event::{Event, FORMAT_VERSION};

/// An open recording.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
    events: u64,
}

impl Recorder {
    /// Creates (mode 0600, parents as needed) and writes the header line.
    pub fn create(path: &Path, redacted: bool) -> io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(path)?;
        let mut recorder = Self {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            events: 0,
        };
        let header = Header {
            format: FORMAT_NAME.to_string(),
            version: FORMAT_VERSION,
            created: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            redacted,
        };
        recorder.write_line(&serde_json::to_string(&header).map_err(io::Error::other)?)?;
        Ok(recorder)
    }

    /// The default path: `recordings/mcpscope-YYYYmmdd-HHMMSS.jsonl`.
    pub fn default_path() -> PathBuf {
        PathBuf::from("recordings").join(format!(
            "mcpscope-{}.jsonl",
            Utc::now().format("%Y%m%d-%H%M%S")
        ))
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Appends one event and flushes it.
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        let line = serde_json::to_string(event).map_err(io::Error::other)?;
        self.write_line(&line)?;
        self.events += 1;
        Ok(())
    }

    fn write_line(&mut self, line: &str) -> io::Result<()> {
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}
