//! A replay cursor over a recording file that is never read whole: the first screen needs only
//! the file's first lines; an [`Indexer`] pass in the background notes index points, deaths and
//! model checkpoints; a seek clones the nearest checkpoint and reads forward from the index point
//! under it; playing forward reads the file in order. Memory holds the cursor's model, the
//! checkpoints (a bounded number of models, each bounded by the retention policy) and one line.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::checkpoint::Checkpoint;
use super::indexer::{IndexConfig, Indexer};
use super::readahead::ReadAhead;
use super::savedindex::IndexCache;
use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Retention};
use mcpscope_engine::record::{Events, IndexPoint, ReadError};

/// Events a bounded seek folds between looks at its deadline.
const DEADLINE_EVERY: u64 = 1024;

/// A seek with at least this many events to fold reads them through a [`ReadAhead`]: decoding
/// beside the fold, instead of before each event.
const READ_AHEAD_AFTER: u64 = 50_000;

/// Where the cursor reads its next events: the file, or a thread decoding it ahead (from a
/// long seek on).
#[derive(Debug)]
enum Reader {
    Direct(Box<Events<BufReader<File>>>),
    Ahead(ReadAhead),
}

impl Reader {
    /// The index point of the next event, when this reader can tell (one reading ahead cannot).
    fn point(&self) -> Option<IndexPoint> {
        match self {
            Reader::Direct(events) => Some(events.point()),
            Reader::Ahead(_) => None,
        }
    }
}

impl Iterator for Reader {
    type Item = Result<Event, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Reader::Direct(events) => events.next(),
            Reader::Ahead(ahead) => ahead.next(),
        }
    }
}

/// A recording file and a position in it: the model after the first `position()` events.
#[derive(Debug)]
pub struct FileCursor {
    path: PathBuf,
    indexer: Indexer,
    retention: Retention,
    config: IndexConfig,
    /// Where the recording's index is saved, if it is.
    cache: Option<IndexCache>,
    /// Shared with the checkpoint it was restored from until it folds on (copied then).
    model: Arc<Model>,
    pos: u64,
    /// Reads event `pos` next (unless `next` holds it already).
    reader: Option<Reader>,
    /// Event `pos`, read ahead (to see its time before applying it).
    next: Option<Event>,
    /// Whether the reader has nothing more.
    exhausted: bool,
    first_t: Option<DateTime<Utc>>,
    /// A model of the cursor's own, at the index point just before the last jump's target, so
    /// that stepping back from there folds at most one index spacing.
    near: Option<(Checkpoint, IndexPoint)>,
    /// The target of a jump [`FileCursor::seek_until`] stopped short of (it keeps `near` once
    /// it gets there).
    jumping_to: Option<u64>,
    /// A read error the cursor met (the index pass reports its own).
    error: Option<String>,
    /// Seeks with at least this many events to fold read them ahead on a thread.
    read_ahead_after: u64,
}

impl FileCursor {
    /// Opens `path` at its start (no event applied) and starts indexing it in the background,
    /// the models holding the past by `retention`. Fails at once on a file that is not a
    /// recording, or whose first event does not read.
    pub fn open(path: &Path, retention: Retention) -> Result<Self, ReadError> {
        Self::open_with(path, retention, IndexConfig::default())
    }

    /// [`FileCursor::open`] with a chosen index density (tests use a dense one).
    pub fn open_with(
        path: &Path,
        retention: Retention,
        config: IndexConfig,
    ) -> Result<Self, ReadError> {
        Self::open_cached(path, retention, config, None)
    }

