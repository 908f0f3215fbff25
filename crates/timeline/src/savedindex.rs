//! The saved index of a recording: what an [`crate::indexer::Indexer`] pass learnt (index points
//! and their times, stream deaths, a model checkpoint near the end and at most two more), kept
//! in a cache file so that opening the recording again skips the pass. The recording stays the
//! truth: a cache is used only while it matches the file (length, modification time, a hash of
//! its first and last 64 KiB, the format version and the retention policy of its models), and
//! a recording that has only grown since continues from it. Anything else about a cache (gone,
//! stale, corrupt, foreign, unwritable) only means the pass runs again.
//!
//! File layout (one JSON value a line): a [`Header`], then one `{"seq": N, "model": …}` line per
//! checkpoint, the one near the end first, then `{"check": "…"}`, the XXH3 64 of the lines
//! before it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoint;
use mcpscope_engine::model::{Model, Retention};
use mcpscope_engine::record::IndexPoint;

/// The version of the cache file's layout; a cache of another version is ignored.
pub const FORMAT_VERSION: u32 = 6;

/// What names a cache file as one.
const FORMAT: &str = "mcpscope-index";

/// Bytes hashed at each end of the recording.
const ENDS: u64 = 64 << 10;

/// Recordings shorter than this are not cached by the viewer (their pass takes milliseconds);
/// `mcpscope index` caches any.
pub const AUTO_SAVE_FROM: u64 = 8 << 20;

/// What the cache directory may hold; past it the files written longest ago go.
pub const CACHE_BUDGET: u64 = 1 << 30;

/// Checkpoints besides the one near the end, at most.
const MIDDLE_CHECKPOINTS: usize = 2;

/// Where saved indexes live, and from what size the viewer writes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexCache {
    /// The directory of cache files.
    pub dir: PathBuf,
    /// Recordings shorter than this are not saved after a pass (0: always saved).
    pub save_from_bytes: u64,
    /// Bytes of saved indexes kept in the directory: after a save, the files written longest
    /// ago are deleted past it (the new one always stays).
    pub keep_bytes: u64,
}

impl IndexCache {
    /// A cache in `dir`, saving recordings of any size.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            save_from_bytes: 0,
            keep_bytes: CACHE_BUDGET,
        }
    }

    /// The user's cache: `$XDG_CACHE_HOME/mcpscope/index` (an absolute `XDG_CACHE_HOME`), else
    /// `$HOME/.cache/mcpscope/index`; None when neither is set.
    pub fn from_env() -> Option<Self> {
        let dir = cache_dir(
            std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )?;
        Some(Self {
            dir,
            save_from_bytes: AUTO_SAVE_FROM,
            keep_bytes: CACHE_BUDGET,
        })
    }

    /// The cache file of `recording`: named by a hash of its canonical path. None when the
    /// recording cannot be found.
    pub fn file_for(&self, recording: &Path) -> Option<PathBuf> {
        let canonical = std::fs::canonicalize(recording).ok()?;
        Some(self.dir.join(file_name(&canonical)))
    }
}

/// The cache directory from `XDG_CACHE_HOME` and `HOME` (a relative `XDG_CACHE_HOME` is
/// ignored, as the XDG specification asks).
pub fn cache_dir(xdg_cache_home: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = match xdg_cache_home.filter(|p| p.is_absolute()) {
        Some(xdg) => xdg,
        None => home.filter(|p| !p.as_os_str().is_empty())?.join(".cache"),
    };
    Some(base.join("mcpscope").join("index"))
}

fn file_name(canonical: &Path) -> String {
    format!(
        "{:016x}.idx",
        fnv64(canonical.as_os_str().as_encoded_bytes())
    )
}

