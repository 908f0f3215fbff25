//! The response body tap: forwards the upstream body to the client chunk by chunk as it arrives,
//! reports what passes (SSE events, JSON-RPC messages, how the stream ended) and carries out
//! faults at the per-chunk hook.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::{Instant, Sleep};

use super::conn::ResetFlag;
use super::sink::EventSink;
use super::upstream::UpstreamConn;
use super::{ConnSlot, ProxyError, Shared};
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fault::{Fault, Plan, Trigger};
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::jsonrpc::{self, Kind};
use mcpscope_engine::wire::sse::{SseFrame, SseParser};

/// The most upstream frames taken in one go when they are already there.
const GATHER_FRAMES: usize = 64;

/// The most bytes merged into one write toward the client.
const GATHER_BYTES: usize = 64 * 1024;

/// The most of a JSON body kept aside for parsing.
const JSON_CAP: usize = 16 * 1024 * 1024;

/// What to do once the queue is drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// End the body cleanly.
    Eof { injected: bool },
    /// End with an error; with `reset`, the client connection is reset.
    Abort { how: EndHow, reset: bool },
    /// Never end: hold the stream open.
    Hold,
}

/// Everything the tap needs to know about its exchange.
pub struct TapContext {
    /// Exchange id.
    pub stream: StreamId,
    /// Where facts go.
    pub sink: EventSink,
    /// The client connection's reset switch.
    pub reset: ResetFlag,
    /// What the body is.
    pub content: ContentKind,
    /// The `Content-Length`, if any.
    pub content_length: Option<u64>,
    /// The session of the exchange.
    pub session: Option<String>,
    /// The proxy's shared state (for "server dies").
    pub shared: Arc<Shared>,
    /// A fault planned at request time.
    pub plan: Option<Plan>,
    /// Live fault commands.
    pub control: UnboundedReceiver<Plan>,
    /// The upstream connection the body arrives on; the tap drives it.
    pub upstream: Option<UpstreamConn>,
    /// Where the connection goes back when the body has ended cleanly (for the next request).
    pub link: ConnSlot,
}

/// The response body the client reads.
pub struct TapBody {
    ctx: TapContext,
    inner: Option<Incoming>,
    control_open: bool,
    parser: SseParser,
    frames: Vec<SseFrame>,
    json: Vec<u8>,
    received: u64,
    forwarded: u64,
    reported: bool,
    plan: Option<Plan>,
    plan_fired: bool,
    spent: bool,
    plan_timer: Option<Pin<Box<Sleep>>>,
    events_seen: u32,
    held: BytesMut,
    held_offset: u64,
    queue: VecDeque<(Option<Instant>, Bytes)>,
    pace: Option<Pin<Box<Sleep>>>,
    finish: Option<Finish>,
    cut_at: Option<u64>,
    /// Whether the tap has yielded once before an abort (so hyper flushes what it was given).
    abort_yielded: bool,
    /// Trailers from the upstream, passed on after the data.
    trailers: Option<Frame<Bytes>>,
}

impl TapBody {
    /// Wraps the upstream body.
    pub fn new(inner: Incoming, ctx: TapContext) -> Self {
        let plan = ctx.plan.clone();
        let mut body = Self {
            ctx,
            inner: Some(inner),
            control_open: true,
            parser: SseParser::new(),
            frames: Vec::new(),
            json: Vec::new(),
            received: 0,
            forwarded: 0,
            reported: false,
            plan: None,
            plan_fired: false,
            spent: false,
            plan_timer: None,
            events_seen: 0,
            held: BytesMut::new(),
            held_offset: 0,
            queue: VecDeque::new(),
            pace: None,
            finish: None,
            cut_at: None,
            abort_yielded: false,
            trailers: None,
        };
        if let Some(plan) = plan {
            body.attach(plan);
        }
        body
    }

