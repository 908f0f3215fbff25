//! Accepting connections without spinning: when `accept` fails (out of file descriptors, most
//! often), the loop backs off exponentially up to a cap and reports the burst when it starts and,
//! with a count, when it is over, instead of once per failure. Accepts that succeed between
//! failures (a descriptor freed, then taken again) do not end the burst: it is over once an
//! accept succeeds after a second of accepts without failure.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// The first pause after a failed accept.
const FIRST: Duration = Duration::from_millis(5);
/// The longest pause between accepts while they fail.
const CAP: Duration = Duration::from_secs(1);
/// A burst is over when accepts have succeeded, without a failure, for this long.
const QUIET: Duration = Duration::from_secs(1);
/// A long burst is summarised at most this often while it lasts.
const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// A burst of failed accepts, being backed off from.
#[derive(Debug, Default)]
pub(crate) struct Acceptor {
    failures: u64,
    pause: Duration,
    since: Option<Instant>,
    ok_since: Option<Instant>,
    reported: Option<Instant>,
}

impl Acceptor {
    /// Accepts the next connection, backing off while accepting fails; `label` names the
    /// listener in the log.
    pub(crate) async fn accept(
        &mut self,
        listener: &TcpListener,
        label: &str,
    ) -> (TcpStream, SocketAddr) {
        loop {
            match listener.accept().await {
                Ok(pair) => {
                    self.recovered(label);
                    return pair;
                }
                Err(e) => {
                    let pause = self.failed(label, &e);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// Counts a failure; returns how long to pause.
    fn failed(&mut self, label: &str, e: &std::io::Error) -> Duration {
        let now = Instant::now();
        self.failures += 1;
        self.ok_since = None;
        self.pause = if self.pause.is_zero() {
            FIRST
        } else {
            (self.pause * 2).min(CAP)
        };
        let since = *self.since.get_or_insert(now);
        match self.reported {
            None => {
                tracing::warn!("{label}: accept failing ({e}); backing off up to {CAP:?}");
                self.reported = Some(now);
            }
            Some(at) if now.duration_since(at) >= SUMMARY_EVERY => {
                tracing::warn!(
                    "{label}: accept still failing ({e}): {} failures in {:?}",
                    self.failures,
                    now.duration_since(since)
                );
                self.reported = Some(now);
            }
            Some(_) => {}
        }
        self.pause
    }

    /// Notes a success: the next failure starts its backoff afresh; the burst is over (and
    /// reported once with its count) when accepts have succeeded for a quiet while.
    fn recovered(&mut self, label: &str) {
        self.pause = Duration::ZERO;
        let Some(since) = self.since else {
            return;
        };
        let ok_since = *self.ok_since.get_or_insert_with(Instant::now);
        if ok_since.elapsed() >= QUIET {
            tracing::warn!(
                "{label}: accepting again after {} failed accepts in {:?}",
                self.failures,
                ok_since.duration_since(since)
            );
            *self = Self::default();
        }
    }
}