/// FNV-1a, 64 bits, of a cache file's path: the file's name, kept as earlier versions named
/// it so that a new save replaces the file an older version wrote.
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of what a cache file says and of a recording's ends: XXH3, 64 bits. Enough to
/// tell a changed or damaged file, not a defence; it runs at memory speed, where a byte-wise
/// hash was half the cost of saving tens of MiB of models every few seconds.
fn content_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A writer that hashes what goes through it (the check line of a cache file), as
/// [`content_hash`] of all of it.
struct Hashing<W> {
    inner: W,
    hash: xxhash_rust::xxh3::Xxh3Default,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The last line of a cache file: [`content_hash`] of everything before it, so that a damaged
/// file is told from a good one even where it still parses.
#[derive(Debug, Serialize, Deserialize)]
struct Check {
    check: String,
}

/// How a recording looked when its index was saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Its length in bytes.
    pub length: u64,
    /// Its modification time: seconds and nanoseconds since the Unix epoch.
    pub mtime: (i64, u32),
    /// [`content_hash`] of its first 64 KiB (all of it, if shorter).
    pub head: u64,
    /// [`content_hash`] of its last 64 KiB (all of it, if shorter).
    pub tail: u64,
}

impl Fingerprint {
    /// The fingerprint of `file` as it is now.
    fn of(file: &mut File) -> io::Result<Self> {
        let meta = file.metadata()?;
        let length = meta.len();
        let mtime = meta.modified().map_or((0, 0), |m| {
            let t = DateTime::<Utc>::from(m);
            (t.timestamp(), t.timestamp_subsec_nanos())
        });
        Ok(Self {
            length,
            mtime,
            head: hash_range(file, 0, length.min(ENDS))?,
            tail: hash_range(file, length.saturating_sub(ENDS), length)?,
        })
    }

    /// How `file` relates to this fingerprint: the same file, the same file grown, or another.
    fn compare(&self, file: &mut File) -> io::Result<Match> {
        let now = Self::of(file)?;
        if now == *self {
            return Ok(Match::Same);
        }
        if now.length > self.length
            && hash_range(file, 0, self.length.min(ENDS))? == self.head
            && hash_range(file, self.length.saturating_sub(ENDS), self.length)? == self.tail
        {
            return Ok(Match::Grown);
        }
        Ok(Match::Changed)
    }
}

/// How a recording compares with its saved index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    Same,
    Grown,
    Changed,
}

fn hash_range(file: &mut File, from: u64, to: u64) -> io::Result<u64> {
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::with_capacity(usize::try_from(to - from).unwrap_or(0));
    file.take(to - from).read_to_end(&mut bytes)?;
    if (bytes.len() as u64) < to - from {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank"));
    }
    Ok(content_hash(&bytes))
}

/// The first line of a cache file.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    /// The mcpscope version that folded the models (another may fold differently).
    mcpscope: String,
    recording: PathBuf,
    fingerprint: Fingerprint,
    retention: Retention,
    every: u64,
    spacing: u64,
    /// Index points before `resume`, and the times of their events.
    points: Vec<IndexPoint>,
    times: Vec<DateTime<Utc>>,
    /// Stream deaths before `resume`.
    deaths: Vec<u64>,
    /// Where a pass goes on from: the index point of the first checkpoint that follows.
    resume: IndexPoint,
    /// Model lines that follow.
    models: usize,
}

#[derive(Serialize)]
struct ModelOut<'a> {
    seq: u64,
    model: &'a Model,
}

#[derive(Deserialize)]
struct ModelIn {
    seq: u64,
    model: Model,
}

/// What a pass knows at its end that is worth saving (taken from the index state).
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Events between two index points.
    pub every: u64,
    /// Events between two checkpoints.
    pub spacing: u64,
    /// Every index point.
    pub points: Vec<IndexPoint>,
    /// The time of each index point's event.
    pub times: Vec<DateTime<Utc>>,
    /// Stream deaths.
    pub deaths: Vec<u64>,
    /// The checkpoints, in order.
    pub checkpoints: Vec<Checkpoint>,
}

