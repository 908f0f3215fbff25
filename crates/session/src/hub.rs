//! Between the front end and the views: every event goes to the recorder first, then to the
//! view, to the viewers attached over the session's socket (see [`crate::publish`]) and to the
//! subscribers.
//! Two threads of its own, so neither parsing, file I/O nor a slow view ever holds up
//! forwarding: the parse stage turns the proxy's facts into redacted events (messages parsed
//! there), the hub records them and hands them on, each stage working on a burst while the
//! other works on the one before. The channels are unbounded, so nothing is dropped; the
//! backlog counts a fact until the hub has taken its events.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::thread::JoinHandle;

use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;

use mcpscope_engine::event::{Event, EventKind};
use mcpscope_engine::record::Recorder;
use mcpscope_engine::redact::Redactor;
use mcpscope_engine::wire::observe;

use crate::pace::{Backlog, Pace};
use crate::publish::fanout::{Fanout, Join};
use crate::sink::Fact;

/// How long the parse stage lets a burst of facts gather before taking it (bounds the view's
/// lag: the hub takes each burst as it comes).
const COALESCE: std::time::Duration = std::time::Duration::from_millis(2);

/// The most facts the parse stage takes before handing them over, and the most events the hub
/// takes between two flushes.
const MAX_BURST: usize = 4096;

/// Empty takes in a row (each [`COALESCE`] apart) before the parse stage parks until the next
/// fact.
const IDLE_POLLS: u32 = 8;

/// Bytes of events (by [`Event::weight`]) the hub gathers for the view before handing them
/// over in the middle of a burst; a burst's end hands over whatever has gathered.
const VIEW_BATCH_BYTES: usize = 1 << 20;

/// Says once that recording failed (disk full, …); forwarding and the view go on.
fn report_failure(recorder: &Recorder, result: std::io::Result<()>, failed: &mut bool) {
    if let Err(e) = result
        && !*failed
    {
        *failed = true;
        tracing::error!("recording to {} failed: {e}", recorder.path().display());
        // Never a panic on this thread when stderr is gone: the hub must go on.
        let _ = writeln!(
            std::io::stderr(),
            "mcpscope: recording to {} failed: {e}",
            recorder.path().display()
        );
    }
}

/// The hub's threads could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the event hub's threads: {0}")]
pub struct HubError(#[source] pub std::io::Error);

/// What the hub did with the events it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Events written to the recording (0 without one).
    pub written: u64,
    /// Events the hub received.
    pub seen: u64,
}

/// A consumer beside the view (the OTLP exporter, the metrics): a bounded queue of copies of the
/// events; a copy that finds it full is dropped and counted (`on_drop`), so a subscriber never
/// slows the traffic or the view.
pub(crate) struct Subscriber {
    pub(crate) copies: tokio::sync::mpsc::Sender<Event>,
    pub(crate) on_drop: Box<dyn Fn() + Send>,
}

impl Subscriber {
    fn offer(&self, event: &Event) {
        if self.copies.try_send(event.clone()).is_err() {
            (self.on_drop)();
        }
    }
}

/// The running hub.
pub struct Hub {
    /// Where the proxy sends its facts ([`crate::sink::EventSink::to_hub`]).
    pub input: UnboundedSender<Fact>,
    /// What the view reads.
    pub output: Option<UnboundedReceiver<Event>>,
    /// The recording's path, if recording.
    pub recording: Option<PathBuf>,
    /// Bytes sent to [`Hub::input`] and not yet taken (the sink counts, the hub releases).
    pub backlog: Backlog,
    /// Bytes sent to the view and not yet taken by it, once the view paces the hub
    /// ([`Hub::pace_view`]).
    view_pace: Pace,
    joiner: UnboundedSender<Join>,
    thread: Option<Done>,
}

/// The hub thread, the switch that ends the parse stage (and through it the hub) once the
/// facts sent so far are taken, and the signal the hub sends when it has recorded its last
/// event.
struct Done {
    thread: JoinHandle<()>,
    stop: oneshot::Sender<()>,
    tally: Receiver<Tally>,
}

