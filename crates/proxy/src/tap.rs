//! The response body tap: forwards the upstream body to the client chunk by chunk as it arrives.
//! It composes three parts: the upstream body (read, and its connection driven, here), the
//! [observer](mcpscope_engine::wire::observe) (what the bytes say: SSE events, JSON-RPC
//! messages) and the [shaper](crate::shaper) (what the client gets of them, and when).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::mpsc::UnboundedReceiver;

use super::conn::ResetFlag;
use super::endpoint::{EndpointRewriter, Fed};
use super::rescue::Rescue;
use super::shaper::{Finish, Reach, Shaper};
use super::shared::lock;
use super::upstream::UpstreamConn;
use super::{ConnSlot, ProxyError, Shared};
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fault::Plan;
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::observe::{BodyEnd, BodyObserver, SeenEvent};
use mcpscope_session::sink::{EventSink, Passed};

/// The most upstream frames taken in one go when they are already there.
const GATHER_FRAMES: usize = 64;

/// How often a tap waiting for the recorder looks again.
const BACKLOG_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// What the tap does with a response body, decided from its head and the request.
pub(crate) struct BodyPlan {
    /// What the body is.
    pub content: ContentKind,
    /// The `Content-Length`, if any.
    pub content_length: Option<u64>,
    /// The session of the exchange.
    pub session: Option<String>,
    /// The calls to rescue if the stream dies (`--rescue`).
    pub rescue: Option<Rescue>,
    /// A GET's SSE stream: its first event, a legacy `endpoint`, may need rewriting.
    pub endpoint: Option<EndpointRewriter>,
}

/// Everything the tap needs to know about its exchange.
pub(crate) struct TapContext {
    /// Exchange id.
    pub stream: StreamId,
    /// Where facts go.
    pub sink: EventSink,
    /// The client connection's reset switch.
    pub reset: ResetFlag,
    /// The proxy's shared state (for "server dies").
    pub shared: Arc<Shared>,
    /// A fault planned at request time.
    pub fault: Option<Plan>,
    /// Live fault commands.
    pub control: UnboundedReceiver<Plan>,
    /// The upstream connection the body arrives on; the tap drives it.
    pub upstream: Option<UpstreamConn>,
    /// Where the connection goes back when the body has ended cleanly (for the next request).
    pub link: ConnSlot,
    /// What is done with the body.
    pub body: BodyPlan,
}

/// The response body the client reads.
pub(crate) struct TapBody {
    /// Set while the tap waits for the recorder to catch up ([`EventSink::backlogged`]).
    backlog_wait: Option<Pin<Box<tokio::time::Sleep>>>,
    stream: StreamId,
    sink: EventSink,
    reset: ResetFlag,
    shared: Arc<Shared>,
    content: ContentKind,
    content_length: Option<u64>,
    /// Live fault commands, until their sender is gone.
    control: Option<UnboundedReceiver<Plan>>,
    /// The upstream connection the body arrives on; the tap drives it.
    upstream: Option<UpstreamConn>,
    /// Where the connection goes back when the body has ended cleanly (for the next request).
    link: ConnSlot,
    /// The upstream body, while it is read.
    inner: Option<Incoming>,
    observer: BodyObserver,
    /// Events seen in the chunk at hand (kept to reuse its allocation).
    seen: Vec<SeenEvent>,
    /// What the observer found wrong with the body in the chunk at hand.
    notices: Vec<EventKind>,
    /// The upstream ended the body cleanly (so an unfinished SSE event was truncated by it).
    upstream_ended: bool,
    /// Bytes passed to the client, for an end recorded at shutdown.
    passed: Option<Passed>,
    shaper: Shaper,
    reported: bool,
    /// Trailers from the upstream, passed on after the data.
    trailers: Option<Frame<Bytes>>,
    /// The calls to rescue if the stream dies (`--rescue`).
    rescue: Option<Rescue>,
    /// The rescue has been sent: the body ends cleanly.
    rescued: bool,
    /// Holds the stream's first event until it is complete, while it may need rewriting.
    endpoint: Option<EndpointRewriter>,
}

impl TapBody {
    /// Wraps the upstream body.
    pub(crate) fn new(inner: Incoming, ctx: TapContext) -> Self {
        let BodyPlan {
            content,
            content_length,
            session,
            rescue,
            endpoint,
        } = ctx.body;
        let reach = Reach {
            stream: ctx.stream,
            sink: ctx.sink.clone(),
            shared: ctx.shared.clone(),
            session,
        };
        Self {
            backlog_wait: None,
            stream: ctx.stream,
            observer: BodyObserver::new(ctx.stream, Direction::ServerToClient, content)
                .with_limit(ctx.shared.config.limits.sse_event),
            passed: ctx.sink.passed(ctx.stream),
            shaper: Shaper::new(reach, content, content_length, ctx.fault),
            sink: ctx.sink,
            reset: ctx.reset,
            shared: ctx.shared,
            content,
            content_length,
            control: Some(ctx.control),
            upstream: ctx.upstream,
            link: ctx.link,
            inner: Some(inner),
            seen: Vec::new(),
            notices: Vec::new(),
            upstream_ended: false,
            reported: false,
            trailers: None,
            rescue,
            rescued: false,
            endpoint,
        }
    }

