//! Resumptions: a GET with `Last-Event-ID` taking over the calls of a stream that died, and
//! whether it named the id it should have.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Model, Notice, Verdict, What};
use crate::event::StreamId;

/// A resumption whose `Last-Event-ID` is not the last event id the client received on the
/// stream whose calls wait for it. Whatever the server answers, the client asked for the wrong
/// thing: an older id replays events it has had (or, refused, leaves its calls hanging);
/// another stream's id resumes calls that are not waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeMismatch {
    /// The stream whose calls wait for a resumption (the last one of the session to die with
    /// resumable calls).
    pub waiting: StreamId,
    /// The last event id that stream carried.
    pub expected: String,
    /// What the named id was instead.
    pub kind: MismatchKind,
}

/// What a mismatched `Last-Event-ID` named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MismatchKind {
    /// An earlier id of the waiting stream, or of a stream it resumed.
    Older,
    /// An id another stream carried.
    OtherStream,
    /// An id no stream of the session carried.
    Unknown,
}

impl MismatchKind {
    /// In words, for the views (`an older id`).
    pub fn words(self) -> &'static str {
        match self {
            MismatchKind::Older => "an older id",
            MismatchKind::OtherStream => "another stream's id",
            MismatchKind::Unknown => "an id no stream carried",
        }
    }
}

impl Model {
    /// A GET with `Last-Event-ID: last` (stream `si`, in `session`): it takes over the resumable
    /// calls of the stream that carried `last`, and a mismatch with the id it should have named
    /// is reported.
    pub(super) fn resume(
        &mut self,
        t: DateTime<Utc>,
        si: usize,
        session: usize,
        last: &str,
        out: &mut Vec<Notice>,
    ) {
        let target = self.event_owner.get(&(session, last.to_string())).copied();
        if let Some(mismatch) = self.resume_mismatch(session, last, target) {
            out.push(Notice {
                server: None,
                t,
                what: What::ResumeMismatch {
                    stream: self.streams[si].id,
                    last_event_id: last.to_string(),
                    waiting: mismatch.waiting,
                    expected: mismatch.expected.clone(),
                    mismatch: mismatch.kind,
                },
            });
            self.streams[si].resume_mismatch = Some(mismatch);
        }
        let Some(target) = target else {
            return;
        };
        self.streams[si].resumes = Some(target);
        self.streams[si].last_event_id = None;
        let new_id = self.streams[si].id;
        let Some(&ti) = self.stream_index.get(&target) else {
            return;
        };
        for index in self.streams[ti].calls.clone() {
            let call = &mut self.calls[index];
            if call.owner != target || !matches!(call.verdict, Verdict::Resumable { .. }) {
                continue;
            }
            call.reaction.resume_attempts += 1;
            if call.first_death().is_none() {
                let death = call.verdict.death().copied();
                call.aside_mut().first_death = death;
            }
            self.set_verdict(index, Verdict::Pending, None);
            self.calls[index].owner = new_id;
            self.streams[si].calls.push(index);
            out.push(Notice {
                server: None,
                t,
                what: What::CallResumed {
                    call: self.call_ref(index),
                    stream: new_id,
                    last_event_id: last.to_string(),
                },
            });
        }
    }

    /// How `last` (which `target` carried, if any stream of `session` did) differs from the id
    /// the client should have named. A resumption of a stream whose calls wait (or of a stream
    /// in its chain) should name the last id that stream carried; a resumption of a GET stream
    /// (the standalone listener) its own last id; and while calls wait, an id of another
    /// stream, or of none, resumes nothing that waits. `None` when it is the right id.
    fn resume_mismatch(
        &self,
        session: usize,
        last: &str,
        target: Option<StreamId>,
    ) -> Option<ResumeMismatch> {
        let mut waiting: Vec<&super::Stream> = self
            .calls
            .iter()
            .filter(|c| c.session == session && matches!(c.verdict, Verdict::Resumable { .. }))
            .filter_map(|c| self.stream(c.owner))
            .filter(|s| s.last_event_id.is_some())
            .collect();
        waiting.sort_by_key(|s| std::cmp::Reverse(s.ended.as_ref().map(|end| end.at)));
        waiting.dedup_by_key(|s| s.id);
        let mismatch = |stream: &super::Stream, kind| {
            let expected = stream.last_event_id.clone()?;
            (expected != last).then_some(ResumeMismatch {
                waiting: stream.id,
                expected,
                kind,
            })
        };
        if let Some(target) = target {
            // The waiting stream whose chain holds the named id: it should be that stream's last.
            if let Some(owner) = waiting
                .iter()
                .find(|w| self.resume_chain(w.id).any(|s| s == target))
            {
                return mismatch(owner, MismatchKind::Older);
            }
            // A GET stream resumed for its own sake (the listener): its own last id.
            if let Some(get) = self
                .stream(target)
                .filter(|s| s.method.eq_ignore_ascii_case("GET"))
            {
                return mismatch(get, MismatchKind::Older);
            }
        }
        let newest = waiting.first()?;
        let kind = match target {
            None => MismatchKind::Unknown,
            Some(_) => MismatchKind::OtherStream,
        };
        Some(ResumeMismatch {
            waiting: newest.id,
            expected: newest.last_event_id.clone()?,
            kind,
        })
    }

    /// `stream`, then the stream it resumes, and so on back to the one that first carried the
    /// calls.
    fn resume_chain(&self, stream: StreamId) -> impl Iterator<Item = StreamId> + '_ {
        let mut next = Some(stream);
        let mut left = self.streams.len();
        std::iter::from_fn(move || {
            let current = next.filter(|_| left > 0)?;
            left -= 1;
            next = self.stream(current).and_then(|s| s.resumes);
            Some(current)
        })
    }

    /// A resumption that never reached the upstream leaves the call as it was before it:
    /// waiting for a resumption since its first stream died (the window still counts from that
    /// death). Returns whether it did.
    pub(super) fn resume_unreached(&mut self, si: usize, index: usize) -> bool {
        let stream = &self.streams[si];
        let (Some(target), Some(death)) = (stream.resumes, self.calls[index].first_death()) else {
            return false;
        };
        let last_event_id = stream.request_header("last-event-id").map(str::to_string);
        let retry_ms = self.stream(target).and_then(|s| s.retry_ms);
        self.calls[index].owner = target;
        let verdict = Verdict::Resumable {
            death,
            last_event_id,
            retry_ms,
        };
        self.set_verdict(index, verdict, None);
        true
    }
}
