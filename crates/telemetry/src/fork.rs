//! The fork: the view's feed passes through untouched, a copy of each event goes to the
//! exporter if its queue has room.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mcpscope_engine::event::Event;
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

/// Splits `feed` in two: the view's, carrying every event as before, and a bounded queue of
/// copies (`queue` long) for a consumer beside it; a copy that finds the queue full is dropped
/// (`on_drop` is told), so the consumer never slows the traffic or the view.
pub(crate) fn split(
    mut feed: mpsc::UnboundedReceiver<Event>,
    queue: usize,
    on_drop: impl Fn() + Send + 'static,
) -> (mpsc::UnboundedReceiver<Event>, mpsc::Receiver<Event>) {
    let (view_tx, view_rx) = mpsc::unbounded_channel();
    let (copy_tx, copy_rx) = mpsc::channel(queue.max(1));
    tokio::spawn(async move {
        let mut view = Some(view_tx);
        while let Some(event) = feed.recv().await {
            if copy_tx.try_send(event.clone()).is_err() {
                on_drop();
            }
            if view.as_ref().is_some_and(|v| v.send(event).is_err()) {
                view = None;
            }
        }
    });
    (view_rx, copy_rx)
}

/// Starts an exporter on `feed` (call inside a tokio runtime): returns the feed for the view,
/// carrying every event as before, and the exporter's handle.
pub fn start(
    feed: mpsc::UnboundedReceiver<Event>,
    options: Options,
) -> (mpsc::UnboundedReceiver<Event>, Telemetry) {
    let stats = Arc::new(Stats::default());
    let fork_stats = stats.clone();
    let (view_rx, copy_rx) = split(feed, options.queue, move || {
        Stats::add(&fork_stats.dropped_events, 1);
    });
    let (finish_tx, finish_rx) = oneshot::channel();
    let task = tokio::spawn(fold::run(copy_rx, finish_rx, options, stats.clone()));
    let telemetry = Telemetry {
        stats,
        finish: Some(finish_tx),
        task,
    };
    (view_rx, telemetry)
}
