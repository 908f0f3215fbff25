//! The retention policy: what the model keeps in memory, in one place.
//!
//! Held in full, always: calls still waiting (pending, resumable, or asked for input), and up
//! to [`Retention::keep_calls`] calls that went wrong (orphaned, failed, cancelled, hit by a
//! fault), the newest, besides the recent ones. Held in full while they are recent: everything of the last
//! [`Retention::keep_calls`] calls and streams, within [`Retention::keep_bytes`] of message
//! detail. Older answered calls collapse to a compact row (method, tool, timings, verdict and
//! the event sequence numbers that find their detail in the recording, [`Call::seq`]); past
//! [`Retention::max_rows`] rows they are only counted ([`Evicted`]), the rows of answered calls
//! before those of calls that went wrong. An open stream keeps its
//! newest SSE events and messages, at most [`Retention::stream_detail`] of them and
//! [`Retention::stream_detail_bytes`] of their bodies; all streams together keep at most
//! [`Retention::streams_detail_bytes`], shared evenly when they hold more. What a stream no
//! longer holds is counted ([`super::Stream::dropped_marks`], [`Evicted::messages`]). Every
//! view, live or replayed, folds through the same policy, so they agree.

use super::{Call, Model, Set, Verdict};
use crate::event::Direction;

/// How much of the past the model holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Retention {
    /// Recent calls (and streams) held in full; as many calls that went wrong are, besides.
    pub keep_calls: usize,
    /// Bytes of message detail held, at most (roughly: the size of the JSON text).
    pub keep_bytes: usize,
    /// Compact rows kept for evicted calls; older ones are only counted.
    pub max_rows: usize,
    /// SSE events and messages kept per stream (the newest).
    pub stream_detail: usize,
    /// Bytes of message bodies kept per stream (the newest messages; the newest one always).
    pub stream_detail_bytes: usize,
    /// Bytes of message bodies all streams keep together; past it each stream holding detail
    /// keeps an even share (its newest messages).
    pub streams_detail_bytes: usize,
    /// Notes and fault records kept (the newest).
    pub max_notes: usize,
    /// Sessions kept that are still alive but hold nothing retained (the newest); an ended
    /// session is dropped once no retained stream or call belongs to it, and the session-less
    /// traffic of each server is always kept.
    #[serde(default = "Retention::default_max_sessions")]
    pub max_sessions: usize,
}

impl Retention {
    /// The default number of recent calls held in full.
    pub const DEFAULT_KEEP_CALLS: usize = 2_000;
    /// The default bytes of message detail held.
    pub const DEFAULT_KEEP_BYTES: usize = 64 << 20;
    /// The default bytes of message bodies one stream keeps.
    pub const DEFAULT_STREAM_DETAIL_BYTES: usize = 4 << 20;
    /// The default number of idle live sessions kept.
    pub const DEFAULT_MAX_SESSIONS: usize = 1_024;

    fn default_max_sessions() -> usize {
        Self::DEFAULT_MAX_SESSIONS
    }

    /// The policy of the live and replay views: the last `keep_calls` calls, at most 64 MiB of
    /// detail, three times as many compact rows; a stream keeps 4 MiB of its newest messages,
    /// all streams 64 MiB.
    pub fn window(keep_calls: usize) -> Self {
        Self {
            keep_calls,
            keep_bytes: Self::DEFAULT_KEEP_BYTES,
            max_rows: keep_calls.saturating_mul(3).max(1_000),
            stream_detail: 2_048,
            stream_detail_bytes: Self::DEFAULT_STREAM_DETAIL_BYTES,
            streams_detail_bytes: Self::DEFAULT_KEEP_BYTES,
            max_notes: 10_000,
            max_sessions: keep_calls.max(Self::DEFAULT_MAX_SESSIONS),
        }
    }

