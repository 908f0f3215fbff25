//! The shaper: what of a response body the client gets, and when. It carries out the planned
//! fault (delay, drip, stall, truncate, duplicate, a cut by length, an injected end) and paces
//! the bytes; it does not read the upstream nor parse anything (the observer does).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::time::{Instant, Sleep};

use crate::shared::Shared;
use mcpscope_engine::event::{EndHow, EventKind, StreamId};
use mcpscope_engine::fault::{Fault, Plan, Trigger};
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::observe::SeenEvent;
use mcpscope_session::sink::EventSink;

/// The most bytes merged into one write toward the client.
const GATHER_BYTES: usize = 64 * 1024;

/// What the fault of the stream does to what passes.
enum Shape {
    /// No fault was ever planned: bytes pass as they come, merged when several are ready.
    Free,
    /// A planned fault waits for its trigger.
    Armed {
        /// The fault and its trigger.
        plan: Plan,
        /// The timer of an `After` trigger.
        timer: Option<Pin<Box<Sleep>>>,
    },
    /// Every event is held back by this long.
    Delaying(Duration),
    /// Bytes trickle at this rate.
    Dripping {
        /// Bytes per second.
        bytes_per_sec: u64,
    },
    /// Events carrying a response are swallowed (a JSON body is held back); the stream never
    /// ends.
    Stalling,
    /// The next whole event goes out twice.
    Duplicating,
    /// Half of the next whole event goes out, then the stream ends cleanly.
    Truncating,
    /// The body goes out up to this offset, then the stream is reset.
    CuttingAt(u64),
    /// A fault did its work (or acts only through the end): bytes pass chunk by chunk.
    Done,
}

/// How the stream ends once the queue is drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// End the body cleanly.
    Eof {
        /// A fault ended it.
        injected: bool,
    },
    /// End with an error.
    Abort {
        /// How the stream ends.
        how: EndHow,
        /// Reset the client connection.
        reset: bool,
        /// A fault ended it.
        injected: bool,
        /// The body has yielded once, so hyper has flushed the bytes it was given.
        flushed: bool,
    },
    /// Never end: hold the stream open.
    Hold,
}

/// Who the shaper tells about the faults it carries out.
pub(crate) struct Reach {
    /// The exchange.
    pub stream: StreamId,
    /// Where facts go.
    pub sink: EventSink,
    /// The proxy's shared state (for "server dies").
    pub shared: Arc<Shared>,
    /// The exchange's session.
    pub session: Option<String>,
}

/// Shapes one response body.
pub(crate) struct Shaper {
    reach: Reach,
    content: ContentKind,
    content_length: Option<u64>,
    shape: Shape,
    events_seen: u32,
    /// Bytes of the event being held whole (event-aligned shapes), from `held_offset`.
    held: BytesMut,
    held_offset: u64,
    queue: VecDeque<(Option<Instant>, Bytes)>,
    pace: Option<Pin<Box<Sleep>>>,
    forwarded: u64,
    finish: Option<Finish>,
}

impl Shaper {
    /// A shaper for a body of this kind and length, with the fault planned at request time.
    pub(crate) fn new(
        reach: Reach,
        content: ContentKind,
        content_length: Option<u64>,
        plan: Option<Plan>,
    ) -> Self {
        let mut shaper = Self {
            reach,
            content,
            content_length,
            shape: Shape::Free,
            events_seen: 0,
            held: BytesMut::new(),
            held_offset: 0,
            queue: VecDeque::new(),
            pace: None,
            forwarded: 0,
            finish: None,
        };
        if let Some(plan) = plan {
            shaper.attach(plan, 0);
        }
        shaper
    }

    /// Takes a fault for the stream, replacing any other; `received` bytes have passed so far.
    pub(crate) fn attach(&mut self, plan: Plan, received: u64) {
        let timer = match plan.trigger {
            Trigger::After(d) => Some(Box::pin(tokio::time::sleep(d))),
            _ => None,
        };
        self.shape = Shape::Armed { plan, timer };
        if self.aligned() && self.content == ContentKind::Sse {
            // Bytes already forwarded belong to no held event; hold from here on.
            self.held_offset = received;
        }
    }

