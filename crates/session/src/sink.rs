//! Where the taps send their facts: an unbounded channel, so the proxy never waits and nothing
//! is dropped. The sink also keeps the ledger of open exchanges: every `stream_opened` gets
//! exactly one `server_to_client` `stream_ended` (a second end of the same response is not
//! sent), and at shutdown every exchange still open is ended and the sink is sealed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::pace::Backlog;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::mpsc::UnboundedSender;

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg, StreamId};
use mcpscope_engine::wire::mirror::{self, MirroredOwned};
use mcpscope_engine::wire::observe;

/// The `detail` of the ends recorded for exchanges still open at shutdown.
pub const SHUTDOWN: &str = "shutdown";

/// Response bytes passed to the client so far, kept up to date by the exchange's tap.
pub type Passed = Arc<AtomicU64>;

/// What a sink sends to the hub: an event, or one whose JSON-RPC message is left for the hub to
/// parse. The forwarding path then never parses what nothing on it reads; the hub turns each
/// fact into the very events an eager sink would have sent, stamped when they were observed.
#[derive(Debug)]
pub enum Fact {
    /// An event as observed.
    Event(Event),
    /// A message's bytes observed at `t`: a `message` or an `invalid_message` once parsed.
    Message {
        /// When it was observed.
        t: DateTime<Utc>,
        /// Exchange id.
        stream: StreamId,
        /// Who sent it.
        dir: Direction,
        /// Its bytes (a whole body).
        bytes: Bytes,
        /// A request's mirror headers, checked against its body once parsed (a mismatch is
        /// reported after the message).
        mirrored: Option<Box<MirroredOwned>>,
    },
    /// An `sse_event` whose data is a message left unparsed: the event, then its message.
    SseMessage(Event),
    /// A `stream_opened` or `response_head` whose headers are still a map: the event, its
    /// headers as text pairs.
    Headed {
        /// The event, its headers empty.
        event: Event,
        /// Its headers.
        headers: http::HeaderMap,
    },
}

impl Fact {
    /// What the fact weighs in the backlog, as the events it becomes would.
    pub fn weight(&self) -> usize {
        match self {
            Fact::Event(event) | Fact::SseMessage(event) | Fact::Headed { event, .. } => {
                event.kind.weight()
            }
            Fact::Message { bytes, .. } => bytes.len(),
        }
    }

    /// The event it is, or begins with, when it is already one.
    fn kind(&self) -> Option<&EventKind> {
        match self {
            Fact::Event(event) | Fact::SseMessage(event) | Fact::Headed { event, .. } => {
                Some(&event.kind)
            }
            Fact::Message { .. } => None,
        }
    }

    /// The events the fact stands for, in order (one, or an SSE event and its message).
    pub fn into_events(self, mut each: impl FnMut(Event)) {
        match self {
            Fact::Event(event) => each(event),
            Fact::Message {
                t,
                stream,
                dir,
                bytes,
                mirrored,
            } => {
                let message = observe::message(stream, dir, &bytes);
                let mismatch = mirrored
                    .zip(observe::message_body(&message))
                    .and_then(|(sent, body)| mirror::report(stream, sent.borrowed(), body));
                each(Event::at(t, message));
                if let Some(mismatch) = mismatch {
                    each(Event::at(t, mismatch));
                }
            }
            Fact::Headed { mut event, headers } => {
                if let EventKind::StreamOpened { headers: list, .. }
                | EventKind::ResponseHead { headers: list, .. } = &mut event.kind
                {
                    *list = header_list(&headers);
                }
                each(event);
            }
            Fact::SseMessage(event) => {
                let t = event.t;
                let message = sse_message(&event.kind);
                each(event);
                if let Some(message) = message {
                    each(Event::at(t, message));
                }
            }
        }
    }
}

impl From<Event> for Fact {
    fn from(event: Event) -> Self {
        Fact::Event(event)
    }
}

/// The message a response's SSE event carries in its data (an `invalid_message` for data that
/// is not one); nothing for another kind of event.
pub(crate) fn sse_message(kind: &EventKind) -> Option<EventKind> {
    match kind {
        EventKind::SseEvent { stream, data, .. } => Some(observe::message_text(
            *stream,
            Direction::ServerToClient,
            data,
        )),
        _ => None,
    }
}

