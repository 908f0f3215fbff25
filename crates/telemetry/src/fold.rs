//! The exporter's own model: finished calls become spans, batched to the sender task; a task
//! operation's span and its requests' spans go out when the operation ends.

use std::collections::BTreeSet;

use chrono::Utc;
use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Verdict};
use mcpscope_export::otlp;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::{Options, SharedStats, Stats, convert, send::Sender};

/// Batches waiting for the sender before new ones are dropped.
const SEND_QUEUE: usize = 4;

struct Folder {
    model: Model,
    /// Calls not finished yet (indices into `model.calls`).
    open: Vec<usize>,
    /// Calls seen so far.
    seen: usize,
    /// Sessions with a call sent (their root spans go out at the end).
    sessions: BTreeSet<usize>,
    batch: Vec<Value>,
}

impl Folder {
    /// Moves every call that finished since the last look into the batch.
    fn collect(&mut self) {
        self.open.extend(self.seen..self.model.calls.len());
        self.seen = self.model.calls.len();
        let model = &self.model;
        let batch = &mut self.batch;
        let sessions = &mut self.sessions;
        self.open.retain(|&index| {
            let Some(call) = model.calls.get(index) else {
                return false;
            };
            // A request about a task goes out with its operation, when the operation ends.
            let operation_open = call
                .about_task()
                .and_then(|op| model.calls.get(op))
                .is_some_and(|op| op.verdict.is_open());
            if call.verdict.is_open() || operation_open {
                return true;
            }
            if let Verdict::Orphaned { death, .. } = &call.verdict {
                tracing::warn!(
                    "call {} ({}) orphaned: stream #{} died at {}",
                    index + 1,
                    call.title(),
                    death.stream,
                    death.at
                );
            }
            batch.extend(otlp::spans_of_call(model, call));
            sessions.insert(call.session);
            false
        });
    }
}

/// Folds `events` until they end or `finish` fires, handing batches to a sender task.
pub async fn run(
    mut events: mpsc::Receiver<Event>,
    mut finish: oneshot::Receiver<()>,
    options: Options,
    stats: SharedStats,
) {
    let (batches, queue) = mpsc::channel::<Vec<Value>>(SEND_QUEUE);
    let sender = tokio::spawn(send_all(queue, Sender::new(&options), stats.clone()));
    let mut folder = Folder {
        model: Model::new(),
        open: Vec::new(),
        seen: 0,
        sessions: BTreeSet::new(),
        batch: Vec::new(),
    };
    let mut tick = tokio::time::interval(options.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported = (0, 0);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    // A call finishing comes with a notice; anything else waits for the tick.
                    if !folder.model.apply(&event).is_empty() {
                        folder.collect();
                    }
                    if folder.batch.len() >= options.batch {
                        hand_over(&batches, &mut folder.batch, &stats);
                    }
                }
                None => break,
            },
            _ = tick.tick() => {
                folder.model.advance(Utc::now());
                folder.collect();
                hand_over(&batches, &mut folder.batch, &stats);
                let (events, spans, _) = stats.snapshot();
                if (events, spans) != reported {
                    reported = (events, spans);
                    tracing::warn!("OTLP export: {spans} spans and {events} events dropped so far");
                }
            }
            _ = &mut finish => break,
        }
    }
    while let Ok(event) = events.try_recv() {
        folder.model.apply(&event);
    }
    folder.model.advance(Utc::now());
    folder.collect();
    let roots: Vec<Value> = folder
        .sessions
        .iter()
        .filter_map(|&s| otlp::session_span(&folder.model, s))
        .collect();
    folder.batch.extend(roots);
    for chunk in std::mem::take(&mut folder.batch).chunks(options.batch.max(1)) {
        hand_over(&batches, &mut chunk.to_vec(), &stats);
    }
    drop(batches);
    let _ = sender.await;
}

/// Queues the batch for the sender, or drops and counts it when the queue is full.
fn hand_over(batches: &mpsc::Sender<Vec<Value>>, batch: &mut Vec<Value>, stats: &Stats) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::take(batch);
    let n = spans.len();
    if batches.try_send(spans).is_err() {
        Stats::add(&stats.dropped_spans, n);
    } else {
        Stats::add(&stats.in_flight_spans, n);
    }
}

/// Sends each batch in turn; a failed request drops its spans.
async fn send_all(mut queue: mpsc::Receiver<Vec<Value>>, sender: Sender, stats: SharedStats) {
    while let Some(spans) = queue.recv().await {
        let n = spans.len();
        let request = convert::request(&otlp::document(spans));
        let sent = sender.post(&request).await;
        // Saturating: a shutdown that gave up on these spans has counted them dropped already.
        let _ = stats.in_flight_spans.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |v| Some(v.saturating_sub(n as u64)),
        );
        match sent {
            Ok(()) => Stats::add(&stats.sent_spans, n),
            Err(e) => {
                Stats::add(&stats.dropped_spans, n);
                tracing::warn!("OTLP export of {n} spans failed: {e}");
            }
        }
    }
}