    /// Whether no fault was ever planned (the body passes untouched, at full speed).
    pub(crate) fn is_free(&self) -> bool {
        matches!(self.shape, Shape::Free)
    }

    /// Whether bytes are forwarded event by event (some faults need whole events).
    pub(crate) fn aligned(&self) -> bool {
        match &self.shape {
            Shape::Armed { plan, .. } => {
                plan.fault.needs_event_alignment()
                    || matches!(plan.trigger, Trigger::AfterEvents(_))
            }
            Shape::Delaying(_) | Shape::Stalling | Shape::Duplicating | Shape::Truncating => true,
            Shape::Free | Shape::Dripping { .. } | Shape::CuttingAt(_) | Shape::Done => false,
        }
    }

    /// Whether a JSON body is being held back (stalled).
    pub(crate) fn stalled(&self) -> bool {
        matches!(self.shape, Shape::Stalling)
    }

    /// How the stream ends, once decided.
    pub(crate) fn finish(&self) -> Option<Finish> {
        self.finish
    }

    /// Decides how the stream ends (the upstream is no longer read).
    pub(crate) fn end(&mut self, finish: Finish) {
        self.finish = Some(finish);
    }

    /// Bytes handed to the client so far.
    pub(crate) fn forwarded(&self) -> u64 {
        self.forwarded
    }

    /// Bytes handed out, and queued for the client.
    pub(crate) fn passed(&self) -> u64 {
        self.forwarded + self.queue.iter().map(|(_, b)| b.len() as u64).sum::<u64>()
    }

    /// Whether bytes wait to go out.
    pub(crate) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Takes a chunk of the body, as `aligned` says (decided before the chunk's events).
    pub(crate) fn take(&mut self, data: Bytes, aligned: bool) {
        if !aligned && !self.held.is_empty() {
            // The shape stopped needing whole events: the start of an event held so far goes
            // out ahead of the bytes that follow it.
            self.release_held();
        }
        match self.content {
            ContentKind::Json if self.stalled() => {}
            ContentKind::Sse if aligned => self.held.extend_from_slice(&data),
            _ => self.enqueue(data),
        }
    }

    /// Places one whole SSE event; returns whether the client gets it whole (an event
    /// swallowed or cut is not reported as received). Not `aligned`, its bytes went already.
    pub(crate) fn place(&mut self, seen: &SeenEvent, aligned: bool) -> bool {
        self.events_seen += 1;
        if !aligned {
            return true;
        }
        if self.finish.is_some() {
            return false;
        }
        let take = seen.end.saturating_sub(self.held_offset) as usize;
        let piece = self.held.split_to(take.min(self.held.len())).freeze();
        self.held_offset = seen.end;
        if let Shape::Armed {
            plan:
                Plan {
                    trigger: Trigger::AfterEvents(k),
                    ..
                },
            ..
        } = &self.shape
            && self.events_seen >= *k
        {
            self.enqueue(piece);
            self.fire();
            return true;
        }
        match self.shape {
            Shape::Stalling if seen.carries_response() => {
                self.note("stall: the response event was swallowed".into());
                false
            }
            Shape::Duplicating => {
                self.shape = Shape::Done;
                self.enqueue(piece.clone());
                self.enqueue(piece);
                true
            }
            Shape::Truncating => {
                self.shape = Shape::Done;
                let half = (piece.len() / 2).max(1);
                self.enqueue(piece.slice(..half.min(piece.len())));
                self.cut(Finish::Eof { injected: true });
                self.note(format!(
                    "truncate: the client got {half} of {} bytes of an event",
                    piece.len()
                ));
                false
            }
            _ => {
                self.enqueue(piece);
                true
            }
        }
    }

    /// Lets go of the bytes held for a whole event (the upstream ended).
    pub(crate) fn release_held(&mut self) {
        let rest = self.held.split().freeze();
        self.enqueue(rest);
    }

    /// Fires an armed fault whose time has come (`Now`, or its `After` timer ran out).
    pub(crate) fn poll_trigger(&mut self, cx: &mut Context<'_>) {
        let due = match &mut self.shape {
            Shape::Armed { plan, timer } => match (plan.trigger, timer) {
                (Trigger::Now, _) => true,
                (Trigger::After(_), Some(timer)) => timer.as_mut().poll(cx).is_ready(),
                _ => false,
            },
            _ => false,
        };
        if due {
            self.fire();
        }
    }

    /// Waits until the next queued bytes may go (paced bytes wait for their time).
    pub(crate) fn poll_pace(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(pace) = &mut self.pace {
                if pace.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.pace = None;
            }
            match self.queue.front() {
                Some((Some(at), _)) if *at > Instant::now() => {
                    self.pace = Some(Box::pin(tokio::time::sleep_until(*at)));
                }
                _ => return Poll::Ready(()),
            }
        }
    }

