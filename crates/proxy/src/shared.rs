//! State shared by every connection: the event sink, the configuration, the live exchanges that
//! faults can reach, the "server is down" window and the rule engine.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::ProxyError;
use crate::sink::EventSink;
use crate::{Config, upstream};
use mcpscope_engine::event::{EventKind, StreamId};
use mcpscope_engine::fault::{Fault, Plan, Planner, Trigger};

/// A live exchange that faults can be applied to.
#[derive(Debug)]
struct Live {
    session: Option<String>,
    http_method: String,
    control: mpsc::UnboundedSender<Plan>,
}

/// State shared by every connection.
pub struct Shared {
    pub(crate) sink: EventSink,
    pub(crate) config: Config,
    pub(crate) connector: upstream::Connector,
    pub(crate) next_stream: AtomicU64,
    pub(crate) next_conn: AtomicU64,
    live: Mutex<HashMap<StreamId, Live>>,
    down_until: Mutex<Option<Instant>>,
    planner: RwLock<Option<Arc<dyn Planner>>>,
    /// Calls of resumable deaths kept for a rescue on their resumption (`--rescue`).
    pub(crate) parked: crate::rescue::Parking,
    pub(crate) intercept: crate::intercept::Intercept,
    /// Paths of metadata documents named by rewritten `resource_metadata` URLs.
    pub(crate) metadata_paths: crate::oauth::MetadataPaths,
}

impl Shared {
    /// Fresh state for a proxy reporting to `sink`.
    pub(crate) fn new(config: Config, connector: upstream::Connector, sink: EventSink) -> Self {
        Self {
            sink,
            config,
            connector,
            next_stream: AtomicU64::new(1),
            next_conn: AtomicU64::new(1),
            live: Mutex::new(HashMap::new()),
            down_until: Mutex::new(None),
            planner: RwLock::new(None),
            parked: crate::rescue::Parking::default(),
            intercept: Default::default(),
            metadata_paths: Default::default(),
        }
    }

    /// Sets the rule engine consulted for every request.
    pub fn set_planner(&self, planner: Arc<dyn Planner>) {
        let mut slot = self.planner.write().unwrap_or_else(|poisoned| {
            report(&self.sink, None, &ProxyError::Poisoned("rule engine"));
            self.planner.clear_poison();
            poisoned.into_inner()
        });
        *slot = Some(planner);
    }

    /// Applies a fault to a live exchange at once; the error in words, for a view.
    pub fn apply(&self, stream: StreamId, plan: Plan) -> Result<(), String> {
        self.send_plan(stream, plan).map_err(|e| e.to_string())
    }

    /// Applies a fault to a live exchange at once.
    pub fn send_plan(&self, stream: StreamId, plan: Plan) -> Result<(), ProxyError> {
        let live = self.live();
        let entry = live.get(&stream).ok_or(ProxyError::NotLive(stream))?;
        entry
            .control
            .send(plan)
            .map_err(|_| ProxyError::Ended(stream))
    }

    /// Live exchanges: (id, HTTP method, session).
    pub fn live_streams(&self) -> Vec<(StreamId, String, Option<String>)> {
        let mut out: Vec<_> = self
            .live()
            .iter()
            .map(|(id, l)| (*id, l.http_method.clone(), l.session.clone()))
            .collect();
        out.sort_by_key(|(id, _, _)| *id);
        out
    }

    /// Makes an exchange reachable by faults; they arrive on the returned receiver.
    pub(crate) fn register(
        &self,
        stream: StreamId,
        http_method: &str,
        session: Option<String>,
    ) -> mpsc::UnboundedReceiver<Plan> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.live().insert(
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
    pub(crate) fn unregister(&self, stream: StreamId) {
        self.live().remove(&stream);
    }

    /// The server "dies": every GET stream of the session is reset, and new requests are
    /// refused (reset) for `down`.
    pub(crate) fn server_dies(&self, origin: StreamId, session: Option<&str>, down: Duration) {
        *lock(&self.down_until, "server-down window", &self.sink) = Some(Instant::now() + down);
        for (id, entry) in self.live().iter() {
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

    /// Records a note of the tool's own (shown, never interpreted), e.g. that what follows is
    /// the tool's doing and not a peer's.
    pub fn note(&self, stream: Option<StreamId>, text: impl Into<String>) {
        self.sink.emit(EventKind::Note {
            stream,
            text: text.into(),
        });
    }

    /// Whether requests are refused now (an injected server death).
    pub(crate) fn is_down(&self) -> bool {
        lock(&self.down_until, "server-down window", &self.sink)
            .is_some_and(|until| Instant::now() < until)
    }

    /// The rule engine, if one is set.
    pub(crate) fn planner(&self) -> Option<Arc<dyn Planner>> {
        self.planner
            .read()
            .unwrap_or_else(|poisoned| {
                report(&self.sink, None, &ProxyError::Poisoned("rule engine"));
                self.planner.clear_poison();
                poisoned.into_inner()
            })
            .clone()
    }

    fn live(&self) -> MutexGuard<'_, HashMap<StreamId, Live>> {
        lock(&self.live, "live streams", &self.sink)
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
    let connector = upstream::connector(false).unwrap();
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
                let _held = shared.live.lock();
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