/// Where a sink's facts go: to a receiver of events (each parsed at once), or to the hub.
#[derive(Debug, Clone)]
enum Route {
    Events(UnboundedSender<Event>),
    Facts(UnboundedSender<Fact>),
}

/// The exchanges opened and not yet ended; once sealed, nothing more is sent.
#[derive(Debug, Default)]
struct Ledger {
    open: BTreeMap<StreamId, Passed>,
    sealed: bool,
}

/// Timestamps facts and sends them on.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: Route,
    ledger: Arc<Mutex<Ledger>>,
    backlog: Option<Backlog>,
    /// Set on a holding sink ([`EventSink::holding`]): what it is given waits here.
    held: Option<HeldEvents>,
}

/// What a holding sink was given, not yet sent ([`EventSink::holding`]).
#[derive(Debug, Clone, Default)]
pub struct HeldEvents(Arc<Mutex<Vec<EventKind>>>);

impl HeldEvents {
    fn push(&self, kind: EventKind) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| {
                self.0.clear_poison();
                poisoned.into_inner()
            })
            .push(kind);
    }

    /// Takes what was held so far, in order.
    pub fn take(&self) -> Vec<EventKind> {
        let mut held = self.0.lock().unwrap_or_else(|poisoned| {
            self.0.clear_poison();
            poisoned.into_inner()
        });
        std::mem::take(&mut *held)
    }
}

impl EventSink {
    /// A sink sending events into `tx`, every message parsed as it is observed.
    pub fn new(tx: UnboundedSender<Event>) -> Self {
        Self::routed(Route::Events(tx))
    }

    /// A sink sending facts to the hub ([`crate::hub::Hub::input`]): messages that nothing on
    /// the forwarding path reads are parsed there.
    pub fn to_hub(tx: UnboundedSender<Fact>) -> Self {
        Self::routed(Route::Facts(tx))
    }

    fn routed(tx: Route) -> Self {
        Self {
            tx,
            ledger: Arc::default(),
            backlog: None,
            held: None,
        }
    }

    /// A sink that sends nothing: what it is given waits in the returned [`HeldEvents`] until
    /// someone takes it and emits it (changed or not) through this sink. For a response the
    /// intercept holds: its events are recorded as the client is then sent them. The exchange
    /// stays open in the ledger meanwhile (a shutdown ends it).
    pub fn holding(&self) -> (Self, HeldEvents) {
        let held = HeldEvents::default();
        let sink = Self {
            tx: self.tx.clone(),
            ledger: self.ledger.clone(),
            backlog: self.backlog.clone(),
            held: Some(held.clone()),
        };
        (sink, held)
    }

    /// The same sink, counting what it sends in `backlog` (which the receiver releases).
    pub fn with_backlog(mut self, backlog: Backlog) -> Self {
        self.backlog = Some(backlog);
        self
    }

    /// Whether the receiver is behind by more than [`Backlog::LIMIT`]: taps read no more of
    /// their upstreams until it catches up.
    pub fn backlogged(&self) -> bool {
        self.backlog
            .as_ref()
            .is_some_and(|b| b.bytes() > Backlog::LIMIT)
    }

    fn send(&self, kind: EventKind) {
        self.send_fact(Fact::Event(Event::now(kind)));
    }

    fn send_fact(&self, fact: Fact) {
        if let Some(backlog) = &self.backlog {
            backlog.add(fact.weight());
        }
        match &self.tx {
            Route::Facts(tx) => {
                let _ = tx.send(fact);
            }
            Route::Events(tx) => fact.into_events(|event| {
                let _ = tx.send(event);
            }),
        }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // The ledger's sections are single inserts and removes: a poisoned one is whole.
        self.ledger.lock().unwrap_or_else(|poisoned| {
            self.ledger.clear_poison();
            poisoned.into_inner()
        })
    }

    /// Sends a fact observed now. A closed receiver (shutting down) is not an error; a second
    /// end of an exchange's response, or anything after [`EventSink::seal`], is not sent.
    pub fn emit(&self, kind: EventKind) {
        self.route(Fact::Event(Event::now(kind)));
    }

