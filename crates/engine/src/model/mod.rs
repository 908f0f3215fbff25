//! The pure session model: a deterministic fold over [`Event`]s.
//!
//! It imports no I/O. Time comes from the events (and from `now` arguments for timers), so the
//! live view, a replay and a test that feeds the same events reach the same state.

pub mod body;
pub mod call;
pub mod challenge;
mod fate;
mod fold;
pub mod legacy;
pub mod listen;
pub mod name;
pub mod notice;
mod pairs;
pub mod process;
mod query;
mod reshare;
mod resume;
pub mod retention;
pub mod session;
pub mod stats;
pub mod store;
pub mod stream;
pub mod task;
pub mod verdict;

/// The model's own maps and sets. Their keys come from the traffic (stream ids, JSON-RPC ids,
/// session ids, names) and are looked up several times per event: hashed with foldhash, seeded
/// at random per process, instead of SipHash, which cost several times as much per lookup.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`Map`].
pub(crate) type Set<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

use std::collections::{BTreeSet, VecDeque};

use chrono::{DateTime, Utc};

pub use body::Body;
pub use call::{Aside, Call, Progress, Reaction};
pub use fate::Fate;
pub use listen::{Subscription, SubscriptionState};
pub use name::{Name, Names};
pub use notice::{CallRef, Notice, What};
pub use process::{Exit, Process};
pub use resume::{MismatchKind, ResumeMismatch};
pub use retention::{Evicted, Retention};
pub use session::{Session, SessionEnd, ToolInfo};
pub use store::Store;
pub use stream::{End, Mark, Stream};
pub use task::{Operation, StepKind, Task, TaskStatus, TaskStep};
pub use verdict::{Death, OrphanCause, RESUME_GRACE_MS, Verdict};

use crate::event::{Direction, Event, StreamId};

/// One JSON-RPC message as the model keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MessageRec {
    /// When it was seen.
    pub at: DateTime<Utc>,
    /// The stream it travelled on.
    pub stream: StreamId,
    /// Who sent it.
    pub dir: Direction,
    /// The message (one element of a batch), or the raw text of an invalid one as a JSON
    /// string; kept as text, shared between copies of the model, parsed when read.
    pub body: Body,
    /// Why it is invalid, if it is.
    pub invalid: Option<String>,
    /// The SSE event id it came with.
    pub sse_id: Option<String>,
    /// The call it belongs to.
    pub call: Option<usize>,
    /// Its rough size as JSON text, for the retention policy's byte budget.
    pub size: usize,
}

impl MessageRec {
    /// A short line: `→ tools/call id=3`, `← result id=3`, `← notifications/progress`.
    pub fn summary(&self) -> String {
        use crate::wire::jsonrpc::{Kind, classify, id_text};
        let arrow = match self.dir {
            Direction::ClientToServer => "→",
            Direction::ServerToClient => "←",
        };
        if let Some(reason) = &self.invalid {
            return format!("{arrow} invalid: {reason}");
        }
        match classify(&self.body.value()) {
            Kind::Request { id, method, .. } => format!("{arrow} {method} id={}", id_text(id)),
            Kind::Notification { method, .. } => format!("{arrow} {method}"),
            Kind::Result { id, .. } => format!("{arrow} result id={}", id_text(id)),
            Kind::Error { id, .. } => format!("{arrow} error id={}", id_text(id)),
            Kind::Invalid(reason) => format!("{arrow} invalid: {reason}"),
        }
    }
}

/// What the proxy said of itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProxyInfo {
    /// Listen address.
    pub listen: String,
    /// Upstream URL ([`FORWARD_PROXY_UPSTREAM`] for a forward proxy).
    pub upstream: String,
}

/// What the proxy's start names as its upstream in forward-proxy mode.
pub const FORWARD_PROXY_UPSTREAM: &str = "(forward proxy)";

impl ProxyInfo {
    /// Whether the proxy is a forward proxy (`--forward`): each request names its own server.
    pub fn is_forward(&self) -> bool {
        self.upstream == FORWARD_PROXY_UPSTREAM
    }
}

/// A `server/discover` that failed, waiting to learn whether the client falls back to
/// `initialize`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct FailedProbe {
    index: usize,
    /// The probe as notices name it (the call itself may be gone by then, under retention).
    call: CallRef,
    error: String,
    elapsed_ms: i64,
    due: DateTime<Utc>,
}