    /// The next bytes for the client (merged with the unpaced bytes behind them), counted as
    /// forwarded; a cut by length ends the stream here.
    pub(crate) fn pop(&mut self) -> Option<Bytes> {
        let mut bytes = self.pop_merged()?;
        if let Shape::CuttingAt(cut) = self.shape {
            let room = cut.saturating_sub(self.forwarded) as usize;
            if bytes.len() >= room {
                bytes.truncate(room);
                self.cut(Finish::Abort {
                    how: EndHow::Reset,
                    reset: true,
                    injected: true,
                    flushed: false,
                });
                self.queue.clear();
            }
        }
        self.forwarded += bytes.len() as u64;
        Some(bytes)
    }

    /// Before an abort: whether to yield once more so hyper flushes what it was given: the
    /// bytes passed so far and, when none have, the response head (a client that sees no head
    /// reacts to a network error, not to a stream that died).
    pub(crate) fn flush_before_abort(&mut self) -> bool {
        match &mut self.finish {
            Some(Finish::Abort { flushed, .. }) if !*flushed => {
                *flushed = true;
                true
            }
            _ => false,
        }
    }

    /// Fires the armed fault now.
    fn fire(&mut self) {
        let Shape::Armed { plan, .. } = std::mem::replace(&mut self.shape, Shape::Done) else {
            return;
        };
        self.reach.sink.emit(EventKind::FaultInjected {
            stream: self.reach.stream,
            fault: plan.fault.spec(),
            rule: Some(plan.origin),
        });
        let reset = Finish::Abort {
            how: EndHow::Reset,
            reset: true,
            injected: true,
            flushed: false,
        };
        match plan.fault {
            Fault::Eof => self.cut(Finish::Eof { injected: true }),
            Fault::Reset | Fault::Status(_) => self.cut(reset),
            Fault::ServerDies { down } => {
                self.cut(reset);
                let reach = &self.reach;
                reach
                    .shared
                    .server_dies(reach.stream, reach.session.as_deref(), down);
            }
            Fault::JsonThenReset => {
                let total = self.content_length.unwrap_or(0);
                let at = if total > 0 {
                    total / 2
                } else {
                    self.forwarded + 1
                };
                self.shape = Shape::CuttingAt(at);
            }
            Fault::Vanish => self.cut(Finish::Hold),
            Fault::Stall => self.shape = Shape::Stalling,
            Fault::Delay(d) => self.shape = Shape::Delaying(d),
            Fault::Drip { bytes_per_sec } => self.shape = Shape::Dripping { bytes_per_sec },
            Fault::Truncate => self.shape = Shape::Truncating,
            Fault::Duplicate => self.shape = Shape::Duplicating,
        }
    }

    /// Stops the stream's intake (the body stops reading the upstream once it sees the
    /// finish); what is queued still goes out, then `finish`.
    fn cut(&mut self, finish: Finish) {
        self.held.clear();
        self.finish = Some(finish);
    }

    fn note(&self, text: String) {
        self.reach.sink.emit(EventKind::Note {
            stream: Some(self.reach.stream),
            text,
        });
    }