    fn attach(&mut self, plan: Plan) {
        self.plan_timer = match plan.trigger {
            Trigger::After(d) => Some(Box::pin(tokio::time::sleep(d))),
            _ => None,
        };
        self.plan_fired = false;
        self.spent = false;
        self.plan = Some(plan);
        if self.aligned() && self.ctx.content == ContentKind::Sse {
            // Bytes already forwarded belong to no held event; hold from here on.
            self.held_offset = self.received;
        }
    }

    /// Whether bytes are forwarded event by event (some faults need whole events).
    fn aligned(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| {
            !self.spent
                && (p.fault.needs_event_alignment()
                    || (!self.plan_fired && matches!(p.trigger, Trigger::AfterEvents(_))))
        })
    }

    fn report_end(&mut self, how: EndHow, leg: Leg, detail: Option<String>) {
        if self.reported {
            return;
        }
        self.reported = true;
        if how == EndHow::Eof && self.ctx.content == ContentKind::Json && !self.json.is_empty() {
            let json = std::mem::take(&mut self.json);
            self.emit_message(&json);
        }
        if self.ctx.content == ContentKind::Sse && self.parser.mid_event() && self.inner.is_some() {
            self.ctx.sink.emit(EventKind::InvalidMessage {
                stream: self.ctx.stream,
                dir: Direction::ServerToClient,
                reason: "stream ended inside an SSE event".into(),
                raw: String::new(),
            });
        }
        self.ctx.shared.unregister(self.ctx.stream);
        self.ctx.sink.emit(EventKind::StreamEnded {
            stream: self.ctx.stream,
            dir: Direction::ServerToClient,
            how,
            leg,
            bytes: self.forwarded + self.queue.iter().map(|(_, b)| b.len() as u64).sum::<u64>(),
            detail,
        });
    }

    fn emit_message(&self, bytes: &[u8]) {
        let kind = match jsonrpc::parse_body(bytes) {
            Ok(body) => EventKind::Message {
                stream: self.ctx.stream,
                dir: Direction::ServerToClient,
                body,
            },
            Err(reason) => EventKind::InvalidMessage {
                stream: self.ctx.stream,
                dir: Direction::ServerToClient,
                reason,
                raw: truncate_text(bytes),
            },
        };
        self.ctx.sink.emit(kind);
    }

    /// Fires the plan's fault now.
    fn fire(&mut self) {
        let Some(plan) = self.plan.clone() else {
            return;
        };
        self.plan_fired = true;
        self.plan_timer = None;
        self.ctx.sink.emit(EventKind::FaultInjected {
            stream: self.ctx.stream,
            fault: plan.fault.spec(),
            rule: Some(plan.origin.clone()),
        });
        match plan.fault {
            Fault::Eof => self.cut(Finish::Eof { injected: true }),
            Fault::Reset | Fault::Status(_) => self.cut(Finish::Abort {
                how: EndHow::Reset,
                reset: true,
            }),
            Fault::ServerDies { down } => {
                self.cut(Finish::Abort {
                    how: EndHow::Reset,
                    reset: true,
                });
                self.ctx
                    .shared
                    .server_dies(self.ctx.stream, self.ctx.session.as_deref(), down);
            }
            Fault::JsonThenReset => {
                let total = self.ctx.content_length.unwrap_or(0);
                self.cut_at = Some(if total > 0 {
                    total / 2
                } else {
                    self.forwarded + 1
                });
            }
            Fault::Vanish => {
                self.inner = None;
                self.ctx.upstream = None;
                self.held.clear();
                self.finish = Some(Finish::Hold);
            }
            Fault::Stall
            | Fault::Delay(_)
            | Fault::Drip { .. }
            | Fault::Truncate
            | Fault::Duplicate => {}
        }
    }

    /// Stops reading the upstream; what is queued still goes out, then `finish`.
    fn cut(&mut self, finish: Finish) {
        self.inner = None;
        self.ctx.upstream = None;
        self.held.clear();
        self.finish = Some(finish);
    }

    fn active_fault(&self) -> Option<&Fault> {
        let plan = self.plan.as_ref()?;
        (self.plan_fired && !self.spent).then_some(&plan.fault)
    }

    fn enqueue(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        let now = Instant::now();
        match self.active_fault().cloned() {
            Some(Fault::Delay(d)) => self.queue.push_back((Some(now + d), bytes)),
            Some(Fault::Drip { bytes_per_sec }) => {
                let rate = bytes_per_sec.max(1);
                let piece = (rate / 10).max(1) as usize;
                let mut at = self
                    .queue
                    .back()
                    .and_then(|(t, _)| *t)
                    .unwrap_or(now)
                    .max(now);
                let mut rest = bytes;
                while !rest.is_empty() {
                    let part = rest.split_to(piece.min(rest.len()));
                    at += Duration::from_secs_f64(part.len() as f64 / rate as f64);
                    self.queue.push_back((Some(at), part));
                }
            }
            _ => self.queue.push_back((None, bytes)),
        }
    }

    /// Taps a chunk from the upstream and queues what the client should get of it.
    fn on_data(&mut self, data: Bytes) {
        self.received += data.len() as u64;
        self.tap_data(data);
        // With a Content-Length, the client's side may stop polling after the last byte: the
        // end is reported as soon as the whole body has passed.
        if self.ctx.content_length == Some(self.received)
            && self.plan.is_none()
            && self.finish.is_none()
            && self.inner.is_some()
        {
            self.release();
            self.report_end(EndHow::Eof, Leg::Upstream, None);
            self.finish = Some(Finish::Eof { injected: false });
        }
    }

    fn tap_data(&mut self, data: Bytes) {
        match self.ctx.content {
            ContentKind::Json => {
                if self.json.len() + data.len() <= JSON_CAP {
                    self.json.extend_from_slice(&data);
                }
                match self.active_fault() {
                    Some(Fault::Stall) => {}
                    _ => self.enqueue(data),
                }
            }
            ContentKind::Other => self.enqueue(data),
            ContentKind::Sse => {
                let aligned = self.aligned();
                if aligned {
                    self.held.extend_from_slice(&data);
                } else {
                    self.enqueue(data.clone());
                }
                let mut frames = std::mem::take(&mut self.frames);
                frames.clear();
                self.parser.feed(&data, &mut frames);
                for frame in frames.drain(..) {
                    self.events_seen += 1;
                    if !aligned {
                        self.tap_frame(&frame);
                    } else if self.inner.is_some() && self.place_event(&frame) {
                        // Event-aligned: reported only when the client gets it whole.
                        self.tap_frame(&frame);
                    }
                }
                self.frames = frames;
            }
        }
    }

    /// Reports one SSE event and the message in it.
    fn tap_frame(&mut self, frame: &SseFrame) {
        self.ctx.sink.emit(EventKind::SseEvent {
            stream: self.ctx.stream,
            id: frame.id.clone(),
            event: frame.event.clone(),
            retry: frame.retry,
            data: frame.data.clone(),
            start: frame.start,
            end: frame.end,
        });
        if !frame.has_data || frame.data.is_empty() {
            return;
        }
        self.emit_message(frame.data.as_bytes());
    }

    /// In event-aligned mode: decides what the client gets of one whole event; returns whether
    /// it gets it whole (a swallowed or truncated event is not reported as received).
    fn place_event(&mut self, frame: &SseFrame) -> bool {
        let take = frame.end.saturating_sub(self.held_offset) as usize;
        let piece = self.held.split_to(take.min(self.held.len())).freeze();
        self.held_offset = frame.end;
        if let Some(Plan {
            trigger: Trigger::AfterEvents(k),
            ..
        }) = &self.plan
            && !self.plan_fired
            && self.events_seen >= *k
        {
            self.enqueue(piece);
            self.fire();
            return true;
        }
        match self.active_fault().cloned() {
            Some(Fault::Stall) if carries_response(frame) => {
                self.ctx.sink.emit(EventKind::Note {
                    stream: Some(self.ctx.stream),
                    text: "stall: the response event was swallowed".into(),
                });
                false
            }
            Some(Fault::Duplicate) => {
                self.spent = true;
                self.enqueue(piece.clone());
                self.enqueue(piece);
                true
            }
            Some(Fault::Truncate) => {
                self.spent = true;
                let half = piece.len() / 2;
                self.enqueue(piece.slice(..half.max(1)));
                self.cut(Finish::Eof { injected: true });
                self.ctx.sink.emit(EventKind::Note {
                    stream: Some(self.ctx.stream),
                    text: format!(
                        "truncate: the client got {} of {} bytes of an event",
                        half.max(1),
                        piece.len()
                    ),
                });
                false
            }
            _ => {
                self.enqueue(piece);
                true
            }
        }
    }
}