    /// Holds no history: only what is still open (headless and JSON output, which print each
    /// fact as it happens and never look back).
    pub fn none() -> Self {
        Self {
            keep_calls: 0,
            keep_bytes: 0,
            max_rows: 0,
            stream_detail: 64,
            stream_detail_bytes: 1 << 20,
            streams_detail_bytes: 16 << 20,
            max_notes: 0,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
        }
    }

    /// Holds everything (tests and small exports that need the whole history).
    pub fn unbounded() -> Self {
        Self {
            keep_calls: usize::MAX,
            keep_bytes: usize::MAX,
            max_rows: usize::MAX,
            stream_detail: usize::MAX,
            stream_detail_bytes: usize::MAX,
            streams_detail_bytes: usize::MAX,
            max_notes: usize::MAX,
            max_sessions: usize::MAX,
        }
    }

    /// Calls that went wrong held in full, at most (the newest): as many as the window.
    fn keep_wrong(&self) -> usize {
        self.keep_calls
    }

    /// Messages held, at most: sixteen per recent call, and room for one stream's detail.
    fn max_messages(&self) -> usize {
        self.keep_calls
            .saturating_mul(16)
            .max(self.stream_detail.saturating_mul(2))
    }

    /// How far past a limit on a count the model may go before it evicts (eviction works in
    /// batches).
    fn slack(limit: usize) -> usize {
        (limit / 8).max(256)
    }

    /// How far past a limit on bytes the model may go before it evicts: an eighth, and at
    /// least 64 KiB (a pass walks every call, stream and message: with a small budget, 256
    /// bytes of slack made nearly every message start one).
    fn byte_slack(limit: usize) -> usize {
        (limit / 8).max(64 << 10)
    }
}

impl Default for Retention {
    fn default() -> Self {
        Self::window(Self::DEFAULT_KEEP_CALLS)
    }
}

/// What the retention policy has taken out of memory so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Evicted {
    /// Answered calls collapsed to compact rows.
    pub compacted: usize,
    /// Calls removed entirely (past the compact rows); only counted.
    pub dropped: usize,
    /// Streams removed.
    pub streams: usize,
    /// Messages removed.
    pub messages: usize,
    /// Sessions removed (ended, or idle past [`Retention::max_sessions`], with nothing
    /// retained).
    #[serde(default)]
    pub sessions: usize,
}

/// The sizes the model had after its last eviction pass: what the policy could not evict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Floor {
    full_calls: usize,
    calls: usize,
    streams: usize,
    detail_bytes: usize,
    messages: usize,
    #[serde(default)]
    sessions: usize,
}

/// Whether `index` is among the ascending `sorted`, read along a walk over ascending indices
/// (a store's [`super::Store::retain`]): what comes before `index` is passed by, so each entry
/// is read once instead of searched for.
fn listed_at(sorted: &mut std::iter::Peekable<impl Iterator<Item = usize>>, index: usize) -> bool {
    while sorted.next_if(|&m| m < index).is_some() {}
    sorted.peek() == Some(&index)
}

impl Call {
    /// Whether the call must be held in full whatever its age: it is still waiting, or its
    /// logical call goes on in a later round.
    fn is_live(&self) -> bool {
        self.verdict.is_open() || self.input_required
    }

    /// Whether the call went wrong (held in full up to [`Retention::keep_calls`] of them).
    fn went_wrong(&self) -> bool {
        !matches!(self.verdict, Verdict::Answered) || self.injected
    }
}

impl Model {
    /// A model that holds the past by `retention`.
    pub fn with_retention(retention: Retention) -> Self {
        Self {
            retention,
            ..Self::default()
        }
    }

    /// The policy in force.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// What the policy has taken out of memory so far.
    pub fn evicted(&self) -> Evicted {
        self.evicted
    }

    /// Bytes of message detail held (roughly).
    pub fn detail_bytes(&self) -> usize {
        self.detail_bytes
    }