/// Counts for a status bar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Sessions with traffic.
    pub sessions: usize,
    /// Streams still open.
    pub open_streams: usize,
    /// Calls pending or resumable.
    pub pending: usize,
    /// Calls orphaned.
    pub orphaned: usize,
    /// Faults injected.
    pub faults: usize,
}

/// Exchanges through the forward proxy that were not MCP, or tunnelled blind: only counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unobserved {
    /// How many.
    pub exchanges: u64,
    /// Their bytes, both ways.
    pub bytes: u64,
}

/// The whole state.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Model {
    /// Sessions by their global index (the retention policy drops those nothing retained
    /// belongs to); index 0 is the session-less traffic.
    pub sessions: Store<Session>,
    /// Streams in the order they opened (those the retention policy keeps).
    pub streams: Store<Stream>,
    /// Calls in the order they started (those the retention policy keeps).
    pub calls: Store<Call>,
    /// Messages, in order (those the retention policy keeps).
    pub messages: Store<MessageRec>,
    /// The proxy's own description, if the recording has it.
    pub proxy: Option<ProxyInfo>,
    /// Notes and faults, in order: (time, stream, text).
    pub notes: Vec<(DateTime<Utc>, Option<StreamId>, String)>,
    /// Events folded so far.
    pub events_applied: u64,
    /// Time of the last event folded.
    pub last_t: Option<DateTime<Utc>>,
    /// Exchanges through the forward proxy that were not MCP (counted, never shown in detail).
    #[serde(default)]
    pub unobserved: Unobserved,
    /// The latest time the model has reached: the last event's, or a later [`Model::advance`].
    clock: Option<DateTime<Utc>>,
    /// Resumable calls by the end of their resumption window: (deadline, call index).
    resume_due: BTreeSet<(DateTime<Utc>, usize)>,
    /// Task operations by the end of their task's ttl: (deadline, call index).
    #[serde(default)]
    task_due: BTreeSet<(DateTime<Utc>, usize)>,
    /// Task operations by (session, task id).
    #[serde(with = "pairs", default)]
    tasks: Map<(usize, String), usize>,
    stream_index: Map<StreamId, usize>,
    /// Sessions by (server, session id).
    #[serde(with = "pairs")]
    session_index: Map<(Option<String>, String), usize>,
    #[serde(with = "pairs")]
    event_owner: Map<(usize, String), StreamId>,
    #[serde(with = "pairs")]
    calls_by_id: Map<(usize, Direction, String), Vec<usize>>,
    calls_by_key: Map<String, Vec<usize>>,
    failed_probes: VecDeque<FailedProbe>,
    legacy: legacy::Legacy,
    counts: Counts,
    retention: Retention,
    evicted: Evicted,
    floor: retention::Floor,
    /// Bytes of message detail held ([`MessageRec::size`] summed).
    detail_bytes: usize,
    /// Sessions that ended since the last eviction pass (one drops them once enough have).
    #[serde(default)]
    ended_sessions: usize,
    /// Tool definitions as `tools/list` gave them, shared by every session that lists the same
    /// one (most sessions of a server list the same tools).
    #[serde(skip)]
    tool_texts: Set<Body>,
    /// Calls held in full (not collapsed to compact rows).
    full_calls: usize,
    /// The shared empty message that evicted calls point their request at.
    empty: Body,
    /// The methods, tools and revisions the calls name, each held once (a model read back
    /// starts sharing anew).
    #[serde(skip)]
    names: Names,
    /// The origin of [`Model::proxy`]'s upstream, read once per upstream (every exchange of
    /// the proxy names it); a model read back reads it anew.
    #[serde(skip)]
    upstream_origin: Option<(String, Option<String>)>,
}