/// What the parse stage hands the hub: a redacted event ready to record, whether it is known
/// to be what its stream's last SSE data parses to (or SSE data a message was parsed from:
/// [`Recorder::write_known`]), and the weight its fact took in the backlog (released when the
/// hub takes it: the queue between the stages is counted in the backlog too).
struct Ready {
    event: Event,
    known: bool,
    weight: usize,
}

/// What the parse stage sends the hub: the events of a burst, or that it has ended as it
/// should (the hub then knows that every fact sent before was handed over).
enum Stage {
    Batch(Vec<Ready>),
    End,
}

/// The first stage, on a thread of its own: takes facts in bursts until every sender is gone
/// or it is told to stop, and turns each into its events (messages parsed here), redacted in
/// order, for the hub. Parsing a message is the larger part of an event's cost: on its own
/// thread, it runs beside the recording and the hand-over of the events before it.
struct Parse {
    redactor: Redactor,
    out: UnboundedSender<Stage>,
    batch: Vec<Ready>,
}

impl Parse {
    /// Parked while nothing comes; once a fact arrives, takes what has gathered every
    /// [`COALESCE`] without being woken for it (a sender's `send` then wakes no thread: the
    /// proxy pays no wake-up per exchange), and parks again after [`IDLE_POLLS`] empty takes.
    async fn run(&mut self, mut rx: UnboundedReceiver<Fact>, mut stop: oneshot::Receiver<()>) {
        loop {
            let first = tokio::select! {
                biased;
                first = rx.recv() => first,
                _ = &mut stop => {
                    self.last(&mut rx);
                    return;
                }
            };
            let Some(first) = first else {
                return;
            };
            self.take(first);
            let mut empty = 0;
            while empty < IDLE_POLLS {
                // Let the rest of the burst arrive, take it whole, then hand it over at once.
                std::thread::sleep(COALESCE);
                let (taken, open) = self.take_gathered(&mut rx);
                self.flush();
                if !open {
                    return;
                }
                // A closed switch (the hub dropped unfinished) stops it too, as when parked.
                if !matches!(stop.try_recv(), Err(oneshot::error::TryRecvError::Empty)) {
                    self.last(&mut rx);
                    return;
                }
                empty = if taken == 0 { empty + 1 } else { 0 };
            }
        }
    }

    /// Takes every fact queued now, handing over every [`MAX_BURST`]; how many, and whether a
    /// sender is still there.
    fn take_gathered(&mut self, rx: &mut UnboundedReceiver<Fact>) -> (usize, bool) {
        let mut taken = 0;
        loop {
            match rx.try_recv() {
                Ok(fact) => {
                    self.take(fact);
                    taken += 1;
                    if taken % MAX_BURST == 0 {
                        self.flush();
                    }
                }
                Err(TryRecvError::Empty) => return (taken, true),
                Err(TryRecvError::Disconnected) => return (taken, false),
            }
        }
    }

    /// Told to stop: everything sent before is queued; take it, then end.
    fn last(&mut self, rx: &mut UnboundedReceiver<Fact>) {
        while let Ok(fact) = rx.try_recv() {
            self.take(fact);
        }
        self.flush();
    }

    /// Takes one fact: the events it stands for (a message parsed here), redacted.
    fn take(&mut self, fact: Fact) {
        let mut weight = fact.weight();
        match fact {
            Fact::SseMessage(mut event) => {
                let Some(mut message) = crate::sink::sse_message(&event.kind) else {
                    return self.take_event(event, weight);
                };
                // Redacted together: a message left as its data parses is recorded as a
                // reference to the data, without writing it out again to compare.
                let derived = self
                    .redactor
                    .observe_sse_message(&mut event.kind, &mut message);
                let mut message = Event::at(event.t, message);
                // Data a JSON-RPC message is still exactly parsed from is one JSON value: the
                // recorder embeds it unparsed, and the message may take it as its text.
                let parsed = derived && matches!(message.kind, EventKind::Message { .. });
                if parsed && let EventKind::SseEvent { data, .. } = &event.kind {
                    message.source = Some(data.clone());
                }
                self.push(event, parsed, weight);
                self.push(message, derived, 0);
            }
            Fact::Message {
                t,
                stream,
                dir,
                bytes,
                mirrored: None,
            } => {
                let mut message = Event::at(t, observe::message(stream, dir, &bytes));
                // A body redaction left as it parses is the message's text, trimmed (the view
                // keeps that text when it is the very text the message writes out as).
                let unchanged = self.redactor.observe_message(&mut message.kind);
                if unchanged
                    && matches!(&message.kind, EventKind::Message { body, .. } if body.is_object())
                    && let Ok(text) = std::str::from_utf8(&bytes)
                {
                    message.source = Some(Arc::from(text.trim_ascii()));
                }
                self.push(message, false, weight);
            }
            fact => fact.into_events(|event| {
                self.take_event(event, std::mem::take(&mut weight));
            }),
        }
    }