    /// [`FileCursor::open_with`], the background pass starting from the recording's saved
    /// index in `cache` when one fits, and saving it there at its end.
    pub fn open_cached(
        path: &Path,
        retention: Retention,
        config: IndexConfig,
        cache: Option<IndexCache>,
    ) -> Result<Self, ReadError> {
        let mut reader = Events::open(path)?;
        let next = reader.next().transpose()?;
        let indexer = Indexer::start_cached(path, retention, config, cache.clone());
        Ok(Self {
            path: path.to_path_buf(),
            indexer,
            retention,
            config,
            cache,
            model: Arc::new(Model::with_retention(retention)),
            pos: 0,
            exhausted: next.is_none(),
            first_t: next.as_ref().map(|e| e.t),
            next,
            reader: Some(Reader::Direct(Box::new(reader))),
            near: None,
            jumping_to: None,
            error: None,
            read_ahead_after: READ_AHEAD_AFTER,
        })
    }

    /// The same cursor, its seeks reading ahead on a thread from `events` events to fold on
    /// (tests make it small).
    pub fn read_ahead_after(mut self, events: u64) -> Self {
        self.read_ahead_after = events;
        self
    }

    /// The background pass (tests and benchmarks wait on it).
    pub fn indexer(&self) -> &Indexer {
        &self.indexer
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Folds with `retention` from now on: indexing starts again and the cursor goes back to
    /// the start (seek again).
    pub fn set_retention(&mut self, retention: Retention) {
        if retention == self.retention {
            return;
        }
        self.indexer =
            Indexer::start_cached(&self.path, retention, self.config, self.cache.clone());
        self.retention = retention;
        self.near = None;
        self.jumping_to = None;
        let start = Checkpoint {
            seq: 0,
            model: Arc::new(Model::with_retention(retention)),
        };
        self.restore(&start, None);
    }

    /// How many events are applied.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Events in the recording once indexed; None while the pass runs.
    pub fn total(&self) -> Option<u64> {
        let s = self.indexer.state();
        s.done.then_some(s.events)
    }

    /// Events known so far: all of them once indexed.
    pub fn known_len(&self) -> u64 {
        self.indexer.state().events.max(self.pos)
    }

    /// Whether the index pass is over.
    pub fn complete(&self) -> bool {
        self.indexer.done()
    }

    /// Whether no event follows the cursor.
    pub fn at_end(&self) -> bool {
        (self.exhausted && self.next.is_none()) || self.total().is_some_and(|n| self.pos >= n)
    }

    /// What the status bar says of the file: `indexing… 42%` while the pass runs, then a bad
    /// line or a warning if there was one.
    pub fn note(&self) -> Option<String> {
        let s = self.indexer.state();
        if !s.done {
            return Some(format!("indexing… {}%", s.percent()));
        }
        if let Some(error) = &s.error {
            return Some(format!("read up to event {}: {error}", s.events));
        }
        if let Some(error) = &self.error {
            return Some(error.clone());
        }
        s.warnings.first().cloned()
    }

    /// Whether seeking to `index` is quick now: it is indexed.
    pub fn reachable(&self, index: u64) -> bool {
        let s = self.indexer.state();
        s.done || index <= s.events
    }

    /// Whether seeking to time `t` is quick now: an indexed event is later than `t`.
    pub fn time_reachable(&self, t: DateTime<Utc>) -> bool {
        let s = self.indexer.state();
        s.done || s.last_t.is_some_and(|last| t < last)
    }

    /// The model as of the cursor.
    pub fn model_at(&self) -> &Model {
        &self.model
    }

    /// The cursor's time: that of the last applied event (the first event's before any).
    pub fn time(&self) -> Option<DateTime<Utc>> {
        match self.pos {
            0 => self.first_t,
            _ => self.model.last_t,
        }
    }

    /// Moves the model's clock to `now` between events (playback).
    pub fn advance(&mut self, now: DateTime<Utc>) {
        if self.model.clock().is_none_or(|clock| now > clock) {
            Arc::make_mut(&mut self.model).advance(now);
        }
    }

    /// Moves the cursor so that exactly `index` events are applied (clamped to the length): from
    /// the nearest checkpoint at or before it, or from here when that is nearer. A target past
    /// the indexed part is read to in order (the viewer waits for the index instead).
    pub fn seek(&mut self, index: u64) {
        self.seek_until(index, None);
    }

    /// [`FileCursor::seek`], stopping once `deadline` has passed (checked every
    /// [`DEADLINE_EVERY`] events): whether the cursor got there. Called again with the same
    /// index, it goes on from where it stopped; the cursor's model is whole at every stop.
    pub fn seek_until(&mut self, index: u64, deadline: Option<Instant>) -> bool {
        let target = self.total().map_or(index, |n| index.min(n));
        if target == self.pos {
            self.jumping_to = None;
            return true;
        }
        let every = self.config.every.max(1);
        let from = self.pos;
        if let Some((checkpoint, point)) = self.start_for(target) {
            self.restore(&checkpoint, point);
        }
        // A jump (now, or by the call that began this seek) keeps a model near its target.
        if self.pos != from {
            self.jumping_to = Some(target);
        }
        let jumped = self.jumping_to == Some(target);
        let near_at = target.saturating_sub(1) / every * every;
        let keep_near = jumped
            && near_at > self.pos
            && self.near.as_ref().is_none_or(|(c, _)| c.seq != near_at);
        if target.saturating_sub(self.pos) >= self.read_ahead_after {
            self.read_ahead();
        }
        let mut folded = 0u64;
        while self.pos < target {
            if keep_near
                && self.pos == near_at
                && self.next.is_none()
                && let Some(point) = self
                    .reader
                    .as_ref()
                    .and_then(Reader::point)
                    .or_else(|| self.indexer.state().point_at(near_at).cloned())
            {
                let model = Arc::clone(&self.model);
                let checkpoint = Checkpoint {
                    seq: near_at,
                    model,
                };
                self.near = Some((checkpoint, point));
            }
            if !self.apply_next() {
                break;
            }
            folded += 1;
            if folded.is_multiple_of(DEADLINE_EVERY)
                && self.pos < target
                && deadline.is_some_and(|d| Instant::now() >= d)
            {
                return false;
            }
        }
        self.jumping_to = None;
        true
    }

    /// One event forward.
    pub fn step_forward(&mut self) {
        self.seek(self.pos + 1);
    }

    /// One event back.
    pub fn step_back(&mut self) {
        self.seek(self.pos.saturating_sub(1));
    }

    /// Seeks to just after the last event at or before `t`; a time before the recording goes
    /// to its start (the first event applied).
    pub fn seek_time(&mut self, t: DateTime<Utc>) {
        self.seek_time_until(t, None);
    }

    /// [`FileCursor::seek_time`], stopping once `deadline` has passed on the way to the index
    /// point before `t` (see [`FileCursor::seek_until`]): whether the cursor got there.
    pub fn seek_time_until(&mut self, t: DateTime<Utc>, deadline: Option<Instant>) -> bool {
        let start = self.indexer.state().point_before_time(t);
        if (self.pos < start || self.time().is_none_or(|now| now > t))
            && !self.seek_until(start, deadline)
        {
            return false;
        }
        while self.peek().is_some_and(|e| e.t <= t) {
            self.apply_next();
        }
        if self.pos == 0 {
            self.seek(1);
        }
        true
    }

    /// Applies every event up to `clock` (playback, reading the file in order); returns whether
    /// any was applied.
    pub fn play_to(&mut self, clock: DateTime<Utc>) -> bool {
        let start = self.pos;
        while self.peek().is_some_and(|e| e.t <= clock) {
            self.apply_next();
        }
        self.pos != start
    }

    /// Jumps to just after the next stream death indexed so far; the new position, or None.
    pub fn next_death(&mut self) -> Option<u64> {
        let to = self.next_death_at()?;
        self.seek(to);
        Some(self.pos)
    }

    /// Jumps to just after the previous stream death; None if there is none before the cursor.
    pub fn prev_death(&mut self) -> Option<u64> {
        let to = self.prev_death_at()?;
        self.seek(to);
        Some(self.pos)
    }

    /// Where [`FileCursor::next_death`] would go: just after the next stream death indexed so
    /// far.
    pub fn next_death_at(&self) -> Option<u64> {
        let s = self.indexer.state();
        let at = s.deaths.partition_point(|&i| i < self.pos);
        s.deaths.get(at).map(|death| death + 1)
    }

    /// Where [`FileCursor::prev_death`] would go: just after the stream death before the
    /// cursor.
    pub fn prev_death_at(&self) -> Option<u64> {
        let s = self.indexer.state();
        let at = s.deaths.partition_point(|&i| i + 1 < self.pos);
        s.deaths.get(at.checked_sub(1)?).map(|death| death + 1)
    }

    /// The best place to fold from toward `target`: a checkpoint (the pass's or the cursor's
    /// own) and the index point where reading goes on; None to go on from here.
    fn start_for(&self, target: u64) -> Option<(Checkpoint, Option<IndexPoint>)> {
        let every = self.config.every.max(1);
        let useful =
            |seq: u64| seq <= target && (target < self.pos || seq > self.pos.saturating_add(every));
        let mut best = {
            let s = self.indexer.state();
            s.checkpoint_before(target).and_then(|c| {
                let point = s.point_at(c.seq).cloned();
                let usable = point.is_some() || c.seq == 0 || (s.done && c.seq == s.events);
                (usable && useful(c.seq)).then_some((c, point))
            })
        };
        if let Some((near, point)) = &self.near
            && useful(near.seq)
            && best.as_ref().is_none_or(|(c, _)| near.seq > c.seq)
        {
            best = Some((near.clone(), Some(point.clone())));
        }
        best
    }

    /// Takes `checkpoint`'s model and reads on from `point` (from the top for the start; from
    /// nowhere at the end).
    fn restore(&mut self, checkpoint: &Checkpoint, point: Option<IndexPoint>) {
        self.model = Arc::clone(&checkpoint.model);
        self.pos = checkpoint.seq;
        self.next = None;
        self.exhausted = false;
        let reader = match point {
            Some(point) => Some(Events::open_at(&self.path, &point)),
            None if checkpoint.seq == 0 => Some(Events::open(&self.path)),
            None => None,
        };
        self.reader = match reader {
            Some(Ok(reader)) => Some(Reader::Direct(Box::new(reader))),
            Some(Err(e)) => {
                self.error = Some(e.to_string());
                None
            }
            None => None,
        };
        self.exhausted = self.reader.is_none();
    }

    /// Reads on through a thread decoding ahead (a long seek); the same reader if it does
    /// already, or if no thread can be started.
    fn read_ahead(&mut self) {
        let Some(Reader::Direct(events)) = self.reader.take_if(|r| matches!(r, Reader::Direct(_)))
        else {
            return;
        };
        let point = events.point();
        self.reader = match ReadAhead::start(*events) {
            Some(ahead) => Some(Reader::Ahead(ahead)),
            // No thread: the same reader again, opened where the other stood.
            None => match Events::open_at(&self.path, &point) {
                Ok(events) => Some(Reader::Direct(Box::new(events))),
                Err(e) => {
                    self.error = Some(e.to_string());
                    self.exhausted = true;
                    None
                }
            },
        };
    }

    /// The event at the cursor, read ahead.
    fn peek(&mut self) -> Option<&Event> {
        if self.next.is_none() && !self.exhausted {
            match self.reader.as_mut().and_then(Iterator::next) {
                Some(Ok(event)) => self.next = Some(event),
                Some(Err(e)) => {
                    self.error = Some(e.to_string());
                    self.exhausted = true;
                }
                None => self.exhausted = true,
            }
        }
        self.next.as_ref()
    }

    /// Applies the event at the cursor; false at the end.
    fn apply_next(&mut self) -> bool {
        self.peek();
        let Some(event) = self.next.take() else {
            return false;
        };
        Arc::make_mut(&mut self.model).apply(&event);
        self.pos += 1;
        true
    }
}