/// A saved index read back: the state up to `resume`, where a pass goes on reading.
#[derive(Debug)]
pub struct Loaded {
    /// Events between two checkpoints.
    pub spacing: u64,
    /// Index points before `resume`.
    pub points: Vec<IndexPoint>,
    /// Their times.
    pub times: Vec<DateTime<Utc>>,
    /// Stream deaths before `resume`.
    pub deaths: Vec<u64>,
    /// Checkpoints in order (not the empty model); the last one is at `resume`.
    pub checkpoints: Vec<Checkpoint>,
    /// Where to read on from, with the checkpoint at it.
    pub resume: IndexPoint,
    /// Whether the recording is as it was when saved (else it has grown).
    pub unchanged: bool,
}

/// Reads the saved index of `recording` if there is one that fits: folded with `retention` at
/// `every` events an index point, of this file as it is or of its beginning. Any problem (none
/// saved, stale, corrupt, another version or file) reads as None.
pub fn load(
    cache: &IndexCache,
    recording: &Path,
    retention: Retention,
    every: u64,
) -> Option<Loaded> {
    match try_load(cache, recording, retention, every) {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::debug!("saved index of {} not used: {e}", recording.display());
            None
        }
    }
}

fn try_load(
    cache: &IndexCache,
    recording: &Path,
    retention: Retention,
    every: u64,
) -> io::Result<Option<Loaded>> {
    let canonical = std::fs::canonicalize(recording)?;
    let path = cache.dir.join(file_name(&canonical));
    try_load_from(&path, &canonical, Names::Path, retention, every)
}

/// The sidecar index of a recording: `NAME.idx` beside it, written by the recorder's live
/// index as the recording is written (see [`crate::liveindex`]).
pub fn sidecar_for(recording: &Path) -> PathBuf {
    let mut name = recording
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    name.push(".idx");
    recording.with_file_name(name)
}

/// Reads the sidecar index of `recording` ([`sidecar_for`]) if there is one that fits, with
/// the same checks as a saved index in the cache; it names the recording by its file name
/// only (the two may move together). Any problem reads as None.
pub fn load_sidecar(recording: &Path, retention: Retention, every: u64) -> Option<Loaded> {
    let loaded = std::fs::canonicalize(recording).and_then(|canonical| {
        try_load_from(
            &sidecar_for(&canonical),
            &canonical,
            Names::FileName,
            retention,
            every,
        )
    });
    match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::debug!("sidecar index of {} not used: {e}", recording.display());
            None
        }
    }
}

/// How much of the recording's path an index must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    /// The whole canonical path (a cache file, named by a hash of it).
    Path,
    /// The file name (a sidecar, found beside the recording).
    FileName,
}