    fn take_event(&mut self, mut event: Event, weight: usize) {
        self.redactor.observe(&mut event.kind);
        self.push(event, false, weight);
    }

    fn push(&mut self, event: Event, known: bool, weight: usize) {
        self.batch.push(Ready {
            event,
            known,
            weight,
        });
    }

    /// Hands the events taken so far to the hub (one send for the burst).
    fn flush(&mut self) {
        if !self.batch.is_empty() {
            // The next burst is likely as large: its vector is made at this one's size, not
            // grown (and copied) from empty by doubling. At most [`MAX_BURST`] facts' events.
            let next = Vec::with_capacity(self.batch.len());
            let batch = std::mem::replace(&mut self.batch, next);
            // A hub that has gone (it panicked) takes nothing more; its end is reported there.
            let _ = self.out.send(Stage::Batch(batch));
        }
    }
}

/// The second stage, the hub's loop: takes the parse stage's events in bursts, records them,
/// and hands them to the viewers and the view, until the parse stage has ended.
struct Pump {
    recorder: Option<Recorder>,
    backlog: Backlog,
    view: UnboundedSender<Event>,
    view_pace: Pace,
    /// Events for the view not handed over yet, and their weight: the view gets a burst in one
    /// go (one wake-up of its thread), not an event at a time.
    for_view: Vec<Event>,
    for_view_bytes: usize,
    viewers: Fanout,
    subscribers: Vec<Subscriber>,
    failed: bool,
    seen: u64,
}

impl Pump {
    /// Parked while nothing comes; takes each burst as it arrives (the parse stage gathered
    /// it: one wake-up a burst), with whatever else is queued then, and flushes once. Returns
    /// whether the parse stage ended as it should (every fact sent before its end was handed
    /// over).
    async fn run(
        &mut self,
        mut rx: UnboundedReceiver<Stage>,
        mut joins: UnboundedReceiver<Join>,
    ) -> bool {
        loop {
            let next = tokio::select! {
                biased;
                Some(join) = joins.recv() => {
                    self.join(join);
                    continue;
                }
                next = rx.recv() => next,
            };
            let end = match next {
                Some(Stage::Batch(batch)) => {
                    self.take(batch);
                    self.take_queued(&mut rx)
                }
                Some(Stage::End) => Some(true),
                None => Some(false),
            };
            self.flush();
            if let Some(whole) = end {
                return whole;
            }
        }
    }

    /// Takes every burst queued now; whether (and how) the parse stage has ended.
    fn take_queued(&mut self, rx: &mut UnboundedReceiver<Stage>) -> Option<bool> {
        loop {
            match rx.try_recv() {
                Ok(Stage::Batch(batch)) => self.take(batch),
                Ok(Stage::End) => return Some(true),
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => return Some(false),
            }
        }
    }

    /// A viewer joins: every event before its first live one is in the file first.
    fn join(&mut self, join: Join) {
        self.flush();
        self.viewers.join(join, self.seen);
    }

    /// Takes a burst of events, flushing every [`MAX_BURST`].
    fn take(&mut self, batch: Vec<Ready>) {
        for ready in batch {
            self.backlog.release(ready.weight);
            self.pass(ready.event, ready.known);
            if self.seen.is_multiple_of(MAX_BURST as u64) {
                self.flush();
            }
        }
    }

    /// Records a redacted event and passes it to the viewers and the view; `known`: it is a
    /// message known to be what its stream's last SSE data parses to, or an SSE event whose
    /// data a JSON-RPC message was parsed from ([`Recorder::write_known`]).
    fn pass(&mut self, event: Event, known: bool) {
        let seq = self.seen;
        self.seen += 1;
        if let Some(rec) = self.recorder.as_mut() {
            let written = rec.write_known(&event, known);
            report_failure(rec, written, &mut self.failed);
        }
        self.viewers.publish(seq, &event);
        for subscriber in &self.subscribers {
            subscriber.offer(&event);
        }
        self.for_view_bytes += event.weight();
        self.for_view.push(event);
        if self.for_view_bytes > VIEW_BATCH_BYTES {
            self.hand_to_view();
        }
    }