/// Whether an SSE event carries a JSON-RPC response (result or error).
fn carries_response(frame: &SseFrame) -> bool {
    frame.has_data
        && jsonrpc::parse_body(frame.data.as_bytes()).is_ok_and(|body| {
            jsonrpc::messages(&body).iter().any(|m| {
                matches!(
                    jsonrpc::classify(m),
                    Kind::Result { .. } | Kind::Error { .. }
                )
            })
        })
}

impl TapBody {
    /// Takes one poll's worth of the upstream body: data is tapped and queued, trailers are
    /// kept for after the data, and the end is recorded.
    fn absorb(&mut self, polled: Option<Result<Frame<Bytes>, hyper::Error>>) {
        match polled {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => self.on_data(data),
                Err(trailers) => self.trailers = Some(trailers),
            },
            Some(Err(err)) => {
                let (how, detail) = crate::transport::classify(&err);
                let rest = self.held.split().freeze();
                self.enqueue(rest);
                self.inner = None;
                self.report_end(how, Leg::Upstream, Some(detail));
                self.finish = Some(Finish::Abort {
                    how,
                    reset: how == EndHow::Reset,
                });
            }
            None => {
                let rest = self.held.split().freeze();
                let stalled = matches!(self.active_fault(), Some(Fault::Stall));
                self.enqueue(rest);
                if stalled {
                    self.inner = None;
                    self.finish = Some(Finish::Hold);
                } else {
                    self.release();
                    self.finish = Some(Finish::Eof { injected: false });
                }
            }
        }
    }

    /// The body ended cleanly: the upstream connection serves the client's next request.
    fn release(&mut self) {
        self.inner = None;
        if let Some(conn) = self.ctx.upstream.take()
            && let Ok(mut slot) = self.ctx.link.lock()
        {
            *slot = Some(conn);
        }
    }

    /// Takes whatever the upstream has ready now (never waits), so that one write to the client
    /// carries it: bytes that arrived together leave together.
    fn gather(&mut self, cx: &mut Context<'_>) {
        for _ in 0..GATHER_FRAMES {
            if self.finish.is_some() || self.trailers.is_some() {
                return;
            }
            let Some(inner) = self.inner.as_mut() else {
                return;
            };
            match Pin::new(inner).poll_frame(cx) {
                Poll::Pending => return,
                Poll::Ready(polled) => self.absorb(polled),
            }
        }
    }

    /// The next queued bytes, merged with the unpaced bytes behind them (up to a bound).
    fn pop_merged(&mut self) -> Option<(Option<Instant>, Bytes)> {
        let (ready_at, first) = self.queue.pop_front()?;
        if ready_at.is_some() || !matches!(self.queue.front(), Some((None, _))) {
            return Some((ready_at, first));
        }
        let mut merged = BytesMut::from(&first[..]);
        while let Some((None, next)) = self.queue.front() {
            if merged.len() + next.len() > GATHER_BYTES {
                break;
            }
            merged.extend_from_slice(next);
            self.queue.pop_front();
        }
        Some((None, merged.freeze()))
    }
}

