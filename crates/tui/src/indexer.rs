//! The background pass over a recording file that a replay opened without reading it: one
//! thread reads and parses the lines, another folds them; together they note where every
//! `every`th event starts (an [`IndexPoint`] and its time), which events are stream deaths, and
//! a bounded set of model checkpoints, and end with the model after the last event. A cursor
//! seeks by cloning the nearest checkpoint and reading forward from the index point under it.

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

/// How densely a recording is indexed and checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexConfig {
    /// Events between two index points (at least 1).
    pub every: u64,
    /// Events between two checkpoints at first (rounded to a multiple of `every`); the spacing
    /// doubles each time there would be more than `max_checkpoints`.
    pub checkpoint_every: u64,
    /// Checkpoints kept at most, besides the empty model at the start, one before the last
    /// index point's events and the model at the end.
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

/// The model after the first `seq` events.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Events folded into it (a multiple of the index spacing).
    pub seq: u64,
    /// The model; shared, a cursor clones it to fold on.
    pub model: Arc<Model>,
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
    /// The model after the last event, once the pass is done.
    pub end: Option<Arc<Model>>,
    /// Whether the pass is over (the whole file, or up to a bad line).
    pub done: bool,
    /// Why the pass stopped before the end of the file (a bad line).
    pub error: Option<String>,
    /// Warnings (a truncated last line).
    pub warnings: Vec<String>,
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

    /// The last checkpoint at or before event `seq` (the end model counts when `seq` is the end).
    pub fn checkpoint_before(&self, seq: u64) -> Option<Checkpoint> {
        if let Some(end) = &self.end
            && seq >= self.events
        {
            return Some(Checkpoint {
                seq: self.events,
                model: end.clone(),
            });
        }
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

/// Events parsed by the reading thread, from an index point on.
struct Chunk {
    point: IndexPoint,
    events: Vec<Event>,
    bytes: u64,
    error: Option<String>,
    warnings: Vec<String>,
    last: bool,
}

impl Indexer {
    /// Starts the pass over `path`, folding with `retention`.
    pub fn start(path: &Path, retention: Retention, config: IndexConfig) -> Self {
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
        let (tx, rx) = sync_channel::<Chunk>(4);
        let reader = {
            let path = path.to_path_buf();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("replay-read".into())
                .spawn(move || read(&path, every, &stop, &tx))
        };
        let folder = {
            let state = state.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("replay-index".into())
                .spawn(move || fold(rx, &state, &stop, retention, config))
        };
        let mut threads = Vec::new();
        let mut failed = None;
        for spawned in [reader, folder] {
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => failed = Some(e.to_string()),
            }
        }
        if let Some(reason) = failed {
            let mut s = lock(&state);
            s.error = Some(format!("indexing could not start: {reason}"));
            s.done = true;
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

/// The reading thread: parses `every` events at a time and hands them on.
fn read(path: &Path, every: u64, stop: &AtomicBool, tx: &SyncSender<Chunk>) {
    let mut events = match Events::open(path) {
        Ok(events) => events,
        Err(e) => {
            let _ = tx.send(Chunk {
                point: empty_point(),
                events: Vec::new(),
                bytes: 0,
                error: Some(e.to_string()),
                warnings: Vec::new(),
                last: true,
            });
            return;
        }
    };
    let size = usize::try_from(every).unwrap_or(usize::MAX).min(1 << 16);
    // Each chunk is handed on once the next is read, so the last one with events is marked
    // `last` (the folding thread keeps a checkpoint before it: stepping back from the end is
    // quick).
    let mut held: Option<Chunk> = None;
    while !stop.load(Ordering::Relaxed) {
        let point = events.point();
        let mut chunk = Vec::with_capacity(size);
        let mut error = None;
        let mut last = false;
        while (chunk.len() as u64) < every {
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

fn empty_point() -> IndexPoint {
    IndexPoint {
        at: mcpscope_engine::record::Position {
            offset: 0,
            lines: 0,
            seq: 0,
        },
        context: Default::default(),
    }
}

/// The folding thread: folds each chunk, notes its index point, deaths and checkpoints.
fn fold(
    rx: Receiver<Chunk>,
    state: &Mutex<IndexState>,
    stop: &AtomicBool,
    retention: Retention,
    config: IndexConfig,
) {
    let mut model = Model::with_retention(retention);
    let mut seq = 0u64;
    let mut spacing = lock(state).spacing;
    while let Ok(chunk) = rx.recv() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let first_t = chunk.events.first().map(|e| e.t);
        // Before the last events: a checkpoint near the end, whatever the spacing.
        let tail = (chunk.last && !chunk.events.is_empty() && seq > 0).then(|| Checkpoint {
            seq,
            model: Arc::new(model.clone()),
        });
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
        if let Some(t) = first_t {
            s.points.push(chunk.point);
            s.times.push(t);
        }
        s.deaths.extend(deaths);
        s.events = seq;
        s.bytes = chunk.bytes;
        s.last_t = model.last_t;
        if let Some(model) = checkpoint {
            // As many as the budget holds of models this size (the newest is the largest so
            // far in a growing session), never fewer than two nor more than the maximum.
            let affordable = config.checkpoint_budget / model.approx_heap().max(1);
            let allowed = affordable.clamp(2, config.max_checkpoints.max(2));
            s.checkpoints.push(Checkpoint { seq, model });
            while s.checkpoints.len() > allowed + 1 {
                spacing *= 2;
                s.spacing = spacing;
                s.checkpoints.retain(|c| c.seq.is_multiple_of(spacing));
            }
        }
        if chunk.last {
            if let Some(tail) = tail
                && s.checkpoints.last().is_none_or(|c| c.seq < tail.seq)
            {
                s.checkpoints.push(tail);
            }
            s.error = chunk.error;
            s.warnings = chunk.warnings;
            s.end = Some(Arc::new(std::mem::take(&mut model)));
            s.done = true;
            return;
        }
    }
    // The reading thread went away without a last chunk (stopped): nothing more to publish.
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
