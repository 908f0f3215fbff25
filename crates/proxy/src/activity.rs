//! What a client connection is doing, and the watchdog that closes it when it is stuck: a
//! request head that dribbles in (or never comes) past the head timeout, or a keep-alive
//! connection with no exchange in flight past the idle timeout. A connection with an exchange in
//! flight (an open SSE response included) is never closed by a timer.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// A request head did not arrive whole within the head timeout.
    Head(Duration),
    /// No exchange was in flight for the idle timeout.
    Idle(Duration),
}

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expired::Head(d) => write!(f, "request head not received within {d:?}"),
            Expired::Idle(d) => write!(f, "idle for {d:?} with no exchange in flight"),
        }
    }
}

#[derive(Debug)]
struct State {
    /// Exchanges whose head has arrived and whose response has not ended.
    in_flight: usize,
    /// When the connection last became quiet (accepted, or its last exchange ended).
    quiet_since: Instant,
    /// When bytes of a next request first arrived while quiet.
    head_started: Option<Instant>,
    /// Whether a request was ever served (before that, the head timeout runs from accept).
    served: bool,
    /// HTTP/2: bytes between requests are control frames, not a request head.
    h2: bool,
}

/// A client connection's activity, shared by its I/O, its exchanges and its watchdog.
#[derive(Debug, Clone)]
pub(crate) struct Activity(Arc<Mutex<State>>);

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(State {
            in_flight: 0,
            quiet_since: Instant::now(),
            head_started: None,
            served: false,
            h2: false,
        })))
    }
}

impl Activity {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes bytes read from the client.
    pub(crate) fn read_bytes(&self) {
        let mut s = self.state();
        if s.in_flight == 0 && s.head_started.is_none() {
            s.head_started = Some(Instant::now());
        }
    }

    /// Notes a request head that arrived; the exchange is in flight until the guard drops.
    pub(crate) fn begin(&self, h2: bool) -> InFlight {
        let mut s = self.state();
        s.in_flight += 1;
        s.head_started = None;
        s.served = true;
        s.h2 |= h2;
        InFlight(self.clone())
    }

    /// When the connection expires if nothing changes, and why (`None` while busy).
    fn deadline(&self, head: Duration, idle: Duration) -> Option<(Instant, Expired)> {
        let s = self.state();
        if s.in_flight > 0 {
            return None;
        }
        match (s.head_started, s.served, s.h2) {
            (Some(start), _, false) => Some((start + head, Expired::Head(head))),
            (_, false, _) => Some((s.quiet_since + head, Expired::Head(head))),
            _ => Some((s.quiet_since + idle, Expired::Idle(idle))),
        }
    }

    /// Resolves when the connection has expired (never while an exchange is in flight).
    pub(crate) async fn expired(&self, head: Duration, idle: Duration) -> Expired {
        // Rechecked at least this often: state changes do not wake the watchdog.
        let step = (head.min(idle) / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        loop {
            let now = Instant::now();
            match self.deadline(head, idle) {
                Some((at, why)) if at <= now => return why,
                Some((at, _)) => tokio::time::sleep_until(at.min(now + step)).await,
                None => tokio::time::sleep(step).await,
            }
        }
    }
}

/// One exchange in flight on a connection; dropping it (when the response has ended or was
/// abandoned) makes the connection quiet again once no other exchange is in flight.
#[derive(Debug)]
pub(crate) struct InFlight(Activity);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight == 0 {
            s.quiet_since = Instant::now();
            s.head_started = None;
        }
    }
}

/// A response body that keeps its exchange in flight until it ends or is dropped.
pub(crate) struct Tracked<B> {
    body: B,
    in_flight: Option<InFlight>,
}

impl<B> Tracked<B> {
    /// Wraps `body`, holding `in_flight` until its end.
    pub(crate) fn new(body: B, in_flight: InFlight) -> Self {
        Self {
            body,
            in_flight: Some(in_flight),
        }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let frame = std::pin::Pin::new(&mut this.body).poll_frame(cx);
        if matches!(frame, std::task::Poll::Ready(None | Some(Err(_)))) {
            this.in_flight = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
