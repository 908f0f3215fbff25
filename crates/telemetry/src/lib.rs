//! Live OTLP/HTTP export: a copy of each event the proxy reports is folded into a model of its
//! own; each call that finishes (answered, failed, orphaned, cancelled) becomes a span built by
//! `mcpscope_export::otlp`, batched and sent as protobuf. Nothing here can slow the traffic or
//! the view: the copy goes through a bounded queue with `try_send` (full: dropped and counted),
//! batches through another (full: dropped and counted), and every request has a timeout.

pub mod convert;
mod fold;
mod fork;
pub mod metrics;
pub mod send;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::Uri;
use mcpscope_engine::UsageError;
use mcpscope_engine::redact::Redactor;

pub use fork::{Telemetry, start, subscribe};

/// How the exporter batches and sends.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where `ExportTraceServiceRequest`s are POSTed, as given (`http://host:4318/v1/traces`).
    pub endpoint: Uri,
    /// Events waiting to be folded before copies are dropped.
    pub queue: usize,
    /// Spans per request at most.
    pub batch: usize,
    /// Finished spans are sent at least this often.
    pub interval: Duration,
    /// Bound on one export request (connect, send, answer).
    pub timeout: Duration,
}

impl Options {
    /// Defaults for `endpoint`: 512 spans or every second, 5 s per request, 65 536 queued events.
    pub fn new(endpoint: Uri) -> Self {
        Self {
            endpoint,
            queue: 65_536,
            batch: 512,
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
        }
    }

    /// Checks `--otlp-endpoint`: an http:// URL with a host, used as given.
    /// A userinfo (`http://user:pass@host:4318/v1/traces`) is sent as `Authorization: Basic`.
    pub fn from_endpoint(text: &str) -> Result<Self, UsageError> {
        // A password in the URL never reaches the terminal.
        let shown = Redactor::disabled().url(text);
        let uri: Uri = text
            .parse()
            .map_err(|e| UsageError(format!("--otlp-endpoint {shown:?} is not a URL: {e}")))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none_or(str::is_empty) {
            return Err(UsageError(format!(
                "--otlp-endpoint {shown:?} must be an http:// URL with a host"
            )));
        }
        Ok(Self::new(uri))
    }
}

/// What the exporter did, counted as it happens.
#[derive(Debug, Default)]
pub struct Stats {
    /// Event copies dropped because the exporter's queue was full.
    pub dropped_events: AtomicU64,
    /// Spans dropped: their batch found the send queue full, or its request failed.
    pub dropped_spans: AtomicU64,
    /// Spans the collector accepted (a 2xx answer).
    pub sent_spans: AtomicU64,
    /// Spans handed to the sender and not yet accepted or dropped (queued or in flight).
    pub in_flight_spans: AtomicU64,
}

impl Stats {
    fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `(dropped events, dropped spans, sent spans)` now.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.dropped_events.load(Ordering::Relaxed),
            self.dropped_spans.load(Ordering::Relaxed),
            self.sent_spans.load(Ordering::Relaxed),
        )
    }
}

/// Shared counters of one exporter.
pub type SharedStats = Arc<Stats>;