fn try_load_from(
    path: &Path,
    canonical: &Path,
    names: Names,
    retention: Retention,
    every: u64,
) -> io::Result<Option<Loaded>> {
    let file = match open_no_follow(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    check_private(&file)?;
    // Checked before anything is read: a cache larger than its recording could need is not one.
    let recording_len = std::fs::metadata(canonical)?.len();
    let bound = cache_bound(recording_len);
    let cache_len = file.metadata()?.len();
    if cache_len > bound {
        return Err(invalid(format!(
            "{cache_len} bytes, more than a saved index of this recording holds ({bound})"
        )));
    }
    let mut lines = BufReader::with_capacity(1 << 20, file.take(bound));
    let mut line = Vec::new();
    lines.read_until(b'\n', &mut line)?;
    let header: Header = serde_json::from_slice(&line).map_err(invalid)?;
    let fits = header.format == FORMAT
        && header.version == FORMAT_VERSION
        && header.mcpscope == env!("CARGO_PKG_VERSION")
        && match names {
            Names::Path => header.recording == canonical,
            Names::FileName => header.recording.file_name() == canonical.file_name(),
        }
        && header.retention == retention
        && header.every == every
        && (1..=1 + MIDDLE_CHECKPOINTS).contains(&header.models)
        && header.points.len() == header.times.len()
        && (header.points.iter().enumerate()).all(|(k, p)| p.at.seq == k as u64 * every)
        && header.resume.at.seq == header.points.len() as u64 * every;
    if !fits {
        return Err(invalid("another version, file, retention or density"));
    }
    let mut opened = File::open(canonical)?;
    let unchanged = match header.fingerprint.compare(&mut opened)? {
        Match::Same => true,
        Match::Grown => false,
        Match::Changed => return Err(invalid("the recording changed")),
    };
    if !offsets_fit(&mut opened, &header)? {
        return Err(invalid(
            "its offsets do not fall on the recording's line starts",
        ));
    }
    // The models, read whole into a buffer of their exact size (tens of MiB: no room to spare
    // while growing it), then parsed from it (several times faster than from the file).
    let rest = cache_len.saturating_sub(line.len() as u64);
    let mut text = Vec::new();
    text.try_reserve_exact(usize::try_from(rest).map_err(invalid)?.saturating_add(1))
        .map_err(invalid)?;
    lines.read_to_end(&mut text)?;
    // The check line: the hash of everything before it.
    let body_end = text
        .strip_suffix(b"\n")
        .and_then(|t| t.iter().rposition(|&b| b == b'\n'))
        .map(|at| at + 1)
        .ok_or_else(|| invalid("no check line"))?;
    let check: Check = serde_json::from_slice(&text[body_end..]).map_err(invalid)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    hasher.update(&line);
    hasher.update(&text[..body_end]);
    let hash = hasher.digest();
    if check.check != format!("{hash:016x}") {
        return Err(invalid("damaged: the check does not match"));
    }
    let mut models = serde_json::Deserializer::from_slice(&text[..body_end]).into_iter::<ModelIn>();
    let mut checkpoints = Vec::with_capacity(header.models);
    for _ in 0..header.models {
        let mut read = models
            .next()
            .ok_or_else(|| invalid("a model is missing"))?
            .map_err(invalid)?;
        read.model.reshare();
        checkpoints.push(Checkpoint {
            seq: read.seq,
            model: Arc::new(read.model),
        });
    }
    checkpoints.sort_by_key(|c| c.seq);
    let resume_seq = header.resume.at.seq;
    let consistent = checkpoints.last().is_some_and(|c| c.seq == resume_seq)
        && checkpoints.iter().all(|c| c.seq > 0)
        && header.points.last().is_none_or(|p| p.at.seq < resume_seq)
        && header.deaths.last().is_none_or(|&d| d < resume_seq)
        && checkpoints
            .iter()
            .all(|c| c.model.events_applied == c.seq && c.model.retention() == retention);
    if !consistent {
        return Err(invalid("inconsistent"));
    }
    Ok(Some(Loaded {
        spacing: header.spacing.max(every),
        points: header.points,
        times: header.times,
        deaths: header.deaths,
        checkpoints,
        resume: header.resume,
        unchanged,
    }))
}

/// The most bytes a saved index of a recording of `length` bytes is read up to: its models
/// are folded from the recording and hold at most its text, a few times over, plus the index.
fn cache_bound(length: u64) -> u64 {
    length.saturating_mul(4).saturating_add(16 << 20)
}

/// Whether every offset the header gives (its index points and where the pass resumes) is
/// inside the recording, in order, and at the start of a line: a cache that says otherwise
/// was not made from this file, whatever its fingerprint says, and is rebuilt.
fn offsets_fit(file: &mut File, header: &Header) -> io::Result<bool> {
    let length = file.metadata()?.len();
    let mut last = None;
    for offset in header
        .points
        .iter()
        .chain(std::iter::once(&header.resume))
        .map(|p| p.at.offset)
    {
        if offset > length || last.is_some_and(|l| offset <= l) {
            return Ok(false);
        }
        last = Some(offset);
        if offset == 0 {
            continue;
        }
        let mut before = [0u8; 1];
        file.seek(SeekFrom::Start(offset - 1))?;
        file.read_exact(&mut before)?;
        if before[0] != b'\n' {
            return Ok(false);
        }
    }
    Ok(true)
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Saves what a pass over `recording` learnt, folded with `retention`; returns the cache file.
/// The directory is made 0700 and the file 0600; it is written under a temporary name and
/// renamed, and a link at either name is never followed.
pub fn save(
    cache: &IndexCache,
    recording: &Path,
    retention: Retention,
    snapshot: &Snapshot,
) -> io::Result<PathBuf> {
    let canonical = std::fs::canonicalize(recording)?;
    let dir = &cache.dir;
    make_private_dir(dir)?;
    let path = dir.join(file_name(&canonical));
    write_index(&path, &canonical, retention, snapshot)?;
    prune(dir, &path, cache.keep_bytes);
    Ok(path)
}

/// Saves what a pass over `recording` learnt as its sidecar index ([`sidecar_for`]), as
/// [`save`] writes a cache file (0600, under a temporary name and renamed, never through a
/// link); the directory is the recording's own and is left as it is.
pub fn save_sidecar(
    recording: &Path,
    retention: Retention,
    snapshot: &Snapshot,
) -> io::Result<PathBuf> {
    let canonical = std::fs::canonicalize(recording)?;
    let path = sidecar_for(&canonical);
    write_index(&path, &canonical, retention, snapshot)?;
    Ok(path)
}

/// Writes the index of `canonical` at `path`: under a temporary name beside it, then renamed.
/// Refused when its offsets go past the bytes of the recording on disk now.
fn write_index(
    path: &Path,
    canonical: &Path,
    retention: Retention,
    snapshot: &Snapshot,
) -> io::Result<()> {
    let fingerprint = Fingerprint::of(&mut File::open(canonical)?)?;
    let every = snapshot.every.max(1);
    // The checkpoint a pass goes on from: the last one at an index point.
    let point_of = |seq: u64| {
        usize::try_from(seq / every)
            .ok()
            .and_then(|k| snapshot.points.get(k))
            .filter(|p| p.at.seq == seq)
    };
    let resume = snapshot
        .checkpoints
        .iter()
        .rev()
        .find(|c| c.seq > 0 && point_of(c.seq).is_some())
        .ok_or_else(|| invalid("too short to need a saved index"))?;
    let resume_point = point_of(resume.seq)
        .cloned()
        .ok_or_else(|| invalid("no index point"))?;
    if resume_point.at.offset > fingerprint.length {
        return Err(invalid("its offsets go past the end of the recording"));
    }
    let middle = middle_checkpoints(snapshot, resume.seq, fingerprint.length);
    let kept = usize::try_from(resume.seq / every).unwrap_or(usize::MAX);
    let header = Header {
        format: FORMAT.to_string(),
        version: FORMAT_VERSION,
        mcpscope: env!("CARGO_PKG_VERSION").to_string(),
        recording: canonical.to_path_buf(),
        fingerprint,
        retention,
        every,
        spacing: snapshot.spacing,
        points: snapshot.points.iter().take(kept).cloned().collect(),
        times: snapshot.times.iter().take(kept).copied().collect(),
        deaths: snapshot
            .deaths
            .iter()
            .copied()
            .take_while(|&d| d < resume.seq)
            .collect(),
        resume: resume_point,
        models: 1 + middle.len(),
    };
    let name = path
        .file_name()
        .ok_or_else(|| invalid("no file name"))?
        .to_string_lossy();
    let temp = path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        Utc::now().timestamp_nanos_opt().unwrap_or(0)
    ));
    let written = (|| {
        // Buffered before the hash: serde's many small writes land in the buffer, and the
        // hash and the file see it a megabyte at a time.
        let mut out = BufWriter::with_capacity(
            1 << 20,
            Hashing {
                inner: create_private(&temp)?,
                hash: xxhash_rust::xxh3::Xxh3Default::new(),
            },
        );
        serde_json::to_writer(&mut out, &header).map_err(invalid)?;
        out.write_all(b"\n")?;
        for checkpoint in std::iter::once(resume).chain(middle) {
            let line = ModelOut {
                seq: checkpoint.seq,
                model: &checkpoint.model,
            };
            serde_json::to_writer(&mut out, &line).map_err(invalid)?;
            out.write_all(b"\n")?;
        }
        let hashed = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        let check = Check {
            check: format!("{:016x}", hashed.hash.digest()),
        };
        let mut out = hashed.inner;
        let mut line = serde_json::to_vec(&check).map_err(invalid)?;
        line.push(b'\n');
        out.write_all(&line)?;
        out.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(())
}

/// Deletes the saved indexes written longest ago while the directory holds more than
/// `keep_bytes` (never `kept`), and temporary files left by a writer that died an hour ago or
/// more. Only regular files named as this module names them are touched.
fn prune(dir: &Path, kept: &Path, keep_bytes: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let mut saved = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let written = meta.modified().unwrap_or(now);
        if !meta.is_file() {
            continue;
        }
        if name.starts_with('.') && name.ends_with(".tmp") {
            let age = now.duration_since(written).unwrap_or_default();
            if age >= std::time::Duration::from_secs(3600) {
                let _ = std::fs::remove_file(&path);
            }
        } else if name.ends_with(".idx") && path != kept {
            saved.push((written, meta.len(), path));
        }
    }
    let mut total = std::fs::metadata(kept).map_or(0, |m| m.len());
    saved.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (_, len, path) in saved {
        total = total.saturating_add(len);
        if total > keep_bytes {
            tracing::debug!("saved index {} deleted (cache full)", path.display());
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Up to two checkpoints before the one a pass resumes from, spread out, while their models
/// (by [`Model::approx_heap`]) stay within a twentieth of the recording.
fn middle_checkpoints(snapshot: &Snapshot, resume: u64, length: u64) -> Vec<&Checkpoint> {
    let candidates: Vec<&Checkpoint> = snapshot
        .checkpoints
        .iter()
        .filter(|c| c.seq > 0 && c.seq < resume)
        .collect();
    let budget = usize::try_from(length / 20).unwrap_or(usize::MAX);
    let mut spent = snapshot
        .checkpoints
        .iter()
        .find(|c| c.seq == resume)
        .map_or(0, |c| c.model.approx_heap());
    let mut chosen = Vec::new();
    let n = candidates.len();
    for k in 1..=MIDDLE_CHECKPOINTS.min(n) {
        // Evenly: the candidates at 1/3 and 2/3 of the list (or the one in the middle).
        let at = (k * n) / (MIDDLE_CHECKPOINTS.min(n) + 1);
        let Some(&checkpoint) = candidates.get(at) else {
            continue;
        };
        let cost = checkpoint.model.approx_heap();
        if spent.saturating_add(cost) > budget
            || chosen.iter().any(|c: &&Checkpoint| c.seq == checkpoint.seq)
        {
            continue;
        }
        spent += cost;
        chosen.push(checkpoint);
    }
    chosen
}

#[cfg(unix)]
fn make_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(invalid("the cache directory is not a directory"));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn make_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn create_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Refuses a cache file that another user owns or may write to (it could say anything).
#[cfg(unix)]
fn check_private(file: &File) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me || meta.mode() & 0o022 != 0 || !meta.is_file() {
        return Err(invalid("not a private file of this user"));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Opens a cache file for reading: never through a link, and non-blocking, so that a FIFO or
/// a device planted at the path opens at once (and is then refused by [`check_private`])
/// instead of waiting for a writer.
#[cfg(unix)]
fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_follows_xdg_then_home() {
        let xdg = Some(PathBuf::from("/x/cache"));
        let home = Some(PathBuf::from("/home/u"));
        assert_eq!(
            cache_dir(xdg, home.clone()),
            Some(PathBuf::from("/x/cache/mcpscope/index"))
        );
        assert_eq!(
            cache_dir(Some(PathBuf::from("relative")), home.clone()),
            Some(PathBuf::from("/home/u/.cache/mcpscope/index"))
        );
        assert_eq!(
            cache_dir(None, home),
            Some(PathBuf::from("/home/u/.cache/mcpscope/index"))
        );
        assert_eq!(cache_dir(None, None), None);
    }

    #[test]
    fn names_differ_by_path() {
        assert_ne!(file_name(Path::new("/a/b")), file_name(Path::new("/a/c")));
        assert_eq!(file_name(Path::new("/a/b")).len(), 20);
    }
}
