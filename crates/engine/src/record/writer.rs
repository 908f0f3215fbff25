//! Writes a recording line by line. Lines are whole when they reach the file, and the hub
//! flushes as soon as no further event is waiting, so an idle recording is always complete on
//! disk and a crash leaves a valid file up to the last whole line.

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
    line: Vec<u8>,
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
            out: BufWriter::with_capacity(256 * 1024, file),
            line: Vec::with_capacity(1024),
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

    /// Appends one event as one whole line (buffered: call [`Recorder::flush`] to write it out).
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event).map_err(io::Error::other)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.events += 1;
        Ok(())
    }

    /// Writes out every line appended so far.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn write_line(&mut self, line: &str) -> io::Result<()> {
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}
