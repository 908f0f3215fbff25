//! State shared by every connection, split by concern: the event sink and the configuration;
//! the ids ([`Ids`]); the upstream connector and the "server is down" window
//! ([`UpstreamState`]); the live exchanges faults can reach and the rule engine
//! ([`FaultControl`]); the rescue's parked calls, the intercept and the OAuth metadata paths.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::ProxyError;
use crate::{Config, upstream};
use mcpscope_engine::event::{EventKind, StreamId};
use mcpscope_engine::fault::{Fault, Plan, Planner, Trigger};
use mcpscope_session::sink::EventSink;

/// A live exchange that faults can be applied to.
#[derive(Debug)]
struct Live {
    session: Option<String>,
    http_method: String,
    control: mpsc::UnboundedSender<Plan>,
}

/// State shared by every connection, one part per concern.
pub struct Shared {
    pub(crate) sink: EventSink,
    pub(crate) config: Config,
    /// The numbers given to connections and exchanges.
    pub(crate) ids: Ids,
    /// How upstream connections are made, and whether the server is "down".
    pub(crate) upstream: UpstreamState,
    /// The live exchanges faults can reach, and the rule engine.
    pub(crate) faults: FaultControl,
    /// Calls of resumable deaths kept for a rescue on their resumption (`--rescue`).
    pub(crate) parked: crate::rescue::Parking,
    /// Requests and responses the intercept holds.
    pub(crate) intercept: crate::intercept::Intercept,
    /// Paths of metadata documents named by rewritten `resource_metadata` URLs.
    pub(crate) metadata_paths: crate::oauth::MetadataPaths,
    /// What every request to `--upstream` is given, worked out once.
    pub(crate) upstream_facts: UpstreamFacts,
}

/// What `--upstream` says for every request, worked out once.
pub(crate) struct UpstreamFacts {
    /// Its origin (`scheme://host[:port]`).
    pub(crate) origin: Option<String>,
    /// Its userinfo as an `Authorization: Basic` value.
    pub(crate) basic: Option<http::HeaderValue>,
    /// Its origin, for OAuth rewrites.
    pub(crate) oauth_origin: Option<mcpscope_engine::wire::oauth::Origin>,
    /// The `Host` it is sent ([`crate::headers::host_of`]).
    pub(crate) host: Option<http::HeaderValue>,
}

impl UpstreamFacts {
    fn of(upstream: &http::Uri) -> Self {
        let text = upstream.to_string();
        Self {
            origin: mcpscope_engine::wire::oauth::Origin::text_of(&text),
            basic: mcpscope_engine::redact::UrlCredentials::of(&text)
                .and_then(|c| http::HeaderValue::from_str(&c.basic()).ok()),
            oauth_origin: crate::oauth::Addresses::upstream_origin(upstream),
            host: crate::headers::host_of(upstream),
        }
    }
}

/// The numbers given to client connections and exchanges, each counting from 1.
pub(crate) struct Ids {
    next_stream: AtomicU64,
    next_conn: AtomicU64,
}

impl Ids {
    /// The next exchange's id.
    pub(crate) fn stream(&self) -> StreamId {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// The next client connection's id.
    pub(crate) fn conn(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }
}

/// How upstream connections are made, and the window in which an injected server death
/// refuses new requests.
pub(crate) struct UpstreamState {
    pub(crate) connector: upstream::Connector,
    down_until: Mutex<Option<Instant>>,
}

impl UpstreamState {
    /// Whether requests are refused now (an injected server death).
    pub(crate) fn is_down(&self, sink: &EventSink) -> bool {
        lock(&self.down_until, "server-down window", sink)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Refuses new requests for `down` from now.
    fn down_for(&self, down: Duration, sink: &EventSink) {
        *lock(&self.down_until, "server-down window", sink) = Some(Instant::now() + down);
    }
}

/// The live exchanges faults can be applied to, and the rule engine that plans them.
#[derive(Default)]
pub(crate) struct FaultControl {
    live: Mutex<BTreeMap<StreamId, Live>>,
    planner: RwLock<Option<Arc<dyn Planner>>>,
}

impl FaultControl {
    /// Makes an exchange reachable by faults; they arrive on the returned receiver.
    pub(crate) fn register(
        &self,
        stream: StreamId,
        http_method: &str,
        session: Option<String>,
        sink: &EventSink,
    ) -> mpsc::UnboundedReceiver<Plan> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.live(sink).insert(
            stream,
            Live {
                session,
                http_method: http_method.to_string(),
                control: tx,
            },
        );
        rx
    }

