//! Reads a recording back, with exact errors for bad files: all at once ([`read_file`]), or one
//! event at a time without holding the file in memory ([`Events`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::line::{Context, DecodeError, Decoder};
use super::{FORMAT_NAME, Header, MAX_LINE_BYTES};
use crate::event::{Event, FORMAT_VERSION};

/// One indexed place: the position of an event's line and what the lines after it may refer to
/// (the previous time and heads, SSE data not yet referred to), so reading can start there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IndexPoint {
    /// Where the event's line starts.
    pub at: Position,
    /// What the following lines may refer to.
    pub context: Context,
}

/// A line buffer grown past this by one long line is given back rather than kept for the next.
const KEPT_LINE_CAPACITY: usize = 1 << 20;

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
    collect(Events::open(path)?)
}

/// Reads a recording from any source; `path` names it in errors and warnings.
pub fn read_from(source: impl std::io::Read, path: &Path) -> Result<Recording, ReadError> {
    collect(Events::new(BufReader::new(source), path)?)
}

fn collect<R: BufRead>(mut events: Events<R>) -> Result<Recording, ReadError> {
    let list = events.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok(Recording {
        header: events.header.clone(),
        events: list,
        warnings: events.warnings,
    })
}

/// Where reading stands in a file: the next line's byte offset and number, and how many events
/// came before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    /// Byte offset of the next line.
    pub offset: u64,
    /// Lines before it (the header included).
    pub lines: usize,
    /// Events before it: the sequence number of the next event, from 0.
    pub seq: u64,
}

/// The events of a recording, read one line at a time: memory holds one line, not the file.
/// Yields `Err` once for a bad line, then ends; a truncated last line ends it with a warning.
#[derive(Debug)]
pub struct Events<R> {
    source: R,
    path: PathBuf,
    header: Header,
    decoder: Decoder,
    position: Position,
    line: Vec<u8>,
    warnings: Vec<String>,
    done: bool,
}

impl Events<BufReader<File>> {
    /// Opens a file and reads its header.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let file = File::open(path).map_err(|source| io_error(path, source))?;
        Self::new(BufReader::with_capacity(256 * 1024, file), path)
    }

    /// Opens a file at an indexed point (from [`Events::point`] or [`super::index_file`] on the
    /// same file): the next event read is the one at `point`, read as it is from the top.
    pub fn open_at(path: &Path, point: &IndexPoint) -> Result<Self, ReadError> {
        let header = read_header(path)?;
        let mut file = File::open(path).map_err(|source| io_error(path, source))?;
        file.seek(SeekFrom::Start(point.at.offset))
            .map_err(|source| io_error(path, source))?;
        let source = BufReader::with_capacity(256 * 1024, file);
        Ok(Self::resume(
            source,
            path,
            header,
            point.at,
            point.context.clone(),
        ))
    }
}

impl<R: BufRead> Events<R> {
    /// Reads the header from `source`; `path` names it in errors and warnings.
    pub fn new(mut source: R, path: &Path) -> Result<Self, ReadError> {
        let mut line = Vec::new();
        let read = match read_line(&mut source, &mut line).map_err(|e| io_error(path, e))? {
            LineRead::Read(read) => read,
            LineRead::TooLong => {
                return Err(ReadError::Line {
                    path: path.to_path_buf(),
                    line: 1,
                    reason: too_long(),
                });
            }
        };
        let header = parse_header(trim_newline(&line), read == 0, path)?;
        let decoder = Decoder::new(header.version);
        Ok(Self {
            source,
            path: path.to_path_buf(),
            header,
            decoder,
            position: Position {
                offset: read as u64,
                lines: 1,
                seq: 0,
            },
            line,
            warnings: Vec::new(),
            done: false,
        })
    }

    /// Reads on from an indexed point of the recording whose header is `header` (`source`
    /// must stand at `point`'s offset, as [`Events::open_at`] puts it): for a reader of bytes
    /// that are not a whole file (the part of a growing recording written so far).
    pub fn continue_at(source: R, path: &Path, header: Header, point: &IndexPoint) -> Self {
        Self::resume(source, path, header, point.at, point.context.clone())
    }