    /// Hands the events gathered for the view over, back to back (the view's thread is woken
    /// once for them, not once per event); a paced view that has fallen behind (a busy
    /// terminal, a stdout nobody reads) then holds the hub, and through its backlog the taps:
    /// memory stays bounded, nothing is dropped.
    fn hand_to_view(&mut self) {
        let weight = std::mem::take(&mut self.for_view_bytes);
        if self.for_view.is_empty() {
            return;
        }
        // Counted before the view can take (and release) any of them.
        let paced = self.view_pace.on();
        if paced {
            self.view_pace.backlog().add(weight);
        }
        let mut sent = true;
        for event in self.for_view.drain(..) {
            sent &= self.view.send(event).is_ok();
        }
        if !paced {
            return;
        }
        if !sent {
            // The view has gone: what it was not given is not waited for.
            self.view_pace.backlog().release(weight);
        } else {
            while self.view_pace.on()
                && self.view_pace.backlog().bytes() > Backlog::LIMIT
                && !self.view.is_closed()
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }

    /// Puts what was taken on disk and in the view's hands.
    fn flush(&mut self) {
        if let Some(rec) = self.recorder.as_mut() {
            let flushed = rec.flush();
            report_failure(rec, flushed, &mut self.failed);
        }
        self.hand_to_view();
    }

    fn tally(&self) -> Tally {
        Tally {
            written: self.recorder.as_ref().map_or(0, Recorder::events),
            seen: self.seen,
        }
    }
}

impl Hub {
    /// Starts the hub with an optional recorder; `redactor` hides secrets in every event
    /// before it is recorded or reaches the view. Fails when its threads cannot be started.
    pub fn start(recorder: Option<Recorder>, redactor: Redactor) -> Result<Self, HubError> {
        Self::start_with(recorder, redactor, Vec::new())
    }

    /// [`Hub::start`] with subscribers: each gets a copy of every event after the recorder.
    pub(crate) fn start_with(
        recorder: Option<Recorder>,
        redactor: Redactor,
        subscribers: Vec<Subscriber>,
    ) -> Result<Self, HubError> {
        let (input, rx) = unbounded_channel::<Fact>();
        let (view, output) = unbounded_channel::<Event>();
        let (joiner, joins) = unbounded_channel::<Join>();
        let (done, tally) = sync_channel(1);
        let (stop, stopped) = oneshot::channel();
        let recording = recorder.as_ref().map(|r| r.path().to_path_buf());
        let backlog = Backlog::default();
        let released = backlog.clone();
        let view_pace = Pace::default();
        let paced = view_pace.clone();
        let (staged, stages) = unbounded_channel::<Stage>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(HubError)?;
        let thread = std::thread::Builder::new()
            .name("mcpscope-hub".into())
            .spawn(move || {
                let mut pump = Pump {
                    recorder,
                    backlog: released,
                    view,
                    view_pace: paced,
                    for_view: Vec::new(),
                    for_view_bytes: 0,
                    viewers: Fanout::default(),
                    subscribers,
                    failed: false,
                    seen: 0,
                };
                let whole = runtime.block_on(pump.run(stages, joins));
                // The viewers' queues and the subscribers' close with the session.
                pump.viewers = Fanout::default();
                pump.subscribers.clear();
                // Without the parse stage's end, facts may be missing: no tally, and the
                // waiting side reports the hub stopped without finishing.
                if whole {
                    // The waiting side may have given up already: nothing is lost either way.
                    let _ = done.send(pump.tally());
                }
            })
            .map_err(HubError)?;
        let parse_runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(HubError)?;
        std::thread::Builder::new()
            .name("mcpscope-parse".into())
            .spawn(move || {
                let mut parse = Parse {
                    redactor,
                    out: staged,
                    batch: Vec::new(),
                };
                parse_runtime.block_on(parse.run(rx, stopped));
                let _ = parse.out.send(Stage::End);
            })
            .map_err(HubError)?;
        Ok(Self {
            input,
            output: Some(output),
            recording,
            backlog,
            view_pace,
            joiner,
            thread: Some(Done {
                thread,
                stop,
                tally,
            }),
        })
    }