    /// Sends a `stream_opened` or `response_head` observed now whose headers are `headers`:
    /// the hub turns them into the event's text pairs.
    pub fn emit_headed(&self, kind: EventKind, headers: http::HeaderMap) {
        self.route(Fact::Headed {
            event: Event::now(kind),
            headers,
        });
    }

    fn route(&self, fact: Fact) {
        if let Some(held) = &self.held {
            fact.into_events(|event| held.push(event.kind));
            return;
        }
        let mut ledger = self.ledger();
        if ledger.sealed {
            return;
        }
        match fact.kind() {
            Some(
                EventKind::StreamOpened { stream, .. } | EventKind::ProcessStarted { stream, .. },
            ) => {
                ledger.open.insert(*stream, Passed::default());
            }
            Some(EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                ..
            }) if ledger.open.remove(stream).is_none() => {
                tracing::debug!("stream #{stream}: a second end is not recorded");
                return;
            }
            _ => {}
        }
        // Sent under the lock: an end recorded by `seal` is the exchange's last event.
        self.send_fact(fact);
    }

    /// Sends the message of a whole body observed now, as its bytes: parsed by the hub (at once
    /// by a sink of events, or a holding one) into a `message` or an `invalid_message`; a
    /// request's `mirrored` headers are checked against it there too.
    pub fn emit_message(
        &self,
        stream: StreamId,
        dir: Direction,
        bytes: Bytes,
        mirrored: Option<MirroredOwned>,
    ) {
        self.route(Fact::Message {
            t: Event::stamp(),
            stream,
            dir,
            bytes,
            mirrored: mirrored.map(Box::new),
        });
    }

    /// Sends an `sse_event` observed now whose data is a message left unparsed
    /// ([`observe::SeenEvent::deferred`]): the hub reports its message after it.
    pub fn emit_sse_message(&self, kind: EventKind) {
        self.route(Fact::SseMessage(Event::now(kind)));
    }

    /// The byte counter of an open exchange's response (for the end recorded at shutdown).
    pub fn passed(&self, stream: StreamId) -> Option<Passed> {
        self.ledger().open.get(&stream).cloned()
    }

    /// Whether an exchange has been opened and not yet ended.
    pub fn is_open(&self, stream: StreamId) -> bool {
        self.ledger().open.contains_key(&stream)
    }

    /// Ends every open exchange (`cancelled` by the client side, detail [`SHUTDOWN`]) and
    /// seals the sink: nothing sent afterwards is recorded. Returns how many were ended.
    pub fn seal(&self) -> usize {
        let mut ledger = self.ledger();
        if ledger.sealed {
            return 0;
        }
        ledger.sealed = true;
        // In the order they were opened.
        let open: Vec<_> = std::mem::take(&mut ledger.open).into_iter().collect();
        for (stream, passed) in &open {
            self.send(EventKind::StreamEnded {
                stream: *stream,
                dir: Direction::ServerToClient,
                how: EndHow::Cancelled,
                leg: Leg::Client,
                bytes: passed.load(Ordering::Relaxed),
                detail: Some(SHUTDOWN.into()),
            });
        }
        open.len()
    }
}

