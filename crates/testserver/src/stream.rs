//! Server-side SSE streams kept in memory so that a client can resume them.
//!
//! A [`StreamLog`] is written by a producer task that runs independently of the HTTP response:
//! when the client drops the response, production goes on into the buffer, and a resumption
//! (GET with `Last-Event-ID`) reads the buffered events and then the live ones.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use tokio::sync::watch;

use mcpscope_engine::wire::sse::encode;

/// Events kept per stream for replay.
pub(crate) const MAX_EVENTS: usize = 512;

/// The response body type of the test server.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// One server-side SSE stream.
#[derive(Debug)]
pub(crate) struct StreamLog {
    /// Stream name, the prefix of its event ids (no `-` in it).
    pub name: String,
    /// Whether events carry `id:` fields.
    pub ids: bool,
    inner: Mutex<Inner>,
    tx: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Sequence number of `events[0]`.
    base: u64,
    events: VecDeque<Bytes>,
    finished: bool,
    /// Bumped by [`StreamLog::disconnect`]: readers opened before end their response once they
    /// have sent what was there at that moment (`cut`).
    epoch: u64,
    cut: u64,
}

impl StreamLog {
    /// A new, empty stream.
    pub(crate) fn new(name: String, ids: bool) -> Arc<Self> {
        let (tx, _) = watch::channel(0);
        Arc::new(Self {
            name,
            ids,
            inner: Mutex::new(Inner::default()),
            tx,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push_raw(&self, f: impl FnOnce(Option<String>) -> String) {
        {
            let mut inner = self.lock();
            if inner.finished {
                return;
            }
            let seq = inner.base + inner.events.len() as u64;
            let id = self.ids.then(|| format!("{}-{}", self.name, seq));
            inner.events.push_back(Bytes::from(f(id)));
            while inner.events.len() > MAX_EVENTS {
                inner.events.pop_front();
                inner.base += 1;
            }
        }
        self.tx.send_modify(|n| *n += 1);
    }

    /// Appends a JSON-RPC message as an event.
    pub(crate) fn push_message(&self, msg: &serde_json::Value) {
        let data = msg.to_string();
        self.push_raw(|id| encode(id.as_deref(), Some("message"), None, &data));
    }

    /// Appends a priming event (an id and empty data), with `retry:` if given.
    /// Does nothing when the stream has no ids.
    pub(crate) fn push_priming(&self, retry_ms: Option<u64>) {
        if !self.ids {
            return;
        }
        self.push_raw(|id| encode(id.as_deref(), None, retry_ms, ""));
    }

    /// Marks the stream finished: readers end once they have read everything.
    pub(crate) fn finish(&self) {
        self.lock().finished = true;
        self.tx.send_modify(|n| *n += 1);
    }

    /// Ends the HTTP responses now reading this stream without finishing it: what is pushed
    /// afterwards waits for a resumption (the 2025-11-25 polling pattern).
    pub(crate) fn disconnect(&self) {
        {
            let mut inner = self.lock();
            inner.epoch += 1;
            inner.cut = inner.base + inner.events.len() as u64;
        }
        self.tx.send_modify(|n| *n += 1);
    }

    /// Whether some HTTP response is reading this stream.
    pub(crate) fn has_readers(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Whether the stream is finished.
    pub(crate) fn is_finished(&self) -> bool {
        self.lock().finished
    }

    /// The sequence number following event id `id` of this stream, if it names one of its events.
    pub(crate) fn resume_point(&self, seq: u64) -> Option<u64> {
        let inner = self.lock();
        let next = inner.base + inner.events.len() as u64;
        (seq < next).then_some(seq + 1)
    }

    /// Next event at or after `*next`, or whether the stream is over.
    fn take(&self, next: &mut u64, epoch: u64) -> Step {
        let inner = self.lock();
        if *next < inner.base {
            *next = inner.base;
        }
        if inner.epoch != epoch && *next >= inner.cut {
            return Step::End;
        }
        let idx = (*next - inner.base) as usize;
        if let Some(ev) = inner.events.get(idx) {
            *next += 1;
            return Step::Event(ev.clone());
        }
        if inner.finished {
            Step::End
        } else {
            Step::Wait
        }
    }

    /// A response body reading this stream from sequence number `from`, with a keep-alive
    /// comment whenever nothing was sent for `keepalive` (none when it is `None`).
    pub(crate) fn body(self: &Arc<Self>, from: u64, keepalive: Option<Duration>) -> Body {
        let state = Reader {
            log: Arc::clone(self),
            epoch: self.lock().epoch,
            next: from,
            rx: self.tx.subscribe(),
            keepalive,
        };
        let stream = futures_util::stream::unfold(state, |mut r| async move {
            loop {
                r.rx.borrow_and_update();
                match r.log.take(&mut r.next, r.epoch) {
                    Step::Event(bytes) => return Some((Ok(Frame::data(bytes)), r)),
                    Step::End => return None,
                    Step::Wait => {}
                }
                tokio::select! {
                    changed = r.rx.changed() => {
                        if changed.is_err() {
                            return None;
                        }
                    }
                    _ = idle(r.keepalive) => {
                        return Some((Ok(Frame::data(Bytes::from_static(b": keep-alive\n\n"))), r));
                    }
                }
            }
        });
        StreamBody::new(stream).boxed_unsync()
    }
}

enum Step {
    Event(Bytes),
    End,
    Wait,
}

struct Reader {
    log: Arc<StreamLog>,
    epoch: u64,
    next: u64,
    rx: watch::Receiver<u64>,
    keepalive: Option<Duration>,
}

/// Waits `keepalive`, or forever when there is none.
async fn idle(keepalive: Option<Duration>) {
    match keepalive {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

/// Splits an event id `<stream>-<n>` into its parts.
pub(crate) fn parse_event_id(id: &str) -> Option<(&str, u64)> {
    let (name, n) = id.trim().rsplit_once('-')?;
    Some((name, n.parse().ok()?))
}