    /// Where viewers ask to join the live feed (see [`crate::publish::start`]).
    pub fn joiner(&self) -> UnboundedSender<Join> {
        self.joiner.clone()
    }

    /// Makes the hub wait for its view: from now on, the view must call [`Pace::release`]
    /// for each event it takes from [`Hub::take_output`]'s receiver; while the view is more than
    /// [`Backlog::LIMIT`] behind, the hub waits (and the taps with it). Dropping every clone of
    /// the returned handle lets the hub run free again.
    pub fn pace_view(&self) -> Pace {
        self.view_pace.owned()
    }

    /// Takes the view's receiver (once).
    pub fn take_output(&mut self) -> Option<UnboundedReceiver<Event>> {
        self.output.take()
    }

    /// Records every event sent so far and stops: events sent later are not taken (seal the
    /// proxy's sink first, as a front end's shutdown does). Waits at most `patience` (every
    /// line written so far is already flushed); `None` if the hub did not finish in time.
    pub fn finish_within(mut self, patience: std::time::Duration) -> Option<Tally> {
        let done = self.thread.take();
        drop(self);
        let Done {
            thread,
            stop,
            tally,
        } = done?;
        let _ = stop.send(());
        Self::wait(thread, &tally, patience)
    }

    /// Waits until every sender is dropped and every event recorded; returns the number of
    /// events recorded.
    pub fn finish(mut self) -> u64 {
        let done = self.thread.take();
        drop(self);
        let Some(Done { thread, tally, .. }) = done else {
            return 0;
        };
        Self::wait(thread, &tally, std::time::Duration::MAX).map_or(0, |t| t.written)
    }

