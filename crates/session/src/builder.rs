//! A session declared, then run as one: a front end feeds [`Session::sink`]; the hub records
//! each event (and its live index follows the recording), then hands it to the view
//! ([`Session::view`]), to the viewers attached over the published socket and to the
//! subscribers ([`SessionBuilder::subscribe`]); [`Session::finish`] ends it all in order.

use std::path::Path;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use tokio::sync::mpsc::{self, UnboundedReceiver};

use mcpscope_engine::event::Event;
use mcpscope_engine::model::Retention;
use mcpscope_engine::record::Recorder;
use mcpscope_engine::redact::Redactor;

use crate::hub::{Hub, HubError, Subscriber, Tally};
use crate::pace::Pace;
use crate::publish::{self, Published, place, wire::SessionInfo};
use crate::sink::EventSink;

/// How long [`Session::finish`] waits for the attached viewers to read the session's end.
const VIEWERS_PATIENCE: Duration = Duration::from_secs(2);

/// What a session will be: what it says about itself, where it records, what it redacts,
/// whether it is published for `mcpscope attach`, and who subscribes to its events.
pub struct SessionBuilder {
    info: SessionInfo,
    recorder: Option<Recorder>,
    redactor: Redactor,
    publish: bool,
    subscribers: Vec<Subscriber>,
}

impl SessionBuilder {
    /// A name given by the user (`--name`).
    pub fn name(mut self, name: Option<String>) -> Self {
        self.info.name = name;
        self
    }

    /// Calls a view holds in full in memory (`--keep`).
    pub fn keep(mut self, keep_calls: usize) -> Self {
        self.info.keep_calls = keep_calls;
        self
    }

    /// The upstream as shown (credentials already hidden).
    pub fn upstream(mut self, shown: String) -> Self {
        self.info.upstream = Some(shown);
        self
    }

    /// The server command of a stdio session, redacted by the rule the recording's
    /// `process_started` uses.
    pub fn command(mut self, mut command: Vec<String>) -> Self {
        self.redactor.command(&mut command);
        self.info.command = Some(command);
        self
    }

    /// Records every event into `recorder` (none: unrecorded).
    pub fn record(mut self, recorder: Option<Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// Whether the session is published for `mcpscope attach` once its front end is up
    /// ([`Session::publish`]).
    pub fn published(mut self, publish: bool) -> Self {
        self.publish = publish;
        self
    }

    /// A consumer beside the view (an exporter, the metrics): a copy of every event, after the
    /// recorder, on a queue `queue` long; a copy that finds it full is dropped and `on_drop` is
    /// told, so a subscriber never slows the traffic or the view. The queue closes when the
    /// session finishes.
    pub fn subscribe(
        &mut self,
        queue: usize,
        on_drop: impl Fn() + Send + 'static,
    ) -> mpsc::Receiver<Event> {
        let (copies, rx) = mpsc::channel(queue.max(1));
        self.subscribers.push(Subscriber {
            copies,
            on_drop: Box::new(on_drop),
        });
        rx
    }

    /// Starts the hub: from now on the sink takes facts.
    pub fn start(self) -> Result<Session, HubError> {
        let mut info = self.info;
        info.recording = self
            .recorder
            .as_ref()
            .map(|r| std::path::absolute(r.path()).unwrap_or_else(|_| r.path().to_path_buf()));
        let hub = Hub::start_with(self.recorder, self.redactor, self.subscribers)?;
        let sink = EventSink::to_hub(hub.input.clone()).with_backlog(hub.backlog.clone());
        Ok(Session {
            hub,
            sink,
            info,
            publish: self.publish,
            published: None,
        })
    }
}

/// A running session.
pub struct Session {
    hub: Hub,
    sink: EventSink,
    info: SessionInfo,
    publish: bool,
    published: Option<Published>,
}

impl Session {
    /// A session of `kind` (`http`, `stdio`, `demo`, `cell`), every event redacted by `redactor`
    /// before it is recorded or shown; unrecorded, unpublished and keeping the default number
    /// of calls until told otherwise.
    pub fn builder(kind: &str, redactor: Redactor) -> SessionBuilder {
        SessionBuilder {
            info: SessionInfo {
                kind: kind.into(),
                name: None,
                listen: None,
                upstream: None,
                command: None,
                started: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
                recording: None,
                keep_calls: Retention::DEFAULT_KEEP_CALLS,
            },
            recorder: None,
            redactor,
            publish: false,
            subscribers: Vec::new(),
        }
    }

    /// Where the front end sends its facts (clones share one ledger of open exchanges).
    pub fn sink(&self) -> EventSink {
        self.sink.clone()
    }

    /// What the session says about itself.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// The recording being written, if any.
    pub fn recording(&self) -> Option<&Path> {
        self.hub.recording.as_deref()
    }