impl Model {
    /// An empty model, with the default [`Retention`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds every event in order; returns the notices.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> (Self, Vec<Notice>) {
        let mut model = Self::new();
        let mut notices = Vec::new();
        for event in events {
            notices.extend(model.apply(event));
        }
        (model, notices)
    }

    /// A stream by id.
    pub fn stream(&self, id: StreamId) -> Option<&Stream> {
        self.stream_index.get(&id).map(|&i| &self.streams[i])
    }

    /// The session a stream belongs to.
    pub fn session_of(&self, stream: &Stream) -> &Session {
        &self.sessions[stream.session]
    }

    /// Whether readable lines name their server (`mcpscope_export::headless::line_for`): the feed is a forward
    /// proxy's, which observes many servers.
    pub fn names_servers(&self) -> bool {
        self.proxy.as_ref().is_some_and(ProxyInfo::is_forward)
    }

    /// Counts for a status bar.
    pub fn counts(&self) -> Counts {
        Counts {
            sessions: self
                .sessions
                .iter()
                .filter(|s| !s.streams.is_empty())
                .count(),
            ..self.counts
        }
    }

    /// What `tools/list` said of a tool in this session (another session's listing does not
    /// speak for it).
    pub fn tool_info(&self, session: usize, tool: &str) -> Option<&ToolInfo> {
        self.sessions.get(session).and_then(|s| s.tools.get(tool))
    }

    /// The 0-based sequence number of the event being folded (the recording's event order).
    pub(crate) fn seq(&self) -> u64 {
        self.events_applied.saturating_sub(1)
    }

    /// The latest time the model has reached: the last event's, or a later [`Model::advance`].
    pub fn clock(&self) -> Option<DateTime<Utc>> {
        self.clock
    }

    /// Moves the model's clock forward to `now` (never back). A resumable call whose window
    /// ([`Verdict::resume_deadline`]) has closed by then becomes an orphan, dated when the window
    /// closed. [`Model::apply`] calls it with each event's time; a live view calls it with the
    /// wall clock between events. The state reached at a time is the same however time got
    /// there: one step, many ticks, or the events themselves.
    pub fn advance(&mut self, now: DateTime<Utc>) -> Vec<Notice> {
        if self.clock.is_some_and(|clock| now <= clock) {
            return Vec::new();
        }
        self.clock = Some(now);
        let mut notices = Vec::new();
        while let Some(probe) = self.failed_probes.front() {
            if probe.due > now {
                break;
            }
            if let Some(probe) = self.failed_probes.pop_front() {
                notices.push(Notice {
                    server: None,
                    t: probe.due,
                    what: What::CallFailed {
                        call: probe.call,
                        error: probe.error,
                        elapsed_ms: probe.elapsed_ms,
                    },
                });
            }
        }
        while let Some(&(deadline, index)) = self.resume_due.first() {
            if deadline > now {
                break;
            }
            self.resume_due.pop_first();
            if let Some(death) = self.calls[index].verdict.death().copied() {
                self.orphan(
                    index,
                    OrphanCause::ResumeFailed,
                    death,
                    deadline,
                    &mut notices,
                );
            }
        }
        while let Some(&(deadline, index)) = self.task_due.first() {
            if deadline > now {
                break;
            }
            self.task_due.pop_first();
            self.task_expiry_due(deadline, index, &mut notices);
        }
        self.name_servers(&mut notices);
        notices
    }

    /// The newest call a notice's [`CallRef`] names (server, session, JSON-RPC id and method),
    /// if the model still holds it.
    pub fn call_by_ref(&self, call: &CallRef) -> Option<&Call> {
        self.calls.iter().rev().find(|c| {
            *c.method == *call.method
                && self
                    .sessions
                    .get(c.session)
                    .is_some_and(|s| s.id == call.session && s.origin == call.server)
                && c.id.value() == call.request_id
        })
    }

    /// Names the server of each notice that does not name one yet: its call's, or its
    /// stream's.
    fn name_servers(&self, notices: &mut [Notice]) {
        for notice in notices.iter_mut().filter(|n| n.server.is_none()) {
            notice.server = match notice.what.call() {
                Some(call) => call.server.clone(),
                None => notice
                    .what
                    .stream()
                    .and_then(|id| self.stream(id))
                    .and_then(|s| s.origin.clone()),
            };
        }
    }

    fn call_ref(&self, index: usize) -> CallRef {
        let call = &self.calls[index];
        CallRef {
            session: self.sessions[call.session].id.clone(),
            server: self.sessions[call.session].origin.clone(),
            request_id: call.id.value(),
            method: call.method.to_string(),
            tool: call.tool.as_deref().map(str::to_string),
            task: call
                .task()
                .or_else(|| call.about_task().and_then(|op| self.calls.get(op)?.task()))
                .map(|task| task.id.clone()),
        }
    }
}
