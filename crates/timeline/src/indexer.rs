//! The background pass over a recording file that a replay opened without reading it: one
//! thread reads and parses the lines, another folds them; together they note where every
//! `every`th event starts (an [`IndexPoint`] and its time), which events are stream deaths, and
//! a bounded set of model checkpoints, the last one at most one index spacing before the end. A
//! cursor seeks by cloning the nearest checkpoint and reading forward from the index point under
//! it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, Utc};

use mcpscope_engine::event::{Direction, Event, EventKind};
use mcpscope_engine::model::{Model, Retention};
use mcpscope_engine::record::{Events, IndexPoint};

use crate::checkpoint::Checkpoint;
use crate::savedindex::{self, IndexCache, Snapshot};

/// How densely a recording is indexed and checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexConfig {
    /// Events between two index points (at least 1).
    pub every: u64,
    /// Events between two checkpoints at first (rounded to a multiple of `every`); the spacing
    /// doubles each time there would be more than `max_checkpoints`.
    pub checkpoint_every: u64,
    /// Checkpoints kept at most, besides the empty model at the start and one before the last
    /// index point's events.
    pub max_checkpoints: usize,
    /// Roughly how much memory the checkpoints may take together ([`Model::approx_heap`] of
    /// each): past it their spacing doubles as well, down to two.
    pub checkpoint_budget: usize,
}

impl Default for IndexConfig {
    /// An index point every 4,096 events; a checkpoint every 65,536 at first, at most 12,
    /// within 128 MiB.
    fn default() -> Self {
        Self {
            every: 4_096,
            checkpoint_every: 65_536,
            max_checkpoints: 12,
            checkpoint_budget: 128 << 20,
        }
    }
}

/// What the pass knows so far. Read it through [`Indexer::state`].
#[derive(Debug, Default)]
pub struct IndexState {
    /// Events between two index points.
    pub every: u64,
    /// Index point `k` is where event `k × every` starts.
    pub points: Vec<IndexPoint>,
    /// The time of the event at each index point.
    pub times: Vec<DateTime<Utc>>,
    /// Checkpoints in order, the empty model first.
    pub checkpoints: Vec<Checkpoint>,
    /// Events between two checkpoints now.
    pub spacing: u64,
    /// Sequence numbers of the events that are stream deaths (an abnormal end of a response, or
    /// an end that left a call without its response).
    pub deaths: Vec<u64>,
    /// Events folded so far.
    pub events: u64,
    /// Bytes of the file read so far.
    pub bytes: u64,
    /// The file's size when the pass began.
    pub file_bytes: u64,
    /// The time of the last event folded.
    pub last_t: Option<DateTime<Utc>>,
    /// Whether the pass is over (the whole file, or up to a bad line).
    pub done: bool,
    /// Why the pass stopped before the end of the file (a bad line).
    pub error: Option<String>,
    /// Warnings (a truncated last line).
    pub warnings: Vec<String>,
    /// Events taken from a saved index instead of being folded by this pass (None: none was
    /// used).
    pub loaded: Option<u64>,
    /// What became of the saved index, once the pass is over and it is settled.
    pub saved: SavedState,
}

/// What a pass did with its saved index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SavedState {
    /// Not settled yet (the pass runs, or the index is being written).
    #[default]
    Pending,
    /// No saved index: none asked for, or the recording is too short for one.
    Off,
    /// The saved index fitted the unchanged recording: nothing to write.
    Fresh(PathBuf),
    /// Written (or rewritten) here.
    Written(PathBuf),
    /// Could not be written (a read-only or full disk…); the pass's result stands.
    Unwritten(String),
}

impl IndexState {
    /// How much of the file is indexed, 0–100.
    pub fn percent(&self) -> u8 {
        if self.done {
            return 100;
        }
        let of = self.file_bytes.max(1);
        (self.bytes.min(of) * 100 / of).min(99) as u8
    }