    /// The exchange has ended: faults no longer reach it.
    pub(crate) fn unregister(&self, stream: StreamId, sink: &EventSink) {
        self.live(sink).remove(&stream);
    }

    /// The rule engine, if one is set.
    pub(crate) fn planner(&self, sink: &EventSink) -> Option<Arc<dyn Planner>> {
        self.planner
            .read()
            .unwrap_or_else(|poisoned| {
                report(sink, None, &ProxyError::Poisoned("rule engine"));
                self.planner.clear_poison();
                poisoned.into_inner()
            })
            .clone()
    }

    fn set_planner(&self, planner: Arc<dyn Planner>, sink: &EventSink) {
        let mut slot = self.planner.write().unwrap_or_else(|poisoned| {
            report(sink, None, &ProxyError::Poisoned("rule engine"));
            self.planner.clear_poison();
            poisoned.into_inner()
        });
        *slot = Some(planner);
    }

    fn send_plan(&self, stream: StreamId, plan: Plan, sink: &EventSink) -> Result<(), ProxyError> {
        let live = self.live(sink);
        let entry = live.get(&stream).ok_or(ProxyError::NotLive(stream))?;
        entry
            .control
            .send(plan)
            .map_err(|_| ProxyError::Ended(stream))
    }

    fn live_streams(&self, sink: &EventSink) -> Vec<(StreamId, String, Option<String>)> {
        let mut out: Vec<_> = self
            .live(sink)
            .iter()
            .map(|(id, l)| (*id, l.http_method.clone(), l.session.clone()))
            .collect();
        out.sort_by_key(|(id, _, _)| *id);
        out
    }

    /// Resets every GET stream of `session` (of every session when `None`) but `origin`.
    fn reset_gets(&self, origin: StreamId, session: Option<&str>, sink: &EventSink) {
        for (id, entry) in self.live(sink).iter() {
            let same_session = session.is_none() || entry.session.as_deref() == session;
            if *id != origin && entry.http_method == "GET" && same_session {
                // A stream ending at this very moment has nothing left to reset.
                let _ = entry.control.send(Plan {
                    fault: Fault::Reset,
                    trigger: Trigger::Now,
                    origin: format!("server-dies on #{origin}"),
                });
            }
        }
    }

    fn live(&self, sink: &EventSink) -> MutexGuard<'_, BTreeMap<StreamId, Live>> {
        lock(&self.live, "live streams", sink)
    }
}

impl Shared {
    /// Fresh state for a proxy reporting to `sink`.
    pub(crate) fn new(config: Config, connector: upstream::Connector, sink: EventSink) -> Self {
        let upstream_facts = UpstreamFacts::of(&config.upstream);
        Self {
            upstream_facts,
            sink,
            config,
            ids: Ids {
                next_stream: AtomicU64::new(1),
                next_conn: AtomicU64::new(1),
            },
            upstream: UpstreamState {
                connector,
                down_until: Mutex::new(None),
            },
            faults: FaultControl::default(),
            parked: crate::rescue::Parking::default(),
            intercept: Default::default(),
            metadata_paths: Default::default(),
        }
    }

    /// Sets the rule engine consulted for every request.
    pub fn set_planner(&self, planner: Arc<dyn Planner>) {
        self.faults.set_planner(planner, &self.sink);
    }

    /// Applies a fault to a live exchange at once; the error in words, for a view.
    pub fn apply(&self, stream: StreamId, plan: Plan) -> Result<(), String> {
        self.send_plan(stream, plan).map_err(|e| e.to_string())
    }

    /// Applies a fault to a live exchange at once.
    pub fn send_plan(&self, stream: StreamId, plan: Plan) -> Result<(), ProxyError> {
        self.faults.send_plan(stream, plan, &self.sink)
    }

    /// Live exchanges: (id, HTTP method, session).
    pub fn live_streams(&self) -> Vec<(StreamId, String, Option<String>)> {
        self.faults.live_streams(&self.sink)
    }