    /// Evicts what the policy no longer holds, when a limit is passed by its slack (so that the
    /// work is done in batches, not per event).
    pub(super) fn enforce_retention(&mut self) {
        let r = self.retention;
        let floor = self.floor;
        // The slack grows with the floor too: when what cannot be evicted (open streams'
        // detail) is past a limit, a pass waits for an eighth more, not for one more event.
        let over = |n: usize, limit: usize, floor: usize| {
            let base = limit.max(floor);
            n > base.saturating_add(Retention::slack(base))
        };
        let over_bytes = |n: usize, limit: usize, floor: usize| {
            let base = limit.max(floor);
            n > base.saturating_add(Retention::byte_slack(base))
        };
        if over(self.full_calls, r.keep_calls, floor.full_calls)
            || over(
                self.calls.len(),
                r.keep_calls.saturating_add(r.max_rows),
                floor.calls,
            )
            || over(self.streams.len(), r.keep_calls, floor.streams)
            || over_bytes(self.detail_bytes, r.keep_bytes, floor.detail_bytes)
            || over_bytes(
                self.detail_bytes,
                r.streams_detail_bytes,
                floor.detail_bytes,
            )
            || over(self.messages.len(), r.max_messages(), floor.messages)
            || over(self.sessions.len(), r.max_sessions, floor.sessions)
            || self.ended_sessions > Retention::slack(0)
        {
            self.evict();
            // What could not be evicted (calls still waiting, open streams) is the new floor,
            // so that the next pass waits for the model to grow by the slack again.
            self.floor = Floor {
                full_calls: self.full_calls,
                calls: self.calls.len(),
                streams: self.streams.len(),
                detail_bytes: self.detail_bytes,
                messages: self.messages.len(),
                sessions: self.sessions.len(),
            };
        }
        if self.notes.len() > r.max_notes.saturating_add(Retention::slack(r.max_notes)) {
            let excess = self.notes.len() - r.max_notes;
            self.notes.drain(..excess);
        }
    }

    /// One eviction pass: compact old answered calls, drop rows past the cap, then the
    /// streams and messages nothing held needs.
    fn evict(&mut self) {
        let r = self.retention;
        let next = self.calls.next_index();
        let mut window_start = next.saturating_sub(r.keep_calls);
        // Calls that went wrong are held beyond the window, the newest `keep_wrong()` of them.
        let mut wrong_budget = r.keep_wrong();
        let mut hold_wrong = Set::default();
        for (index, call) in self.calls.indexed().rev() {
            if call.evicted.is_none() && !call.is_live() && call.went_wrong() {
                if wrong_budget == 0 {
                    break;
                }
                wrong_budget -= 1;
                hold_wrong.insert(index);
            }
        }
        let next_stream = self.streams.next_index();
        let mut stream_start = next_stream.saturating_sub(r.keep_calls);
        loop {
            self.compact_before(window_start, &hold_wrong);
            self.drop_unneeded(stream_start);
            let over = self.detail_bytes > r.keep_bytes || self.messages.len() > r.max_messages();
            if !over || (window_start >= next && stream_start >= next_stream) {
                break;
            }
            // Over the byte or message budget: narrow the windows by half of what is left.
            window_start += (next - window_start).div_ceil(2);
            stream_start += (next_stream - stream_start).div_ceil(2);
        }
        if self.detail_bytes > r.streams_detail_bytes {
            self.share_stream_detail();
        }
    }

    /// Trims every stream holding detail to an even share of
    /// [`Retention::streams_detail_bytes`] (what is left of it once the streams under their
    /// share are counted).
    fn share_stream_detail(&mut self) {
        let mut budget = self.retention.streams_detail_bytes;
        let mut sizes: Vec<(usize, usize)> = self
            .streams
            .indexed()
            .filter(|(_, s)| s.detail_bytes > 0)
            .map(|(si, s)| (s.detail_bytes, si))
            .collect();
        // Smallest first: a stream under its share leaves the rest to the larger ones.
        sizes.sort_unstable();
        let mut trimmed = Vec::new();
        let mut left = sizes.len();
        for (bytes, si) in sizes {
            let share = budget / left.max(1);
            left -= 1;
            if bytes <= share {
                budget -= bytes;
                continue;
            }
            trimmed.extend(self.trim_stream_to(si, self.retention.stream_detail, share));
            budget = budget.saturating_sub(self.streams[si].detail_bytes);
        }
        self.remove_messages(trimmed);
    }

