//! Writes a recording line by line. Lines are whole when they reach the file, and the hub
//! flushes as soon as no further event is waiting, so an idle recording is always complete on
//! disk and a crash leaves a valid file up to the last whole line.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};

use super::line::Encoder;
use super::{FORMAT_NAME, Header};
use crate::event::{Event, FORMAT_VERSION};

/// An open recording.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
    line: Vec<u8>,
    encoder: Encoder,
    events: u64,
    /// Lives as long as the recording is written, and ends after its last line is out (declared
    /// after `out`, so dropped after it).
    follower: Option<Box<dyn Follower>>,
}

/// What follows a recording as it is written (its live index, which reads the file behind the
/// recorder): kept by the [`Recorder`] and dropped once the recorder has written its last line,
/// so that it can finish with the whole file on disk.
pub trait Follower: Send + std::fmt::Debug {}

/// How a recording file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// A new file; an existing file or a symbolic link at the path is refused.
    New,
    /// A new file, or an existing regular file replaced (`--overwrite`); a symbolic link is
    /// still refused, never followed.
    Replace,
}

impl Recorder {
    /// Creates the file (mode 0600, never through a symbolic link; missing directories are
    /// created 0700) and writes the header line.
    pub fn create(path: &Path, how: Create, redacted: bool) -> io::Result<Self> {
        let file = open_private(path, how)?;
        Self::start(path, file, redacted)
    }

    /// Creates a recording under `dir` with a name no other process will pick:
    /// `mcpscope-YYYYmmdd-HHMMSS-PID.jsonl` (with `-2`, `-3`, … if that exists).
    pub fn create_in(dir: &Path, redacted: bool) -> io::Result<Self> {
        let stem = format!(
            "mcpscope-{}-{}",
            Utc::now().format("%Y%m%d-%H%M%S"),
            std::process::id()
        );
        let mut attempt = 1;
        loop {
            let name = match attempt {
                1 => format!("{stem}.jsonl"),
                n => format!("{stem}-{n}.jsonl"),
            };
            let path = dir.join(name);
            match open_private(&path, Create::New) {
                Ok(file) => return Self::start(&path, file, redacted),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => {
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates the file like [`Recorder::create`], for the events of another recording: the
    /// header keeps `source`'s creation time and redaction flag.
    pub fn create_like(path: &Path, how: Create, source: &Header) -> io::Result<Self> {
        let file = open_private(path, how)?;
        Self::start_with(path, file, source.redacted, source.created.clone())
    }

    fn start(path: &Path, file: File, redacted: bool) -> io::Result<Self> {
        let created = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        Self::start_with(path, file, redacted, created)
    }

    fn start_with(path: &Path, file: File, redacted: bool, created: String) -> io::Result<Self> {
        let mut recorder = Self {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(256 * 1024, file),
            line: Vec::with_capacity(1024),
            encoder: Encoder::default(),
            events: 0,
            follower: None,
        };
        let header = Header {
            format: FORMAT_NAME.to_string(),
            version: FORMAT_VERSION,
            created,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            redacted,
        };
        recorder.write_line(&serde_json::to_string(&header).map_err(io::Error::other)?)?;
        Ok(recorder)
    }

    /// The default directory for recordings: `recordings/`.
    pub fn default_dir() -> PathBuf {
        PathBuf::from("recordings")
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps `follower` until the recording is closed: it is dropped after the last line is
    /// written out.
    pub fn follow(&mut self, follower: Box<dyn Follower>) {
        self.follower = Some(follower);
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Appends one event as one whole line (buffered: call [`Recorder::flush`] to write it out).
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        self.write_known(event, false)
    }

    /// [`Recorder::write`], told what its writer knows of `event`: a message exactly what its
    /// stream's last SSE data parses to, SSE data parsed as a JSON-RPC message
    /// ([`Encoder::encode_known`]).
    pub fn write_known(&mut self, event: &Event, known: bool) -> io::Result<()> {
        self.line.clear();
        self.encoder
            .encode_known(event, known, &mut self.line)
            .map_err(io::Error::other)?;
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

/// Writes a whole file (a report: `check --junit`, `matrix --junit/--markdown`) as
/// [`open_private`] creates it: replaced if it exists, never through a symbolic link, 0600.
pub fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write as _;
    let mut file = open_private(path, Create::Replace)?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// Opens a file for writing that only its owner can read: mode 0600 (also when an existing file
/// is replaced), never through a symbolic link; missing parent directories are created 0700.
pub fn open_private(path: &Path, how: Create) -> io::Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let mut dirs = std::fs::DirBuilder::new();
        dirs.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            dirs.mode(0o700);
        }
        dirs.create(parent)?;
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} is a symbolic link; refusing to write through it",
                path.display()
            ),
        ));
    }
    let mut options = OpenOptions::new();
    options.write(true);
    match how {
        Create::New => options.create_new(true),
        Create::Replace => options.create(true).truncate(true),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NOFOLLOW: a link planted between the check above and the open is refused too.
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => io::Error::new(
            e.kind(),
            format!("{} exists (add --overwrite to replace it)", path.display()),
        ),
        _ => e,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}