/// Headers as (name, value) text pairs, as they are (secrets are hidden later, by the hub's
/// redaction policy, before anything is recorded or shown).
pub fn header_list(headers: &http::HeaderMap) -> Vec<mcpscope_engine::event::Header> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                mcpscope_engine::wire::lossy_text(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_listed_as_they_are() {
        let mut h = http::HeaderMap::new();
        h.insert(
            "authorization",
            http::HeaderValue::from_static("Bearer abc.def"),
        );
        h.insert(
            "x-bin",
            http::HeaderValue::from_bytes(b"a\xffb").expect("value"),
        );
        let list = header_list(&h);
        assert_eq!(list[0], ("authorization".into(), "Bearer abc.def".into()));
        assert_eq!(list[1], ("x-bin".into(), "a\u{fffd}b".into()));
    }

    fn opened(stream: StreamId) -> EventKind {
        EventKind::StreamOpened {
            stream,
            conn: 1,
            method: "POST".into(),
            path: "/mcp".into(),
            headers: Vec::new(),
            origin: None,
        }
    }

    fn ended(stream: StreamId, dir: Direction) -> EventKind {
        EventKind::StreamEnded {
            stream,
            dir,
            how: EndHow::Eof,
            leg: Leg::Upstream,
            bytes: 0,
            detail: None,
        }
    }

    #[test]
    fn each_response_ends_once_and_the_seal_ends_the_rest() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = EventSink::new(tx);
        sink.emit(opened(1));
        sink.emit(opened(2));
        sink.emit(ended(1, Direction::ClientToServer));
        sink.emit(ended(1, Direction::ServerToClient));
        sink.emit(ended(1, Direction::ServerToClient));
        if let Some(passed) = sink.passed(2) {
            passed.store(7, Ordering::Relaxed);
        }
        assert!(sink.is_open(2) && !sink.is_open(1));
        assert_eq!(sink.seal(), 1);
        sink.emit(ended(2, Direction::ServerToClient));
        sink.emit(opened(3));
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(events.len(), 5, "{events:?}");
        assert!(matches!(
            &events[4].kind,
            EventKind::StreamEnded { stream: 2, how: EndHow::Cancelled, leg: Leg::Client, bytes: 7, detail: Some(d), .. } if d == SHUTDOWN
        ));
    }

    #[test]
    fn facts_for_the_hub_become_the_events_an_eager_sink_sends() {
        let sse = |data: &str| mcpscope_engine::fixtures::sse_data(1, data);
        let request = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        let drive = |sink: &EventSink| {
            sink.emit(opened(1));
            let sent = mirror::Mirrored {
                method: Some("tools/list"),
                ..Default::default()
            };
            let mirrored = Some(MirroredOwned::of(sent));
            sink.emit_message(1, Direction::ClientToServer, request.clone(), mirrored);
            let broken = Bytes::from_static(b"{broken");
            sink.emit_message(1, Direction::ClientToServer, broken, None);
            sink.emit_sse_message(sse(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
            sink.emit_sse_message(sse("not json"));
            sink.emit(ended(1, Direction::ServerToClient));
            sink.seal();
            sink.emit_message(1, Direction::ClientToServer, request.clone(), None);
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        drive(&EventSink::new(tx));
        let eager: Vec<EventKind> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| e.kind)
            .collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let backlog = Backlog::default();
        drive(&EventSink::to_hub(tx).with_backlog(backlog.clone()));
        let mut facts = Vec::new();
        while let Ok(fact) = rx.try_recv() {
            backlog.release(fact.weight());
            fact.into_events(|event| facts.push(event.kind));
        }
        assert_eq!(backlog.bytes(), 0);
        assert_eq!(facts, eager);
        // Nothing after the seal.
        assert_eq!(eager.len(), 9, "{eager:?}");
        assert!(
            matches!(&eager[2], EventKind::InvalidMessage { reason, .. } if reason.contains("Mcp-Method"))
        );
        assert!(matches!(&eager[3], EventKind::InvalidMessage { .. }));
        assert!(matches!(
            &eager[5],
            EventKind::Message {
                dir: Direction::ServerToClient,
                ..
            }
        ));
        assert!(matches!(&eager[7], EventKind::InvalidMessage { .. }));
    }

    #[test]
    fn the_backlog_counts_what_is_sent_until_the_hub_takes_it() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let backlog = Backlog::default();
        let sink = EventSink::new(tx).with_backlog(backlog.clone());
        let event = EventKind::SseEvent {
            stream: 1,
            id: None,
            event: None,
            retry: None,
            data: "x".repeat(1 << 20).into(),
            start: 0,
            end: 0,
        };
        for _ in 0..15 {
            sink.emit(event.clone());
        }
        assert!(!sink.backlogged(), "15 MiB queued is under the limit");
        sink.emit(event.clone());
        sink.emit(event.clone());
        assert!(sink.backlogged(), "17 MiB queued is over it");
        while let Ok(taken) = rx.try_recv() {
            backlog.release(Backlog::weight(&taken.kind));
        }
        assert_eq!(backlog.bytes(), 0);
        assert!(!sink.backlogged());
        // A sink without a backlog never waits.
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let plain = EventSink::new(tx);
        for _ in 0..80 {
            plain.emit(event.clone());
        }
        assert!(!plain.backlogged());
    }
}