    /// Makes an exchange reachable by faults; they arrive on the returned receiver.
    pub(crate) fn register(
        &self,
        stream: StreamId,
        http_method: &str,
        session: Option<String>,
    ) -> mpsc::UnboundedReceiver<Plan> {
        self.faults
            .register(stream, http_method, session, &self.sink)
    }

    /// The exchange has ended: faults no longer reach it.
    pub(crate) fn unregister(&self, stream: StreamId) {
        self.faults.unregister(stream, &self.sink);
    }

    /// The server "dies": every GET stream of the session is reset, and new requests are
    /// refused (reset) for `down`.
    pub(crate) fn server_dies(&self, origin: StreamId, session: Option<&str>, down: Duration) {
        self.upstream.down_for(down, &self.sink);
        self.faults.reset_gets(origin, session, &self.sink);
    }

    /// Records a note of the tool's own (shown, never interpreted), e.g. that what follows is
    /// the tool's doing and not a peer's.
    pub fn note(&self, stream: Option<StreamId>, text: impl Into<String>) {
        self.sink.emit(EventKind::Note {
            stream,
            text: text.into(),
        });
    }
}

/// Locks `mutex`. A lock poisoned by a panic elsewhere is recovered — every critical section
/// in the proxy is a single insert, remove, take or read, so its data is whole — and the
/// problem is reported (an event and a log line) once, as the poison is cleared.
pub(crate) fn lock<'a, T>(
    mutex: &'a Mutex<T>,
    what: &'static str,
    sink: &EventSink,
) -> MutexGuard<'a, T> {
    mutex.lock().unwrap_or_else(|poisoned| {
        report(sink, None, &ProxyError::Poisoned(what));
        mutex.clear_poison();
        poisoned.into_inner()
    })
}

/// Reports a problem of the proxy itself: a `Note` event (recorded and shown) and a log line.
pub(crate) fn report(sink: &EventSink, stream: Option<StreamId>, problem: &ProxyError) {
    tracing::error!(?stream, "{problem}");
    sink.emit(EventKind::Note {
        stream,
        text: format!("mcpscope: {problem}"),
    });
}

/// State for unit tests, reporting on the returned receiver.
#[cfg(test)]
pub(crate) fn for_tests() -> (
    Shared,
    mpsc::UnboundedReceiver<mcpscope_engine::event::Event>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: "http://127.0.0.1:1/mcp".parse().unwrap(),
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let connector = upstream::connector_with(false, &[]).unwrap();
    (Shared::new(config, connector, EventSink::new(tx)), rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> (
        Shared,
        mpsc::UnboundedReceiver<mcpscope_engine::event::Event>,
    ) {
        for_tests()
    }

    #[test]
    fn a_poisoned_lock_keeps_live_streams_and_is_reported_once() {
        let (shared, mut events) = shared();
        std::thread::scope(|s| {
            let poisoner = s.spawn(|| {
                let _held = shared.faults.live.lock();
                panic!("poisoning the live streams");
            });
            assert!(poisoner.join().is_err());
        });
        let _control = shared.register(5, "GET", None);
        let _other = shared.register(6, "POST", None);
        assert_eq!(shared.live_streams().len(), 2);
        let notes: Vec<_> = std::iter::from_fn(|| events.try_recv().ok())
            .filter(|e| matches!(e.kind, EventKind::Note { .. }))
            .collect();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            matches!(&notes[0].kind, EventKind::Note { text, .. } if text.contains("live streams"))
        );
    }

    #[test]
    fn faults_reach_live_streams_only() {
        let (shared, _events) = shared();
        let plan = Plan {
            fault: Fault::Reset,
            trigger: Trigger::Now,
            origin: "test".into(),
        };
        assert!(matches!(
            shared.send_plan(3, plan.clone()),
            Err(ProxyError::NotLive(3))
        ));
        let control = shared.register(3, "GET", None);
        drop(control);
        assert!(matches!(
            shared.send_plan(3, plan.clone()),
            Err(ProxyError::Ended(3))
        ));
        let mut control = shared.register(4, "GET", None);
        assert!(shared.send_plan(4, plan).is_ok());
        assert!(control.try_recv().is_ok());
        shared.unregister(3);
        shared.unregister(4);
        assert!(shared.live_streams().is_empty());
    }
}