    /// Continues a file from a saved position (`source` must stand at `at.offset`), with the
    /// context saved there (see [`super::index`]).
    pub(crate) fn resume(
        source: R,
        path: &Path,
        header: Header,
        at: Position,
        context: Context,
    ) -> Self {
        let decoder = Decoder::resume(header.version, context);
        Self {
            source,
            path: path.to_path_buf(),
            header,
            decoder,
            position: at,
            line: Vec::new(),
            warnings: Vec::new(),
            done: false,
        }
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Warnings so far (a truncated last line).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where the next event's line starts.
    pub fn position(&self) -> Position {
        self.position
    }

    /// What the next line may refer to.
    pub(crate) fn context(&self) -> &Context {
        self.decoder.context()
    }

    /// Where the next event starts, with what its line and the following ones may refer to: a
    /// place [`Events::open_at`] can resume reading from.
    pub fn point(&self) -> IndexPoint {
        IndexPoint {
            at: self.position,
            context: self.decoder.context().clone(),
        }
    }

    fn line_error(&self, reason: String) -> ReadError {
        ReadError::Line {
            path: self.path.clone(),
            line: self.position.lines,
            reason,
        }
    }

    /// Whether nothing follows the line just read.
    fn at_end(&mut self, had_newline: bool) -> bool {
        !had_newline || self.source.fill_buf().is_ok_and(|rest| rest.is_empty())
    }
}

impl<R: BufRead> Iterator for Events<R> {
    type Item = Result<Event, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if self.line.capacity() > KEPT_LINE_CAPACITY {
                self.line = Vec::new();
            }
            self.line.clear();
            let read = match read_line(&mut self.source, &mut self.line) {
                Ok(LineRead::Read(0)) => break,
                Ok(LineRead::Read(read)) => read,
                Ok(LineRead::TooLong) => {
                    self.done = true;
                    self.line = Vec::new();
                    self.position.lines += 1;
                    return Some(Err(self.line_error(too_long())));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(io_error(&self.path, e)));
                }
            };
            self.position.offset += read as u64;
            self.position.lines += 1;
            let had_newline = self.line.ends_with(b"\n");
            let text = trim_newline(&self.line);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let error = match self.decoder.decode(text) {
                Ok(event) => {
                    self.position.seq += 1;
                    return Some(Ok(event));
                }
                Err(error) => error,
            };
            self.done = true;
            let reason = match error {
                DecodeError::Json(e) if e.is_eof() && self.at_end(had_newline) => {
                    self.warnings.push(format!(
                        "{}:{}: the last line is truncated (the recording was cut off); ignored",
                        self.path.display(),
                        self.position.lines
                    ));
                    return None;
                }
                DecodeError::Json(e) if e.is_syntax() || e.is_eof() => {
                    format!("not JSON Lines: {}", json_reason(&e))
                }
                DecodeError::Json(_) if is_header(trim_newline(&self.line)) => {
                    "a second recording header: concatenated recordings are not supported \
                     (record several sessions through one proxy run instead)"
                        .into()
                }
                DecodeError::Json(e) => format!("bad event: {}", json_reason(&e)),
                DecodeError::Dangling(stream) => format!(
                    "bad event: refers to the data of an SSE event on stream {stream}, \
                     and there is none before it"
                ),
                DecodeError::ReferenceInV1 => {
                    "bad event: a reference to an earlier line needs format version 2".into()
                }
                DecodeError::NoSuchHeader(index) => {
                    format!("bad event: header {index} of the previous head does not exist")
                }
                DecodeError::NoTimeBase => {
                    "bad event: a relative time (`t` a number) before any absolute one".into()
                }
            };
            return Some(Err(self.line_error(reason)));
        }
        self.done = true;
        None
    }
}

/// What reading one line gave.
enum LineRead {
    /// A line of this many bytes, its newline included (0: the end of the file).
    Read(usize),
    /// A line longer than [`MAX_LINE_BYTES`]: only its first bytes were read, and nothing of it
    /// is decoded.
    TooLong,
}

/// Reads one line into `line`, holding at most [`MAX_LINE_BYTES`] of it (and its newline).
fn read_line(source: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<LineRead> {
    use std::io::Read as _;
    let limit = MAX_LINE_BYTES as u64 + 1;
    let mut bounded = (&mut *source).take(limit);
    let mut read = bounded
        .by_ref()
        .take(KEPT_LINE_CAPACITY as u64)
        .read_until(b'\n', line)?;
    if read == KEPT_LINE_CAPACITY && !line.ends_with(b"\n") {
        // A long line: room for all it may hold, taken at once, so that the line is never
        // copied as it grows (room not written to costs no memory).
        line.reserve_exact((limit as usize).saturating_sub(line.len()));
        read += bounded.read_until(b'\n', line)?;
    }
    if read as u64 == limit && !line.ends_with(b"\n") {
        return Ok(LineRead::TooLong);
    }
    Ok(LineRead::Read(read))
}

/// Why a line past [`MAX_LINE_BYTES`] is not read.
fn too_long() -> String {
    format!(
        "a line longer than {} MiB, the most a recording line may hold (mcpscope never \
         writes a longer one): not read",
        MAX_LINE_BYTES >> 20
    )
}

fn io_error(path: &Path, source: std::io::Error) -> ReadError {
    ReadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// Reads and checks the header line (the 1st).
fn parse_header(line: &[u8], empty: bool, path: &Path) -> Result<Header, ReadError> {
    let line_err = |reason: String| ReadError::Line {
        path: path.to_path_buf(),
        line: 1,
        reason,
    };
    if empty {
        return Err(line_err("empty file: not an mcpscope recording".into()));
    }
    let value: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| line_err(format!("not JSON Lines: {}", json_reason(&e))))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
        return Err(line_err(format!(
            "not an mcpscope recording (no \"format\": \"{FORMAT_NAME}\" header)"
        )));
    }
    let header: Header = serde_json::from_value(value)
        .map_err(|e| line_err(format!("bad header: {}", json_reason(&e))))?;
    if !(1..=FORMAT_VERSION).contains(&header.version) {
        return Err(line_err(format!(
            "unknown format version {} (this mcpscope reads versions 1 to {FORMAT_VERSION})",
            header.version
        )));
    }
    Ok(header)
}

/// Reads only the header of a file.
pub(crate) fn read_header(path: &Path) -> Result<Header, ReadError> {
    Events::open(path).map(|events| events.header)
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