    /// Collapses every answered call before `window_start` (except those held) to a compact row.
    fn compact_before(&mut self, window_start: usize, hold: &Set<usize>) {
        let candidates: Vec<usize> = self
            .calls
            .indexed()
            .take_while(|&(index, _)| index < window_start)
            .filter(|&(index, call)| {
                call.evicted.is_none() && !call.is_live() && !hold.contains(&index)
            })
            .map(|(index, _)| index)
            .collect();
        for index in candidates {
            self.compact(index);
        }
    }

    /// Collapses one call to its compact row.
    fn compact(&mut self, index: usize) {
        let empty = self.empty.clone();
        let call = &mut self.calls[index];
        let key = (call.dir == Direction::ClientToServer).then(|| {
            call.retry_key
                .take()
                .unwrap_or_else(|| super::call::retry_key(&call.method, &call.params()))
        });
        let id_key = (call.session, call.dir, call.id_text());
        call.evicted = Some(call.seq);
        call.request = empty;
        call.reply = None;
        self.full_calls -= 1;
        self.evicted.compacted += 1;
        // An answered call is no retry target; the identical calls that went wrong stay listed.
        if let Some(key) = key
            && let Some(list) = self.calls_by_key.get_mut(&key)
        {
            list.retain(|&i| i != index);
            if list.is_empty() {
                self.calls_by_key.remove(&key);
            }
        }
        if let Some(list) = self.calls_by_id.get_mut(&id_key) {
            list.retain(|&i| i != index);
            if list.is_empty() {
                self.calls_by_id.remove(&id_key);
            }
        }
    }

    /// Drops compact rows past the cap, streams that hold nothing needed, and messages whose
    /// stream or call is gone.
    fn drop_unneeded(&mut self, stream_window: usize) {
        let r = self.retention;
        // Compact rows past the cap, oldest first: those of answered calls, then the rest.
        let rows = self.calls.iter().filter(|c| c.evicted.is_some()).count();
        let mut excess = rows.saturating_sub(r.max_rows);
        for wrong_too in [false, true] {
            if excess == 0 {
                break;
            }
            let dropped = self.calls.retain(|_, call| {
                if excess > 0 && call.evicted.is_some() && (wrong_too || !call.went_wrong()) {
                    excess -= 1;
                    false
                } else {
                    true
                }
            });
            self.evicted.dropped += dropped;
        }
        // Streams: kept while open, recent, or carrying a call held in full.
        let calls = &self.calls;
        let needed = |index: usize, stream: &super::Stream| {
            stream.is_open()
                || index >= stream_window
                || stream
                    .calls
                    .iter()
                    .any(|&c| calls.get(c).is_some_and(|c| c.evicted.is_none()))
        };
        let mut gone = Vec::new();
        for (index, stream) in self.streams.indexed() {
            if !needed(index, stream) {
                gone.push(index);
            }
        }
        if !gone.is_empty() {
            let gone_ids: Set<_> = gone.iter().map(|&i| self.streams[i].id).collect();
            for &index in &gone {
                let stream = &self.streams[index];
                let session = stream.session;
                for mark in &stream.marks {
                    if let Some(id) = &mark.id {
                        self.event_owner.remove(&(session, id.clone()));
                    }
                }
                self.stream_index.remove(&stream.id);
            }
            let gone_set: Set<usize> = gone.into_iter().collect();
            self.evicted.streams += self.streams.retain(|i, _| !gone_set.contains(&i));
            for session in self.sessions.iter_mut() {
                session.streams.retain(|id| !gone_ids.contains(id));
                session.streams.shrink_to_fit();
            }
        }
        self.drop_sessions();
        // Calls keep only the streams that are still there.
        for stream in self.streams.iter_mut() {
            let calls = &self.calls;
            stream.calls.retain(|&c| calls.contains(c));
        }
        // Messages: those listed by a kept stream, whose call (if any) is held in full.
        let mut keep: Vec<usize> = Vec::new();
        for stream in self.streams.iter() {
            keep.extend(stream.messages.iter().copied());
        }
        keep.sort_unstable();
        let calls = &self.calls;
        let mut freed = 0;
        let mut listed = keep.iter().copied().peekable();
        let removed = self.messages.retain(|index, message| {
            let call_held = message
                .call
                .is_none_or(|c| calls.get(c).is_some_and(|c| c.evicted.is_none()));
            let kept = listed_at(&mut listed, index) && call_held;
            if !kept {
                freed += message.size;
            }
            kept
        });
        self.detail_bytes -= freed;
        self.evicted.messages += removed;
        if removed == 0 {
            return;
        }
        let messages = &self.messages;
        for stream in self.streams.iter_mut() {
            let mut bytes = 0;
            stream.messages.retain(|&m| match messages.get(m) {
                Some(message) => {
                    bytes += message.size;
                    true
                }
                None => false,
            });
            stream.detail_bytes = bytes;
        }
    }