    fn report_end(&mut self, how: EndHow, leg: Leg, detail: Option<String>) {
        if self.reported {
            return;
        }
        self.reported = true;
        let mut ended = Vec::new();
        let end = BodyEnd {
            clean: how == EndHow::Eof,
            reading: self.inner.is_some() || self.upstream_ended,
        };
        let deferred = self.observer.end_deferring(end, &mut ended);
        for kind in ended {
            self.sink.emit(kind);
        }
        if let Some(json) = deferred {
            let dir = Direction::ServerToClient;
            self.sink
                .emit_message(self.stream, dir, Bytes::from(json), None);
        }
        self.shared.unregister(self.stream);
        self.sink.emit(EventKind::StreamEnded {
            stream: self.stream,
            dir: Direction::ServerToClient,
            how,
            leg,
            bytes: self.shaper.passed(),
            detail,
        });
    }

    /// The stream died: the rescue for its pending calls, reported, if they need one.
    fn take_rescue(&mut self, how: EndHow) -> Option<Bytes> {
        if self.content == ContentKind::Json && self.shaper.passed() > 0 {
            // A JSON body the client has begun to read cannot be replaced.
            return None;
        }
        let (bytes, events) = self
            .rescue
            .as_mut()?
            .take(self.stream, how, &self.shared.parked)?;
        for kind in events {
            self.sink.emit(kind);
        }
        self.rescued = true;
        Some(bytes)
    }

    /// The shaper cut the stream: the upstream is no longer read (nor its connection kept).
    fn follow_cut(&mut self) {
        if self.shaper.finish().is_some() && self.inner.is_some() {
            self.inner = None;
            self.upstream = None;
        }
    }

    /// Taps a chunk from the upstream: the observer reports it, the shaper queues what the
    /// client should get of it.
    fn on_data(&mut self, data: Bytes) {
        // A body no fault shapes and no rescue watches has its messages parsed by the hub.
        let reads_messages = !self.shaper.is_free() || self.rescue.is_some();
        self.observer.defer_messages(!reads_messages);
        self.observer
            .feed_reporting(&data, &mut self.seen, &mut self.notices);
        // A stream the observer gave up on has no more event boundaries: it flows unaligned.
        let aligned = self.shaper.aligned() && !self.observer.gave_up();
        self.shaper.take(data, aligned);
        let mut seen = std::mem::take(&mut self.seen);
        for event in seen.drain(..) {
            // Event-aligned: reported only when the client gets it whole.
            if self.shaper.place(&event, aligned) {
                if let Some(rescue) = self.rescue.as_mut() {
                    rescue.passed(&event);
                }
                if event.deferred {
                    self.sink.emit_sse_message(event.event);
                } else {
                    for kind in event.into_events() {
                        self.sink.emit(kind);
                    }
                }
            }
        }
        self.seen = seen;
        for kind in self.notices.drain(..) {
            self.sink.emit(kind);
        }
        self.follow_cut();
        // With a Content-Length, the client's side may stop polling after the last byte: the
        // end is reported as soon as the whole body has passed.
        if self.content_length == Some(self.observer.received())
            && self.shaper.is_free()
            && self.shaper.finish().is_none()
            && self.inner.is_some()
        {
            self.release();
            self.report_end(EndHow::Eof, Leg::Upstream, None);
            self.shaper.end(Finish::Eof { injected: false });
        }
    }

    /// Takes an upstream chunk: through the endpoint rewriter while it holds the first event.
    fn on_upstream(&mut self, data: Bytes) {
        let Some(rewriter) = self.endpoint.as_mut() else {
            return self.on_data(data);
        };
        let Fed::Pass(bytes, rewrite) = rewriter.feed(data) else {
            return;
        };
        self.endpoint = None;
        if let Some(rewrite) = rewrite {
            self.sink.emit(EventKind::Rewritten {
                stream: self.stream,
                what: "endpoint".into(),
                from: rewrite.from,
                to: rewrite.to,
            });
        }
        self.on_data(bytes);
    }

    /// The upstream body ended: what the endpoint rewriter held passes as it came.
    fn release_held_start(&mut self) {
        if let Some(mut rewriter) = self.endpoint.take() {
            let held = rewriter.flush();
            if !held.is_empty() {
                self.on_data(held);
            }
        }
    }

