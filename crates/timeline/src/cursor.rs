//! The replay cursor: the model as of any point of a recording, with checkpoints so seeking in
//! a million-event recording is fast. Pure: no terminal, usable from tests and benchmarks.

use chrono::{DateTime, Utc};

use mcpscope_engine::event::{Direction, Event, EventKind};
use mcpscope_engine::model::{Model, Retention};

/// The least distance between checkpoints, in events.
pub(crate) const CHECKPOINT_EVERY: usize = 10_000;
/// At most about this many checkpoints are kept: a checkpoint is a deep clone of the model, which
/// costs about as much as folding a third of the events before it, so on huge recordings the
/// spacing grows instead (memory and first-pass time stay bounded; a seek costs one clone plus
/// at most `len / 8` events folded).
const MAX_CHECKPOINTS: usize = 8;

/// Playback speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speed {
    /// Recorded pacing.
    X1,
    /// Ten times faster.
    X10,
    /// As fast as frames allow.
    Max,
}

impl Speed {
    /// The playback speed nearest to a `--speed` factor (0 = as fast as possible).
    pub fn nearest(factor: f64) -> Self {
        if factor <= 0.0 || factor > 30.0 {
            Speed::Max
        } else if factor >= 3.0 {
            Speed::X10
        } else {
            Speed::X1
        }
    }

    /// `1×`, `10×`, `max`.
    pub fn label(self) -> &'static str {
        match self {
            Speed::X1 => "1×",
            Speed::X10 => "10×",
            Speed::Max => "max",
        }
    }

    /// One step faster.
    pub fn faster(self) -> Self {
        match self {
            Speed::X1 => Speed::X10,
            _ => Speed::Max,
        }
    }

    /// One step slower.
    pub fn slower(self) -> Self {
        match self {
            Speed::Max => Speed::X10,
            _ => Speed::X1,
        }
    }
}

/// A recording and a position in it: the model after the first `position()` events.
#[derive(Debug, Clone)]
pub struct ReplayCursor {
    events: Vec<Event>,
    model: Model,
    pos: usize,
    frontier: usize,
    spacing: usize,
    checkpoints: Vec<Model>,
    deaths: Vec<usize>,
}

impl ReplayCursor {
    /// A cursor at the start (no event applied); checkpoints every `max(10,000, len / 8)` events.
    pub fn new(events: Vec<Event>) -> Self {
        let spacing = CHECKPOINT_EVERY.max(events.len() / MAX_CHECKPOINTS + 1);
        Self::with_spacing(events, spacing)
    }

    /// A cursor with checkpoints every `spacing` events (at least 1).
    pub fn with_spacing(events: Vec<Event>, spacing: usize) -> Self {
        Self {
            events,
            model: Model::new(),
            pos: 0,
            frontier: 0,
            spacing: spacing.max(1),
            checkpoints: vec![Model::new()],
            deaths: Vec::new(),
        }
    }

    /// Folds with `retention` from now on: the cursor goes back to the start (seek again).
    pub fn set_retention(&mut self, retention: Retention) {
        self.model = Model::with_retention(retention);
        self.checkpoints = vec![self.model.clone()];
        self.pos = 0;
        self.frontier = 0;
        self.deaths.clear();
    }

    /// Events in the recording.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the recording is empty.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The recording.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// How many events are applied.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The model as of the cursor.
    pub fn model_at(&self) -> &Model {
        &self.model
    }

    /// The cursor's time: that of the last applied event (the first event's before any).
    pub fn time(&self) -> Option<DateTime<Utc>> {
        match self.pos {
            0 => self.events.first().map(|e| e.t),
            n => self.events.get(n - 1).map(|e| e.t),
        }
    }

    /// Moves the model's clock to `now` between events (playback), as a live view's clock moves:
    /// resumption windows that close by then close in the cursor's own model.
    pub fn advance(&mut self, now: DateTime<Utc>) {
        self.model.advance(now);
    }

    /// Moves the cursor so that exactly `index` events are applied (clamped to the length).
    pub fn seek(&mut self, index: usize) {
        let target = index.min(self.events.len());
        let k = (target / self.spacing).min(self.checkpoints.len() - 1);
        let checkpoint = k * self.spacing;
        if target < self.pos || checkpoint > self.pos {
            self.model = self.checkpoints[k].clone();
            self.pos = checkpoint;
        }
        while self.pos < target {
            self.apply_next();
        }
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
    /// to its start (the first event applied), as `[` does.
    pub fn seek_time(&mut self, t: DateTime<Utc>) {
        let index = self.events.partition_point(|e| e.t <= t);
        self.seek(index.max(1));
    }

    /// Applies every event up to `clock` (playback); returns whether any was applied.
    pub fn play_to(&mut self, clock: DateTime<Utc>) -> bool {
        let start = self.pos;
        while self.events.get(self.pos).is_some_and(|e| e.t <= clock) {
            self.apply_next();
        }
        self.pos != start
    }

    /// Jumps to just after the next stream death (an abnormal end of a response, or any end
    /// that left a call without its response); returns the new position, or None at the end.
    pub fn next_death(&mut self) -> Option<usize> {
        if let Some(&i) = self.deaths.iter().find(|&&i| i >= self.pos) {
            self.seek(i + 1);
            return Some(self.pos);
        }
        if self.frontier > self.pos {
            self.seek(self.frontier);
        }
        let known = self.deaths.len();
        while self.pos < self.events.len() {
            self.apply_next();
            if self.deaths.len() > known {
                return Some(self.pos);
            }
        }
        None
    }

    /// Jumps to just after the previous stream death; None if there is none before the cursor.
    pub fn prev_death(&mut self) -> Option<usize> {
        let i = self
            .deaths
            .iter()
            .rev()
            .find(|&&i| i + 1 < self.pos)
            .copied()?;
        self.seek(i + 1);
        Some(self.pos)
    }

    /// Event indices of the deaths found so far (all of those before the furthest point reached).
    pub fn deaths(&self) -> &[usize] {
        &self.deaths
    }

    fn apply_next(&mut self) {
        let Some(event) = self.events.get(self.pos) else {
            return;
        };
        self.model.apply(event);
        if self.pos >= self.frontier {
            let died = match event.kind {
                EventKind::StreamEnded {
                    stream,
                    dir: Direction::ServerToClient,
                    ..
                } => self
                    .model
                    .stream(stream)
                    .is_some_and(|s| self.model.fate(s).is_death()),
                _ => false,
            };
            if died {
                self.deaths.push(self.pos);
            }
        }
        self.pos += 1;
        if self.pos > self.frontier {
            self.frontier = self.pos;
            if self.pos.is_multiple_of(self.spacing)
                && self.pos / self.spacing == self.checkpoints.len()
            {
                self.checkpoints.push(self.model.clone());
            }
        }
    }
}