    /// Drops the sessions nothing retained belongs to: ended ones, and the oldest idle live
    /// ones past [`Retention::max_sessions`]. The session-less traffic of each server stays.
    /// Their entries in the maps keyed by session go with them.
    fn drop_sessions(&mut self) {
        let mut held: Set<usize> = self.streams.iter().map(|s| s.session).collect();
        held.extend(self.calls.iter().map(|c| c.session));
        let keeps = |index: usize, s: &super::Session| {
            index == 0 || s.is_sessionless() || held.contains(&index)
        };
        let ended = self
            .sessions
            .indexed()
            .filter(|&(i, s)| !keeps(i, s) && s.ended.is_some())
            .count();
        let mut over_cap =
            (self.sessions.len() - ended).saturating_sub(self.retention.max_sessions);
        let dropped = self.sessions.retain(|index, s| {
            if keeps(index, s) {
                return true;
            }
            if s.ended.is_some() {
                return false;
            }
            if over_cap > 0 {
                over_cap -= 1;
                return false;
            }
            true
        });
        self.ended_sessions = 0;
        if dropped == 0 {
            return;
        }
        self.evicted.sessions += dropped;
        let sessions = &self.sessions;
        self.session_index.retain(|_, i| sessions.contains(*i));
        self.tasks.retain(|(i, _), _| sessions.contains(*i));
        self.event_owner.retain(|(i, _), _| sessions.contains(*i));
        self.calls_by_id
            .retain(|(i, _, _), _| sessions.contains(*i));
        self.legacy.forget_sessions(|i| sessions.contains(i));
    }

    /// A rough estimate of the heap this model holds (its items, their headers and strings,
    /// message bodies as text), for budgets such as the replay viewer's checkpoints.
    pub fn approx_heap(&self) -> usize {
        const CALL_EXTRA: usize = 80;
        const STREAM_EXTRA: usize = 600;
        const MESSAGE_EXTRA: usize = 40;
        const SESSION_EXTRA: usize = 400;
        const TOOL: usize = 160;
        let tools: usize = self.sessions.iter().map(|s| s.tools.len()).sum();
        let items = self.calls.len() * (std::mem::size_of::<super::Call>() + CALL_EXTRA)
            + self.streams.len() * (std::mem::size_of::<super::Stream>() + STREAM_EXTRA)
            + self.messages.len() * (std::mem::size_of::<super::MessageRec>() + MESSAGE_EXTRA)
            + self.sessions.len() * (std::mem::size_of::<super::Session>() + SESSION_EXTRA)
            + tools * TOOL;
        // Spare room in the collections.
        (items + self.detail_bytes) * 5 / 4
    }