    /// Takes one poll's worth of the upstream body: data is tapped and queued, trailers are
    /// kept for after the data, and the end is recorded.
    fn absorb(&mut self, polled: Option<Result<Frame<Bytes>, hyper::Error>>) {
        match polled {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => self.on_upstream(data),
                Err(trailers) => self.trailers = Some(trailers),
            },
            Some(Err(err)) => {
                self.release_held_start();
                let (how, detail) = mcpscope_transport::classify(&err);
                self.shaper.release_held();
                self.inner = None;
                self.report_end(how, Leg::Upstream, Some(detail));
                self.shaper.end(Finish::Abort {
                    how,
                    reset: how == EndHow::Reset,
                    injected: false,
                    flushed: false,
                });
            }
            None => {
                self.release_held_start();
                self.upstream_ended = true;
                self.shaper.release_held();
                if self.shaper.stalled() {
                    self.inner = None;
                    self.shaper.end(Finish::Hold);
                } else {
                    self.release();
                    self.shaper.end(Finish::Eof { injected: false });
                }
            }
        }
    }

    /// The body ended cleanly: the upstream connection serves the client's next request.
    fn release(&mut self) {
        self.inner = None;
        if let Some(conn) = self.upstream.take() {
            *lock(&self.link, "upstream connection", &self.sink) = Some(conn);
        }
    }

    /// Takes whatever the upstream has ready now (never waits), so that one write to the client
    /// carries it: bytes that arrived together leave together.
    fn gather(&mut self, cx: &mut Context<'_>) {
        for _ in 0..GATHER_FRAMES {
            if self.sink.backlogged() {
                return;
            }
            if self.shaper.finish().is_some() || self.trailers.is_some() {
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

    /// Takes the live fault commands that have arrived.
    fn take_commands(&mut self, cx: &mut Context<'_>) {
        while let Some(control) = self.control.as_mut() {
            match control.poll_recv(cx) {
                Poll::Ready(Some(plan)) => self.shaper.attach(plan, self.observer.received()),
                Poll::Ready(None) => self.control = None,
                Poll::Pending => break,
            }
        }
    }
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
            if let Some(upstream) = this.upstream.as_mut() {
                // The connection's I/O feeds the body: drive it before reading the body.
                upstream.poll_drive(cx);
            }
            this.take_commands(cx);
            this.shaper.poll_trigger(cx);
            this.follow_cut();
            if this.shaper.poll_pace(cx).is_pending() {
                return Poll::Pending;
            }
            if this.shaper.has_queued() {
                if this.shaper.is_free() {
                    this.gather(cx);
                }
                if let Some(bytes) = this.shaper.pop() {
                    this.follow_cut();
                    if let Some(passed) = &this.passed {
                        passed.store(this.shaper.passed(), Ordering::Relaxed);
                    }
                    if bytes.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
            }
            if let Some(trailers) = this.trailers.take() {
                return Poll::Ready(Some(Ok(trailers)));
            }
            match this.shaper.finish() {
                Some(Finish::Eof { injected }) => {
                    let detail = injected.then(|| "injected".to_string());
                    this.report_end(EndHow::Eof, Leg::Upstream, detail);
                    if let Some(bytes) = this.take_rescue(EndHow::Eof) {
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                    return Poll::Ready(None);
                }
                Some(Finish::Abort { .. }) if this.rescued => return Poll::Ready(None),
                Some(Finish::Abort {
                    how,
                    reset,
                    injected,
                    ..
                }) => {
                    if this.shaper.flush_before_abort() {
                        // Let hyper flush the bytes it already has before the connection dies.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    let detail = injected.then(|| "injected".to_string());
                    this.report_end(how, Leg::Upstream, detail);
                    if let Some(bytes) = this.take_rescue(how) {
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                    if reset {
                        this.reset.set();
                    }
                    return Poll::Ready(Some(Err(ProxyError::StreamEnded(how))));
                }
                Some(Finish::Hold) => return Poll::Pending,
                None => {}
            }
            if this.sink.backlogged() {
                // The recorder is behind the wire: read no more of the upstream until it
                // catches up (nothing observed is dropped; forwarding waits for it).
                let wait = this
                    .backlog_wait
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(BACKLOG_WAIT)));
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.backlog_wait = None;
                continue;
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
        match self.content_length {
            Some(n) if self.shaper.is_free() => SizeHint::with_exact(n),
            _ => SizeHint::default(),
        }
    }
}

impl Drop for TapBody {
    fn drop(&mut self) {
        if self.reported {
            return;
        }
        if self.content_length == Some(self.shaper.forwarded()) {
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
