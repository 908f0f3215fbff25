//! The exporter as a session's subscriber: a copy of each event goes to it if its queue has
//! room; the view and the traffic never wait for it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mcpscope_engine::event::Event;
use mcpscope_session::SessionBuilder;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::{Options, SharedStats, Stats, fold};

/// A running exporter.
pub struct Telemetry {
    /// Its counters.
    pub stats: SharedStats,
    finish: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Telemetry {
    /// What the status bar says about the exporter: nothing until something was dropped.
    pub fn status_text(&self) -> Arc<dyn Fn() -> Option<String> + Send + Sync> {
        let stats = self.stats.clone();
        Arc::new(move || {
            let (events, spans, _) = stats.snapshot();
            (events + spans > 0).then(|| format!("OTLP dropped: {events} events, {spans} spans"))
        })
    }

    /// Sends what is left (finished calls, then each session's root span) and stops, waiting
    /// at most `within`.
    pub async fn finish_within(mut self, within: Duration) {
        if let Some(finish) = self.finish.take() {
            let _ = finish.send(());
        }
        if tokio::time::timeout(within, &mut self.task).await.is_err() {
            self.task.abort();
            // The batches still queued or in flight are dropped too.
            let lost = self.stats.in_flight_spans.swap(0, Ordering::Relaxed);
            self.stats.dropped_spans.fetch_add(lost, Ordering::Relaxed);
            tracing::warn!("OTLP export: gave up on the last spans after {within:?}");
        }
        let (events, spans, sent) = self.stats.snapshot();
        tracing::info!("OTLP export: {sent} spans sent, {spans} spans and {events} events dropped");
    }
}

/// Subscribes an exporter to `session` (call inside a tokio runtime): it gets a copy of every
/// event on a queue `options.queue` long; a copy that finds it full is dropped and counted.
pub fn subscribe(session: &mut SessionBuilder, options: Options) -> Telemetry {
    let stats = Arc::new(Stats::default());
    let counted = stats.clone();
    let copies = session.subscribe(options.queue, move || {
        Stats::add(&counted.dropped_events, 1);
    });
    run(copies, options, stats)
}

/// Starts an exporter on `copies` (call inside a tokio runtime): it runs until the queue closes
/// or it is finished.
pub fn start(copies: mpsc::Receiver<Event>, options: Options) -> Telemetry {
    run(copies, options, Arc::new(Stats::default()))
}

fn run(copies: mpsc::Receiver<Event>, options: Options, stats: SharedStats) -> Telemetry {
    let (finish_tx, finish_rx) = oneshot::channel();
    let task = tokio::spawn(fold::run(copies, finish_rx, options, stats.clone()));
    Telemetry {
        stats,
        finish: Some(finish_tx),
        task,
    }
}