    fn enqueue(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        let now = Instant::now();
        match self.shape {
            Shape::Delaying(d) => self.queue.push_back((Some(now + d), bytes)),
            Shape::Dripping { bytes_per_sec } => {
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

    /// The next queued bytes, merged with the unpaced bytes behind them (up to a bound).
    fn pop_merged(&mut self) -> Option<Bytes> {
        let (ready_at, first) = self.queue.pop_front()?;
        if ready_at.is_some() || !matches!(self.queue.front(), Some((None, _))) {
            return Some(first);
        }
        // The run of unpaced bytes that fits, measured first: one allocation of its size.
        let mut total = first.len();
        let mut count = 0;
        for (ready_at, next) in &self.queue {
            if ready_at.is_some() || total + next.len() > GATHER_BYTES {
                break;
            }
            total += next.len();
            count += 1;
        }
        let mut merged = BytesMut::with_capacity(total);
        merged.extend_from_slice(&first);
        for (_, next) in self.queue.drain(..count) {
            merged.extend_from_slice(&next);
        }
        Some(merged.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::event::Direction;
    use mcpscope_engine::wire::observe::BodyObserver;
    use std::task::Waker;

    const BODY: &[u8] = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";

    /// Runs a body through an observer and a shaper as the tap does, in chunks of `size`;
    /// returns the bytes the client gets, the SSE events reported and how the stream ends.
    fn run(plan: Option<Plan>, size: usize) -> (Vec<u8>, usize, Option<Finish>) {
        let (shared, _events) = crate::shared::for_tests();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let reach = Reach {
            stream: 1,
            sink: EventSink::new(tx),
            shared: Arc::new(shared),
            session: None,
        };
        let mut shaper = Shaper::new(reach, ContentKind::Sse, None, plan);
        let mut observer = BodyObserver::new(1, Direction::ServerToClient, ContentKind::Sse);
        let mut cx = Context::from_waker(Waker::noop());
        let (mut out, mut reported, mut seen) = (Vec::new(), 0, Vec::new());
        for chunk in BODY.chunks(size) {
            shaper.poll_trigger(&mut cx);
            if shaper.finish().is_some() {
                break;
            }
            let aligned = shaper.aligned();
            observer.feed(chunk, &mut seen);
            shaper.take(Bytes::copy_from_slice(chunk), aligned);
            for event in seen.drain(..) {
                if shaper.place(&event, aligned) {
                    reported += 1;
                }
            }
            while let Some(bytes) = shaper.pop() {
                out.extend_from_slice(&bytes);
            }
        }
        shaper.release_held();
        while let Some(bytes) = shaper.pop() {
            out.extend_from_slice(&bytes);
        }
        (out, reported, shaper.finish())
    }

    fn plan(fault: Fault, trigger: Trigger) -> Option<Plan> {
        Some(Plan {
            fault,
            trigger,
            origin: "test".into(),
        })
    }

    #[tokio::test]
    async fn without_a_fault_every_byte_passes_in_order() {
        for size in 1..BODY.len() {
            let (out, reported, finish) = run(None, size);
            assert_eq!((out.as_slice(), reported, finish), (BODY, 3, None));
        }
    }

    #[tokio::test]
    async fn duplicate_sends_the_next_event_twice() {
        let (out, reported, _) = run(plan(Fault::Duplicate, Trigger::Now), 7);
        let first = 38;
        assert_eq!(&out[..first], &BODY[..first]);
        assert_eq!(&out[first..2 * first], &BODY[..first]);
        assert_eq!(&out[2 * first..], &BODY[first..]);
        assert_eq!(reported, 3);
    }

    #[tokio::test]
    async fn truncate_sends_half_an_event_then_ends() {
        let (out, reported, finish) = run(plan(Fault::Truncate, Trigger::Now), 5);
        assert_eq!(out.as_slice(), &BODY[..19]);
        assert_eq!(reported, 0);
        assert_eq!(finish, Some(Finish::Eof { injected: true }));
    }

    #[tokio::test]
    async fn stall_swallows_the_response_event_only() {
        let (out, reported, _) = run(plan(Fault::Stall, Trigger::Now), 11);
        assert_eq!(out.as_slice(), &BODY[..76]);
        assert_eq!(reported, 2);
    }

    #[tokio::test]
    async fn a_drip_after_an_event_keeps_every_byte_in_order() {
        for size in 1..BODY.len() {
            let drip = Fault::Drip {
                bytes_per_sec: 1_000_000,
            };
            let (out, reported, _) = run(plan(drip, Trigger::AfterEvents(1)), size);
            assert_eq!((out.as_slice(), reported), (BODY, 3), "chunks of {size}");
        }
    }
}
