//! What the replay viewer asks of a cursor, whether the recording is in memory
//! ([`ReplayCursor`]) or read from its file as needed ([`FileCursor`]).

use std::time::Instant;

use chrono::{DateTime, Utc};

use super::cursor::ReplayCursor;
use super::filecursor::FileCursor;
use mcpscope_engine::model::{Model, Retention};

/// A position in a recording and the model there.
pub trait Timeline {
    /// Folds with `retention` from now on; the cursor goes back to the start (seek again).
    fn set_retention(&mut self, retention: Retention);
    /// How many events are applied.
    fn position(&self) -> usize;
    /// Events in the recording, as far as known (all of them once [`Timeline::complete`]).
    fn known_len(&self) -> usize;
    /// Whether the whole recording is known (its length, deaths and end).
    fn complete(&self) -> bool;
    /// Whether the cursor stands after the last event.
    fn at_end(&self) -> bool;
    /// What the status bar should say of the recording meanwhile (`indexing… 42%`), if anything.
    fn note(&self) -> Option<String>;
    /// Whether seeking to `index` is quick now (it is known; otherwise it waits for the index).
    fn reachable(&self, index: usize) -> bool;
    /// Whether seeking to time `t` is quick now.
    fn time_reachable(&self, t: DateTime<Utc>) -> bool;
    /// The model as of the cursor.
    fn model_at(&self) -> &Model;
    /// The time of the last applied event (the first event's before any).
    fn time(&self) -> Option<DateTime<Utc>>;
    /// Moves the model's clock to `now` between events.
    fn advance(&mut self, now: DateTime<Utc>);
    /// Moves the cursor so that exactly `index` events are applied (clamped to the length).
    fn seek(&mut self, index: usize);
    /// [`Timeline::seek`], stopping once `deadline` has passed: whether the cursor got there.
    /// Called again with the same index, it goes on; the model is whole at every stop.
    fn seek_until(&mut self, index: usize, _deadline: Instant) -> bool {
        self.seek(index);
        true
    }
    /// One event forward.
    fn step_forward(&mut self) {
        self.seek(self.position() + 1);
    }
    /// One event back.
    fn step_back(&mut self) {
        self.seek(self.position().saturating_sub(1));
    }
    /// Seeks to just after the last event at or before `t` (at least the first event).
    fn seek_time(&mut self, t: DateTime<Utc>);
    /// [`Timeline::seek_time`], stopping once `deadline` has passed (as
    /// [`Timeline::seek_until`]).
    fn seek_time_until(&mut self, t: DateTime<Utc>, _deadline: Instant) -> bool {
        self.seek_time(t);
        true
    }
    /// Applies every event up to `clock`; returns whether any was applied.
    fn play_to(&mut self, clock: DateTime<Utc>) -> bool;
    /// Jumps to just after the next stream death known; the new position, or None.
    fn next_death(&mut self) -> Option<usize>;
    /// Jumps to just after the previous stream death; the new position, or None.
    fn prev_death(&mut self) -> Option<usize>;
    /// Where [`Timeline::next_death`] goes, when a death already known tells it (None: ask
    /// [`Timeline::next_death`], which may have to look further).
    fn next_death_at(&self) -> Option<usize> {
        None
    }
    /// Where [`Timeline::prev_death`] goes, when a death already known tells it.
    fn prev_death_at(&self) -> Option<usize> {
        None
    }
}

impl Timeline for ReplayCursor {
    fn set_retention(&mut self, retention: Retention) {
        ReplayCursor::set_retention(self, retention);
    }
    fn position(&self) -> usize {
        ReplayCursor::position(self)
    }
    fn known_len(&self) -> usize {
        self.len()
    }
    fn complete(&self) -> bool {
        true
    }
    fn at_end(&self) -> bool {
        ReplayCursor::position(self) >= self.len()
    }
    fn note(&self) -> Option<String> {
        None
    }
    fn reachable(&self, _: usize) -> bool {
        true
    }
    fn time_reachable(&self, _: DateTime<Utc>) -> bool {
        true
    }
    fn model_at(&self) -> &Model {
        ReplayCursor::model_at(self)
    }
    fn time(&self) -> Option<DateTime<Utc>> {
        ReplayCursor::time(self)
    }
    fn advance(&mut self, now: DateTime<Utc>) {
        ReplayCursor::advance(self, now);
    }
    fn seek(&mut self, index: usize) {
        ReplayCursor::seek(self, index);
    }
    fn seek_time(&mut self, t: DateTime<Utc>) {
        ReplayCursor::seek_time(self, t);
    }
    fn play_to(&mut self, clock: DateTime<Utc>) -> bool {
        ReplayCursor::play_to(self, clock)
    }
    fn next_death(&mut self) -> Option<usize> {
        ReplayCursor::next_death(self)
    }
    fn prev_death(&mut self) -> Option<usize> {
        ReplayCursor::prev_death(self)
    }
}

impl Timeline for FileCursor {
    fn set_retention(&mut self, retention: Retention) {
        FileCursor::set_retention(self, retention);
    }
    fn position(&self) -> usize {
        to_usize(FileCursor::position(self))
    }
    fn known_len(&self) -> usize {
        to_usize(FileCursor::known_len(self))
    }
    fn complete(&self) -> bool {
        FileCursor::complete(self)
    }
    fn at_end(&self) -> bool {
        FileCursor::at_end(self)
    }
    fn note(&self) -> Option<String> {
        FileCursor::note(self)
    }
    fn reachable(&self, index: usize) -> bool {
        FileCursor::reachable(self, index as u64)
    }
    fn time_reachable(&self, t: DateTime<Utc>) -> bool {
        FileCursor::time_reachable(self, t)
    }
    fn model_at(&self) -> &Model {
        FileCursor::model_at(self)
    }
    fn time(&self) -> Option<DateTime<Utc>> {
        FileCursor::time(self)
    }
    fn advance(&mut self, now: DateTime<Utc>) {
        FileCursor::advance(self, now);
    }
    fn seek(&mut self, index: usize) {
        FileCursor::seek(self, index as u64);
    }
    fn seek_until(&mut self, index: usize, deadline: Instant) -> bool {
        FileCursor::seek_until(self, index as u64, Some(deadline))
    }
    fn seek_time(&mut self, t: DateTime<Utc>) {
        FileCursor::seek_time(self, t);
    }
    fn seek_time_until(&mut self, t: DateTime<Utc>, deadline: Instant) -> bool {
        FileCursor::seek_time_until(self, t, Some(deadline))
    }
    fn play_to(&mut self, clock: DateTime<Utc>) -> bool {
        FileCursor::play_to(self, clock)
    }
    fn next_death(&mut self) -> Option<usize> {
        FileCursor::next_death(self).map(to_usize)
    }
    fn prev_death(&mut self) -> Option<usize> {
        FileCursor::prev_death(self).map(to_usize)
    }
    fn next_death_at(&self) -> Option<usize> {
        FileCursor::next_death_at(self).map(to_usize)
    }
    fn prev_death_at(&self) -> Option<usize> {
        FileCursor::prev_death_at(self).map(to_usize)
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