    /// Publishes the session for `mcpscope attach`, if the builder asked for it, once the
    /// front end is up: `listen` is where it listens. Says on stderr how to attach, or why the
    /// session runs on unpublished (a stdio shim says nothing unless something is wrong: its
    /// stderr is the server's).
    pub fn publish(&mut self, listen: Option<String>) {
        self.info.listen = listen;
        if !self.publish || self.published.is_some() {
            return;
        }
        match publish::start(self.info.clone(), self.hub.joiner()) {
            Ok(published) => {
                tracing::info!("attach socket: {}", published.path().display());
                if self.info.kind != "stdio" {
                    crate::say!(
                        "mcpscope: watch from another terminal: mcpscope attach {}",
                        std::process::id()
                    );
                }
                self.published = Some(published);
            }
            Err(e) => crate::say!(
                "mcpscope: WARNING: not published for `mcpscope attach`: {e} (directory {})",
                place::runtime_dir().display()
            ),
        }
    }

    /// The view's feed and its pace (once): the view tells the pace of each event it takes, and
    /// the hub waits (the taps with it) while the view is too far behind.
    pub fn view(&mut self) -> Option<(UnboundedReceiver<Event>, Pace)> {
        let feed = self.hub.take_output()?;
        Some((feed, self.hub.pace_view()))
    }

    /// The view's feed without pacing (once): a reader that never falls behind, or that only
    /// drains it.
    pub fn feed(&mut self) -> Option<UnboundedReceiver<Event>> {
        self.hub.take_output()
    }

    /// Ends the session: seals the sink (every exchange still open is ended first, detail
    /// `shutdown`), records everything sent so far within `patience`, closes the view's feed
    /// and the subscribers' queues, and tells the attached viewers it ended. `None` when the
    /// hub did not finish in time (every line written so far is on disk).
    pub async fn finish(self, patience: Duration) -> Option<Tally> {
        let Session {
            hub,
            sink,
            published,
            ..
        } = self;
        sink.seal();
        drop(sink);
        let tally = tokio::task::spawn_blocking(move || hub.finish_within(patience))
            .await
            .ok()
            .flatten();
        if let Some(published) = published {
            published.finish(VIEWERS_PATIENCE).await;
        }
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::event::EventKind;
    use mcpscope_engine::record::{Create, Events};

    fn note(text: &str) -> EventKind {
        EventKind::Note {
            stream: None,
            text: text.into(),
        }
    }

    /// A session declared with a recorder, a subscriber and a view: every event sent before
    /// `finish` is recorded, reaches the view in order and the subscriber as far as its queue
    /// holds (the rest counted dropped); finishing closes the view's feed and the queue.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_records_views_and_feeds_its_subscribers_until_it_finishes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        let recorder = Recorder::create(&path, Create::New, true).expect("recorder");
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = dropped.clone();
        let mut builder = Session::builder("test", Redactor::new())
            .name(Some("unit".into()))
            .record(Some(recorder));
        let mut copies = builder.subscribe(2, move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let mut session = builder.start().expect("session");
        assert_eq!(session.info().kind, "test");
        assert_eq!(session.info().name.as_deref(), Some("unit"));
        assert!(
            session
                .info()
                .recording
                .as_ref()
                .is_some_and(|p| p.is_absolute())
        );
        let (mut feed, pace) = session.view().expect("the view's feed");
        assert!(session.view().is_none(), "the feed is taken once");
        let sink = session.sink();
        for i in 0..5 {
            sink.emit(note(&format!("n{i}")));
        }
        let tally = session
            .finish(Duration::from_secs(10))
            .await
            .expect("finished in time");
        assert_eq!((tally.seen, tally.written), (5, 5));
        let mut viewed = Vec::new();
        while let Some(event) = feed.recv().await {
            pace.release(&event);
            viewed.push(event);
        }
        let texts: Vec<String> = viewed
            .iter()
            .map(|e| match &e.kind {
                EventKind::Note { text, .. } => text.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["n0", "n1", "n2", "n3", "n4"]);
        let mut subscribed = 0;
        while copies.recv().await.is_some() {
            subscribed += 1;
        }
        let dropped = dropped.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            subscribed + dropped,
            5,
            "{subscribed} copies, {dropped} dropped"
        );
        assert!(subscribed >= 2, "the queue's room was used: {subscribed}");
        let recorded = Events::open(&path).expect("recording").count();
        assert_eq!(recorded, 5);
    }

    /// An unpublished session never makes a socket, and a sink used after `finish` is sealed:
    /// nothing it is given later is taken.
    #[tokio::test]
    async fn an_unpublished_session_makes_no_socket_and_finishing_seals_its_sink() {
        let mut session = Session::builder("test", Redactor::new())
            .start()
            .expect("session");
        session.publish(Some("127.0.0.1:1".into()));
        assert!(session.published.is_none());
        assert_eq!(session.info().listen.as_deref(), Some("127.0.0.1:1"));
        let late = session.sink();
        let mut feed = session.feed().expect("feed");
        late.emit(note("before"));
        let tally = session
            .finish(Duration::from_secs(10))
            .await
            .expect("tally");
        late.emit(note("after"));
        assert_eq!(tally.seen, 1);
        let mut texts = Vec::new();
        while let Some(event) = feed.recv().await {
            if let EventKind::Note { text, .. } = event.kind {
                texts.push(text);
            }
        }
        assert_eq!(texts, ["before"]);
    }
}