    /// Trims a stream's SSE events and messages to the newest [`Retention::stream_detail`]
    /// and [`Retention::stream_detail_bytes`] (messages of calls held in full stay), once it
    /// holds twice as many or twice as much.
    pub(super) fn trim_stream(&mut self, si: usize) {
        let r = self.retention;
        let stream = &mut self.streams[si];
        if stream.marks.len() > r.stream_detail.saturating_mul(2) {
            let session = stream.session;
            let excess = stream.marks.len() - r.stream_detail;
            for mark in stream.marks.drain(..excess) {
                if let Some(id) = mark.id {
                    self.event_owner.remove(&(session, id));
                }
            }
            stream.dropped_marks += excess as u64;
        }
        if stream.messages.len() <= r.stream_detail.saturating_mul(2)
            && stream.detail_bytes <= r.stream_detail_bytes.saturating_mul(2)
        {
            return;
        }
        let trimmed = self.trim_stream_to(si, r.stream_detail, r.stream_detail_bytes);
        self.remove_messages(trimmed);
    }

    /// Takes a stream's oldest messages off it until it lists at most `count` of them and
    /// `bytes` of their bodies (its newest message always stays, and so do messages of calls
    /// held in full), with the SSE events up to the last one that carried a message taken;
    /// returns the messages taken, in order, for [`Model::remove_messages`].
    fn trim_stream_to(&mut self, si: usize, count: usize, bytes: usize) -> Vec<usize> {
        let (calls, messages) = (&self.calls, &self.messages);
        let held = |m: usize| {
            messages
                .get(m)
                .and_then(|rec| rec.call)
                .and_then(|c| calls.get(c))
                .is_some_and(|c| c.evicted.is_none())
        };
        let size = |m: usize| messages.get(m).map_or(0, |rec| rec.size);
        let stream = &mut self.streams[si];
        // The newest messages that fit both budgets (the newest one whatever its size).
        let mut kept_bytes = 0;
        let mut first_kept = stream.messages.len();
        for (kept, (position, &m)) in stream.messages.iter().enumerate().rev().enumerate() {
            let weight = size(m);
            if kept > 0 && (kept >= count || kept_bytes + weight > bytes) {
                break;
            }
            kept_bytes += weight;
            first_kept = position;
        }
        let mut trimmed: Vec<usize> = Vec::new();
        let mut position = 0;
        stream.messages.retain(|&m| {
            position += 1;
            if position > first_kept || held(m) {
                return true;
            }
            trimmed.push(m);
            false
        });
        if trimmed.is_empty() {
            return trimmed;
        }
        let freed: usize = trimmed.iter().map(|&m| size(m)).sum();
        stream.detail_bytes = stream.detail_bytes.saturating_sub(freed);
        // The events that carried the messages taken go too (and those before them).
        let carried = |mark: &super::Mark| {
            mark.message
                .is_some_and(|m| trimmed.binary_search(&m).is_ok())
        };
        if let Some(last) = stream.marks.iter().rposition(carried) {
            let session = stream.session;
            for mark in stream.marks.drain(..=last) {
                if let Some(id) = mark.id {
                    self.event_owner.remove(&(session, id));
                }
            }
            stream.dropped_marks += last as u64 + 1;
        }
        trimmed
    }

    /// Removes the messages `trimmed` (in order) from the model, counting them evicted.
    fn remove_messages(&mut self, trimmed: Vec<usize>) {
        if trimmed.is_empty() {
            return;
        }
        let mut trimmed = trimmed;
        trimmed.sort_unstable();
        let mut freed = 0;
        let mut going = trimmed.iter().copied().peekable();
        let removed = self.messages.retain(|index, message| {
            let gone = listed_at(&mut going, index);
            if gone {
                freed += message.size;
            }
            !gone
        });
        self.detail_bytes -= freed;
        self.evicted.messages += removed;
    }
}