    /// The index point where event `seq` starts, when `seq` is a multiple of `every`.
    pub fn point_at(&self, seq: u64) -> Option<&IndexPoint> {
        if !seq.is_multiple_of(self.every.max(1)) {
            return None;
        }
        self.points
            .get(usize::try_from(seq / self.every.max(1)).ok()?)
            .filter(|p| p.at.seq == seq)
    }

    /// The last checkpoint at or before event `seq`. (The model at the end is not kept: the
    /// last checkpoint is at most one index spacing before it, and a model less in memory is
    /// worth more than the few milliseconds of folding that spacing.)
    pub fn checkpoint_before(&self, seq: u64) -> Option<Checkpoint> {
        let at = self.checkpoints.partition_point(|c| c.seq <= seq);
        self.checkpoints.get(at.checked_sub(1)?).cloned()
    }

    /// The first event (as far as indexed) whose index point time is after `t`, rounded down to
    /// an index point: where a search for the last event at or before `t` starts.
    pub fn point_before_time(&self, t: DateTime<Utc>) -> u64 {
        let k = self.times.partition_point(|&pt| pt <= t);
        k.saturating_sub(1) as u64 * self.every
    }
}

/// A running (or finished) pass over one file.
#[derive(Debug)]
pub struct Indexer {
    path: PathBuf,
    state: Arc<Mutex<IndexState>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Bytes of recording lines the reading thread puts in one chunk at most (a single longer line
/// makes a chunk of its own). A chunk is an index spacing's events or less: the chunks queued
/// and held between reading and folding hold a few times this, whatever an event weighs.
const CHUNK_BYTES: u64 = 4 << 20;

/// Chunks the reading thread may have queued ahead of the folding thread.
const CHUNKS_QUEUED: usize = 4;

/// Events parsed by the reading thread: an index spacing's events from an index point on, or
/// part of them.
struct Chunk {
    /// The index point the chunk starts at (None: it goes on from the chunk before it).
    point: Option<IndexPoint>,
    /// Whether the chunk ends where its index spacing ends (at the next index point, or at the
    /// end of what was read).
    span_ends: bool,
    events: Vec<Event>,
    bytes: u64,
    error: Option<String>,
    warnings: Vec<String>,
    last: bool,
}

impl Indexer {
    /// Starts the pass over `path`, folding with `retention`.
    pub fn start(path: &Path, retention: Retention, config: IndexConfig) -> Self {
        Self::start_cached(path, retention, config, None)
    }

    /// Starts the pass over `path`, folding with `retention`, from the recording's saved index
    /// in `cache` when one fits (the pass then reads only what follows its last checkpoint),
    /// and saves the index there at the end.
    pub fn start_cached(
        path: &Path,
        retention: Retention,
        config: IndexConfig,
        cache: Option<IndexCache>,
    ) -> Self {
        let every = config.every.max(1);
        let spacing = (config.checkpoint_every / every).max(1) * every;
        let state = Arc::new(Mutex::new(IndexState {
            every,
            spacing,
            file_bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            checkpoints: vec![Checkpoint {
                seq: 0,
                model: Arc::new(Model::with_retention(retention)),
            }],
            ..IndexState::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let pass = Pass {
            path: path.to_path_buf(),
            state: state.clone(),
            stop: stop.clone(),
            retention,
            config,
        };
        let spawned = std::thread::Builder::new()
            .name("replay-index".into())
            .spawn(move || pass.run(cache));
        let mut threads = Vec::new();
        match spawned {
            Ok(handle) => threads.push(handle),
            Err(e) => {
                let mut s = lock(&state);
                s.error = Some(format!("indexing could not start: {e}"));
                s.saved = SavedState::Off;
                s.done = true;
            }
        }
        Self {
            path: path.to_path_buf(),
            state,
            stop,
            threads,
        }
    }

    /// The file being indexed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is known so far (hold the guard briefly: the pass publishes through it).
    pub fn state(&self) -> MutexGuard<'_, IndexState> {
        lock(&self.state)
    }

    /// Whether the pass is over.
    pub fn done(&self) -> bool {
        self.state().done
    }

    /// Waits until the pass is over, at most `limit`; returns whether it is.
    pub fn wait(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while !self.done() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// Waits until the pass is over and its saved index settled, at most `limit`; returns what
    /// became of it (Pending if the time ran out).
    pub fn wait_saved(&self, limit: Duration) -> SavedState {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let saved = self.state().saved.clone();
            if saved != SavedState::Pending || std::time::Instant::now() >= deadline {
                return saved;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

fn lock(state: &Mutex<IndexState>) -> MutexGuard<'_, IndexState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One pass: the saved index read back if it fits, then the file read and folded from there
/// (from the start without one), then the index saved.
struct Pass {
    path: PathBuf,
    state: Arc<Mutex<IndexState>>,
    stop: Arc<AtomicBool>,
    retention: Retention,
    config: IndexConfig,
}

impl Pass {
    fn run(self, cache: Option<IndexCache>) {
        let every = self.config.every.max(1);
        let (loaded, loaded_from) =
            match saved_index(cache.as_ref(), &self.path, self.retention, every) {
                Some((loaded, from)) => (Some(loaded), Some(from)),
                None => (None, None),
            };
        let unchanged = loaded.as_ref().is_some_and(|l| l.unchanged);
        if self.stop.load(Ordering::Relaxed) {
            return;
        }
        let (model, seq, from) = match loaded.and_then(|l| self.publish(l)) {
            Some((model, point)) => (model, point.at.seq, Some(point)),
            None => (Model::with_retention(self.retention), 0, None),
        };
        let (tx, rx) = sync_channel::<Chunk>(CHUNKS_QUEUED);
        let reader = {
            let path = self.path.clone();
            let stop = self.stop.clone();
            let from = from.clone();
            std::thread::Builder::new()
                .name("replay-read".into())
                .spawn(move || read(&path, from.as_ref(), every, &stop, &tx))
        };
        match reader {
            Ok(reader) => {
                fold(rx, &self.state, &self.stop, model, seq, self.config);
                let _ = reader.join();
            }
            Err(e) => {
                let mut s = lock(&self.state);
                s.error = Some(format!("indexing could not start: {e}"));
                s.done = true;
            }
        }
        let saved = match cache {
            _ if self.stop.load(Ordering::Relaxed) || !lock(&self.state).done => SavedState::Off,
            _ if from.is_some() && unchanged => {
                loaded_from.map_or(SavedState::Off, SavedState::Fresh)
            }
            None => SavedState::Off,
            Some(cache) if lock(&self.state).file_bytes < cache.save_from_bytes => SavedState::Off,
            Some(cache) => self.save(&cache),
        };
        lock(&self.state).saved = saved;
    }

    /// Takes a saved index into the state; returns the model and index point to read on from.
    fn publish(&self, loaded: savedindex::Loaded) -> Option<(Model, IndexPoint)> {
        let resume = loaded.checkpoints.last()?.clone();
        let mut s = lock(&self.state);
        s.points = loaded.points;
        s.times = loaded.times;
        s.deaths = loaded.deaths;
        s.spacing = loaded.spacing;
        s.checkpoints.truncate(1);
        s.checkpoints.extend(loaded.checkpoints);
        s.events = resume.seq;
        s.bytes = loaded.resume.at.offset;
        s.last_t = resume.model.last_t;
        s.loaded = Some(resume.seq);
        drop(s);
        Some(((*resume.model).clone(), loaded.resume))
    }

    /// Writes the saved index of what the pass learnt.
    fn save(&self, cache: &IndexCache) -> SavedState {
        let snapshot = {
            let s = lock(&self.state);
            Snapshot {
                every: s.every,
                spacing: s.spacing,
                points: s.points.clone(),
                times: s.times.clone(),
                deaths: s.deaths.clone(),
                checkpoints: s.checkpoints.clone(),
            }
        };
        if snapshot.checkpoints.iter().all(|c| c.seq == 0) {
            return SavedState::Off;
        }
        match savedindex::save(cache, &self.path, self.retention, &snapshot) {
            Ok(path) => SavedState::Written(path),
            Err(e) => {
                tracing::debug!("index of {} not saved: {e}", self.path.display());
                SavedState::Unwritten(e.to_string())
            }
        }
    }
}

/// The saved index a pass starts from, and its file: the cache's when it fits the recording
/// unchanged, else whichever of the cache's and the sidecar's ([`savedindex::load_sidecar`],
/// written as the recording was) goes further into it.
fn saved_index(
    cache: Option<&IndexCache>,
    path: &Path,
    retention: Retention,
    every: u64,
) -> Option<(savedindex::Loaded, PathBuf)> {
    let cached = cache.and_then(|cache| {
        let loaded = savedindex::load(cache, path, retention, every)?;
        Some((loaded, cache.file_for(path)?))
    });
    if cached.as_ref().is_some_and(|(l, _)| l.unchanged) {
        return cached;
    }
    let sidecar = savedindex::load_sidecar(path, retention, every).and_then(|loaded| {
        let file = savedindex::sidecar_for(&std::fs::canonicalize(path).ok()?);
        Some((loaded, file))
    });
    match (cached, sidecar) {
        (Some(c), Some(s)) if s.0.resume.at.seq > c.0.resume.at.seq => Some(s),
        (Some(c), _) => Some(c),
        (None, s) => s,
    }
}

/// The reading thread: parses `every` events at a time (fewer when their lines reach
/// [`CHUNK_BYTES`]) and hands them on.
fn read(
    path: &Path,
    from: Option<&IndexPoint>,
    every: u64,
    stop: &AtomicBool,
    tx: &SyncSender<Chunk>,
) {
    let opened = match from {
        Some(point) => Events::open_at(path, point),
        None => Events::open(path),
    };
    let mut events = match opened {
        Ok(events) => events,
        Err(e) => {
            let _ = tx.send(Chunk {
                point: None,
                span_ends: true,
                events: Vec::new(),
                bytes: 0,
                error: Some(e.to_string()),
                warnings: Vec::new(),
                last: true,
            });
            return;
        }
    };
    let size = usize::try_from(every).unwrap_or(usize::MAX).min(1 << 10);
    // Each chunk is handed on once the next is read, so the last one with events is marked
    // `last` (the folding thread keeps a checkpoint before its index spacing: stepping back
    // from the end is quick).
    let mut held: Option<Chunk> = None;
    while !stop.load(Ordering::Relaxed) {
        let start = events.position();
        let point = start.seq.is_multiple_of(every).then(|| events.point());
        let span_end = (start.seq / every + 1).saturating_mul(every);
        let mut chunk = Vec::with_capacity(size);
        let mut error = None;
        let mut last = false;
        while events.position().seq < span_end
            && events.position().offset - start.offset < CHUNK_BYTES
        {
            match events.next() {
                Some(Ok(event)) => chunk.push(event),
                Some(Err(e)) => {
                    error = Some(e.to_string());
                    last = true;
                    break;
                }
                None => {
                    last = true;
                    break;
                }
            }
        }
        let chunk = Chunk {
            point,
            span_ends: last || events.position().seq == span_end,
            events: chunk,
            bytes: events.position().offset,
            error,
            warnings: if last {
                events.warnings().to_vec()
            } else {
                Vec::new()
            },
            last,
        };
        if chunk.last {
            let finals = match held.take() {
                Some(mut previous) if chunk.events.is_empty() => {
                    previous.last = true;
                    previous.span_ends = true;
                    previous.bytes = chunk.bytes;
                    previous.error = chunk.error;
                    previous.warnings = chunk.warnings;
                    vec![previous]
                }
                Some(mut previous) => {
                    previous.last = false;
                    vec![previous, chunk]
                }
                None => vec![chunk],
            };
            for chunk in finals {
                if tx.send(chunk).is_err() {
                    return;
                }
            }
            return;
        }
        if let Some(previous) = held.replace(chunk)
            && tx.send(previous).is_err()
        {
            return;
        }
    }
}

/// The folding thread: folds each chunk into `model` (the model after the first `seq`
/// events, where the chunks start), notes its index point, deaths and checkpoints.
fn fold(
    rx: Receiver<Chunk>,
    state: &Mutex<IndexState>,
    stop: &AtomicBool,
    mut model: Model,
    mut seq: u64,
    config: IndexConfig,
) {
    let mut spacing = lock(state).spacing;
    // The model where an index spacing read in several chunks began: the checkpoint near the
    // end if that spacing is the last.
    let mut span_start: Option<Checkpoint> = None;
    while let Ok(chunk) = rx.recv() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let first_t = chunk.events.first().map(|e| e.t);
        if chunk.point.is_some() {
            span_start = (!chunk.span_ends && seq > 0).then(|| Checkpoint {
                seq,
                model: Arc::new(model.clone()),
            });
        }
        // Before the last index spacing's events: a checkpoint near the end, whatever the
        // spacing. (None when there is one there already: a pass that went on from a saved
        // index.)
        let held = |at: u64| lock(state).checkpoints.last().is_some_and(|c| c.seq >= at);
        let tail = match (&chunk.point, chunk.last && !chunk.events.is_empty()) {
            (_, false) => None,
            (Some(_), true) => (seq > 0 && !held(seq)).then(|| Checkpoint {
                seq,
                model: Arc::new(model.clone()),
            }),
            (None, true) => span_start.take().filter(|start| !held(start.seq)),
        };
        let mut deaths = Vec::new();
        for event in &chunk.events {
            model.apply(event);
            if is_death(&model, event) {
                deaths.push(seq);
            }
            seq += 1;
        }
        let checkpoint = (seq.is_multiple_of(spacing) && !chunk.events.is_empty() && !chunk.last)
            .then(|| Arc::new(model.clone()));
        let mut s = lock(state);
        if let (Some(point), Some(t)) = (chunk.point, first_t) {
            s.points.push(point);
            s.times.push(t);
        }
        s.deaths.extend(deaths);
        s.events = seq;
        s.bytes = chunk.bytes;
        s.last_t = model.last_t;
        if let Some(model) = checkpoint {
            keep_checkpoint(
                &mut s.checkpoints,
                &mut spacing,
                &config,
                Checkpoint { seq, model },
            );
            s.spacing = spacing;
        }
        if chunk.last {
            if let Some(tail) = tail
                && s.checkpoints.last().is_none_or(|c| c.seq < tail.seq)
            {
                s.checkpoints.push(tail);
            }
            s.error = chunk.error;
            s.warnings = chunk.warnings;
            s.done = true;
            return;
        }
    }
    // The reading thread went away without a last chunk (stopped): nothing more to publish.
}

/// Adds `checkpoint` (at a multiple of `spacing`) to `checkpoints` (the empty model first),
/// keeping as many as the budget holds of models its size (the newest is the largest so far in
/// a growing session), never fewer than two nor more than the maximum: past that the spacing
/// doubles and the checkpoints off it go.
pub(crate) fn keep_checkpoint(
    checkpoints: &mut Vec<Checkpoint>,
    spacing: &mut u64,
    config: &IndexConfig,
    checkpoint: Checkpoint,
) {
    let affordable = config.checkpoint_budget / checkpoint.model.approx_heap().max(1);
    let allowed = affordable.clamp(2, config.max_checkpoints.max(2));
    checkpoints.push(checkpoint);
    while checkpoints.len() > allowed + 1 {
        *spacing *= 2;
        checkpoints.retain(|c| c.seq.is_multiple_of(*spacing));
    }
}

/// Whether `event`, just folded into `model`, is a stream death: a response that ended
/// abnormally, or an end that left a call without its response.
pub fn is_death(model: &Model, event: &Event) -> bool {
    match event.kind {
        EventKind::StreamEnded {
            stream,
            dir: Direction::ServerToClient,
            ..
        } => model
            .stream(stream)
            .is_some_and(|s| model.fate(s).is_death()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::record::{Create, Recorder, read_file};

    /// A recording of `count` SSE events of `data_bytes` each.
    fn write_heavy(path: &Path, count: usize, data_bytes: usize) {
        let mut recorder = Recorder::create(path, Create::Replace, false).expect("create");
        for n in 0..count {
            let data = format!("{n:06}{}", "x".repeat(data_bytes));
            let event = Event::now(EventKind::SseEvent {
                stream: 1,
                id: None,
                event: None,
                retry: None,
                data: data.into(),
                start: 0,
                end: 1,
            });
            recorder.write(&event).expect("write");
        }
        recorder.flush().expect("flush");
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpscope-indexer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir.join(name)
    }

    #[test]
    fn a_chunk_holds_at_most_its_bytes_of_lines_not_an_index_spacing_of_events() {
        let path = temp("heavy.jsonl");
        let line = 100 << 10;
        write_heavy(&path, 250, line);
        let every = 64;
        let (tx, rx) = sync_channel::<Chunk>(CHUNKS_QUEUED);
        let stop = AtomicBool::new(false);
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || read(&path, None, every, &stop, &tx))
        };
        let chunks: Vec<Chunk> = rx.iter().collect();
        reader.join().expect("reader");
        let header_end = chunks
            .first()
            .and_then(|c| c.point.as_ref())
            .map(|p| p.at.offset)
            .expect("the first chunk starts at the first index point");
        let mut from = header_end;
        let mut seq = 0u64;
        for chunk in &chunks {
            let bytes = chunk.bytes - from;
            assert!(
                bytes < CHUNK_BYTES + line as u64 + 256,
                "a chunk of {bytes} bytes of lines, {} events",
                chunk.events.len()
            );
            assert_eq!(chunk.point.is_some(), seq.is_multiple_of(every), "at {seq}");
            from = chunk.bytes;
            seq += chunk.events.len() as u64;
        }
        assert_eq!(
            chunks.len(),
            8,
            "each index spacing (6.4 MB; the last 5.8 MB) is read in two chunks"
        );
        assert!(chunks.last().is_some_and(|c| c.last && c.span_ends));
        let read_back: Vec<Event> = chunks.into_iter().flat_map(|c| c.events).collect();
        assert_eq!(read_back, read_file(&path).expect("read").events);

        // The whole pass: index points at every spacing, and the checkpoint near the end at
        // the last spacing's start although that spacing was read in two chunks.
        let config = IndexConfig {
            every,
            checkpoint_every: 1 << 20,
            ..IndexConfig::default()
        };
        let indexer = Indexer::start(&path, Retention::default(), config);
        assert!(indexer.wait(Duration::from_secs(60)), "the pass ends");
        let state = indexer.state();
        assert_eq!(state.error, None);
        assert_eq!(state.events, 250);
        let points: Vec<u64> = state.points.iter().map(|p| p.at.seq).collect();
        assert_eq!(points, [0, 64, 128, 192]);
        let checkpoints: Vec<u64> = state.checkpoints.iter().map(|c| c.seq).collect();
        assert_eq!(checkpoints, [0, 192]);
        drop(state);
        drop(indexer);
        std::fs::remove_file(&path).ok();
        if let Some(dir) = path.parent() {
            std::fs::remove_dir(dir).ok();
        }
    }
}