    fn wait(
        thread: JoinHandle<()>,
        tally: &Receiver<Tally>,
        patience: std::time::Duration,
    ) -> Option<Tally> {
        match tally.recv_timeout(patience) {
            Ok(tally) => {
                // The thread has sent its last word; it returns at once.
                let _ = thread.join();
                Some(tally)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let problem =
                    "the event hub stopped without finishing (one of its threads panicked)";
                tracing::error!("{problem}");
                let _ = writeln!(std::io::stderr(), "mcpscope: {problem}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::event::EventKind;
    use mcpscope_engine::record::Create;

    /// Everything the view has been sent so far (without reporting it taken).
    fn drain(output: &mut UnboundedReceiver<Event>, settle: std::time::Duration) -> Vec<Event> {
        std::thread::sleep(settle);
        let mut taken = Vec::new();
        while let Ok(event) = output.try_recv() {
            taken.push(event);
        }
        taken
    }

    #[test]
    fn a_paced_view_that_falls_behind_holds_the_hub_until_it_catches_up() {
        let mut hub = Hub::start(None, Redactor::new()).unwrap();
        let mut output = hub.take_output().unwrap();
        let pace = hub.pace_view();
        let big = "x".repeat(1 << 20);
        for n in 0..60 {
            let kind = EventKind::Note {
                stream: None,
                text: format!("{n} {big}"),
            };
            hub.input.send(Event::now(kind).into()).unwrap();
        }
        let settle = std::time::Duration::from_millis(300);
        // A note weighs only its fixed part (256 B): sixty of them are far below the limit.
        let first = drain(&mut output, settle);
        assert_eq!(first.len(), 60, "light events are not held");

        // SSE data weighs its bytes: a view that does not report what it took holds the hub
        // at the limit.
        let heavy = |n: u64| EventKind::SseEvent {
            stream: 1,
            id: Some(n.to_string()),
            event: None,
            retry: None,
            data: big.as_str().into(),
            start: 0,
            end: 0,
        };
        for n in 0..60 {
            hub.input.send(Event::now(heavy(n)).into()).unwrap();
        }
        let held = drain(&mut output, settle);
        let limit = Backlog::LIMIT / (big.len() + 256) + 1;
        assert!(
            !held.is_empty() && held.len() <= limit,
            "{} sent while the view is behind (limit {limit})",
            held.len()
        );
        for event in first.iter().chain(&held) {
            pace.release(event);
        }
        let more = drain(&mut output, settle);
        assert!(!more.is_empty(), "the hub goes on once the view catches up");
        assert!(held.len() + more.len() < 60);

        // A view that goes away lets the hub run free.
        drop(pace);
        let rest = drain(&mut output, settle);
        assert_eq!(held.len() + more.len() + rest.len(), 60);
        assert_eq!(
            hub.finish_within(std::time::Duration::from_secs(10))
                .map(|t| t.seen),
            Some(120)
        );
    }

    /// A body's message carries the body's text (its ends trimmed) while redaction leaves it as
    /// it parses; a body redaction changed, or a batch, carries none.
    #[test]
    fn a_body_message_carries_its_text_unless_redaction_changed_it() {
        let mut hub = Hub::start(None, Redactor::new()).unwrap();
        let mut output = hub.take_output().unwrap();
        let bodies = [
            " {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"password\":\"hunter2\"}}",
            "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]",
        ];
        for body in bodies {
            hub.input
                .send(Fact::Message {
                    t: Event::stamp(),
                    stream: 1,
                    dir: mcpscope_engine::event::Direction::ClientToServer,
                    bytes: bytes::Bytes::from(body),
                    mirrored: None,
                })
                .unwrap();
        }
        let events = drain(&mut output, std::time::Duration::from_millis(300));
        let sources: Vec<Option<&str>> = events.iter().map(|e| e.source.as_deref()).collect();
        assert_eq!(sources, [Some(bodies[0].trim()), None, None]);
        let EventKind::Message { body, .. } = &events[1].kind else {
            panic!("{:?}", events[1]);
        };
        assert_ne!(body["params"]["password"], "hunter2");
        hub.finish_within(std::time::Duration::from_secs(10));
    }

    #[test]
    fn events_reach_the_view_while_the_hub_polls_and_after_it_parks_again() {
        let mut hub = Hub::start(None, Redactor::new()).unwrap();
        let mut output = hub.take_output().unwrap();
        let note = |n: u32| {
            Event::now(EventKind::Note {
                stream: None,
                text: format!("note {n}"),
            })
        };
        // A burst, then more while the hub polls: each reaches the view in order.
        for n in 0..3 {
            hub.input.send(note(n).into()).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        hub.input.send(note(3).into()).unwrap();
        let settle = std::time::Duration::from_millis(200);
        let texts = |events: Vec<Event>| -> Vec<String> {
            events
                .into_iter()
                .map(|e| match e.kind {
                    EventKind::Note { text, .. } => text,
                    other => format!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(
            texts(drain(&mut output, settle)),
            ["note 0", "note 1", "note 2", "note 3"]
        );
        // Long past its idle polls the hub is parked: one event wakes it.
        hub.input.send(note(4).into()).unwrap();
        assert_eq!(texts(drain(&mut output, settle)), ["note 4"]);
        assert_eq!(
            hub.finish_within(std::time::Duration::from_secs(10))
                .map(|t| t.seen),
            Some(5)
        );
    }

    #[test]
    fn finishing_records_what_was_sent_even_with_senders_still_open() {
        let dir = std::env::temp_dir().join(format!("mcpscope-hub-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rec.jsonl");
        let recorder = Recorder::create(&path, Create::Replace, true).unwrap();
        let hub = Hub::start(Some(recorder), Redactor::new()).unwrap();
        for n in 0..3 {
            let kind = EventKind::Note {
                stream: None,
                text: format!("note {n}"),
            };
            hub.input.send(Event::now(kind).into()).unwrap();
        }
        let started = std::time::Instant::now();
        let _sender_still_open = hub.input.clone();
        assert_eq!(
            hub.finish_within(std::time::Duration::from_secs(10)),
            Some(Tally {
                written: 3,
                seen: 3
            })
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4, "header and three events");

        let hub = Hub::start(None, Redactor::new()).unwrap();
        hub.input
            .send(
                Event::now(EventKind::Note {
                    stream: None,
                    text: "unrecorded".into(),
                })
                .into(),
            )
            .unwrap();
        let tally = hub.finish_within(std::time::Duration::from_secs(10));
        assert_eq!(
            tally,
            Some(Tally {
                written: 0,
                seen: 1
            })
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