fn truncate_text(bytes: &[u8]) -> String {
    let end = bytes.len().min(4096);
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Body for TapBody {
    type Data = Bytes;
    type Error = ProxyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ProxyError>>> {
        let this = &mut *self;
        loop {
            if let Some(upstream) = this.ctx.upstream.as_mut() {
                // The connection's I/O feeds the body: drive it before reading the body.
                upstream.poll_drive(cx);
            }
            while this.control_open {
                match this.ctx.control.poll_recv(cx) {
                    Poll::Ready(Some(plan)) => this.attach(plan),
                    Poll::Ready(None) => this.control_open = false,
                    Poll::Pending => break,
                }
            }
            if !this.plan_fired
                && let Some(plan) = &this.plan
            {
                let due = match (plan.trigger, &mut this.plan_timer) {
                    (Trigger::Now, _) => true,
                    (Trigger::After(_), Some(timer)) => timer.as_mut().poll(cx).is_ready(),
                    _ => false,
                };
                if due {
                    this.fire();
                }
            }
            if let Some(pace) = &mut this.pace {
                if pace.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.pace = None;
            }
            if let Some((ready_at, _)) = this.queue.front() {
                if let Some(at) = *ready_at
                    && at > Instant::now()
                {
                    this.pace = Some(Box::pin(tokio::time::sleep_until(at)));
                    continue;
                }
                if this.plan.is_none() && this.cut_at.is_none() {
                    this.gather(cx);
                }
                if let Some((_, mut bytes)) = this.pop_merged() {
                    if let Some(cut) = this.cut_at {
                        let room = cut.saturating_sub(this.forwarded) as usize;
                        if bytes.len() >= room {
                            bytes.truncate(room);
                            this.cut(Finish::Abort {
                                how: EndHow::Reset,
                                reset: true,
                            });
                            this.queue.clear();
                        }
                    }
                    this.forwarded += bytes.len() as u64;
                    if bytes.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
            }
            if let Some(trailers) = this.trailers.take() {
                return Poll::Ready(Some(Ok(trailers)));
            }
            match this.finish {
                Some(Finish::Eof { injected }) => {
                    let detail = injected.then(|| "injected".to_string());
                    this.report_end(EndHow::Eof, Leg::Upstream, detail);
                    return Poll::Ready(None);
                }
                Some(Finish::Abort { how, reset }) => {
                    if !this.abort_yielded && this.forwarded > 0 {
                        // Let hyper flush the bytes it already has before the connection dies.
                        this.abort_yielded = true;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    if reset {
                        this.ctx.reset.set();
                    }
                    let detail = this.plan_fired.then(|| "injected".to_string());
                    this.report_end(how, Leg::Upstream, detail);
                    return Poll::Ready(Some(Err(ProxyError::StreamEnded(how))));
                }
                Some(Finish::Hold) => return Poll::Pending,
                None => {}
            }
            let Some(inner) = this.inner.as_mut() else {
                return Poll::Pending;
            };
            match Pin::new(inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(polled) => this.absorb(polled),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        false
    }

    fn size_hint(&self) -> SizeHint {
        match self.ctx.content_length {
            Some(n) if self.plan.is_none() => SizeHint::with_exact(n),
            _ => SizeHint::default(),
        }
    }
}

impl Drop for TapBody {
    fn drop(&mut self) {
        if self.reported {
            return;
        }
        if self.ctx.content_length.is_some_and(|n| n == self.forwarded) {
            self.report_end(EndHow::Eof, Leg::Upstream, None);
        } else {
            self.report_end(
                EndHow::Cancelled,
                Leg::Client,
                Some("the client stopped reading".into()),
            );
        }
    }
}
