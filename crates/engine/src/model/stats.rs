//! Latency, count and error rate per tool and per method, over operations: a call that took
//! several rounds (an input-required result answered by a later request) counts once, from its
//! first request to its last round's result, and a task-augmented call counts once, from the
//! request that created the task to the `tasks/result` answer.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{Call, Model, Verdict};
use crate::event::Direction;

/// One logical operation: its last round (which holds the outcome) and when its first round
/// was sent.
#[derive(Debug, Clone, Copy)]
pub struct Operation<'a> {
    /// The round that holds the outcome (the call itself when it took one round).
    pub last: &'a Call,
    /// When its first request was seen.
    pub started_at: DateTime<Utc>,
}

impl Operation<'_> {
    /// Milliseconds from the first request to the result or error, when one arrived
    /// (pending, orphaned and cancelled operations have no latency).
    pub fn latency_ms(&self) -> Option<f64> {
        match self.last.verdict {
            Verdict::Answered | Verdict::Error { .. } => {
                let end = self.last.ended_at?;
                Some((end - self.started_at).num_microseconds()? as f64 / 1000.0)
            }
            _ => None,
        }
    }

    /// Whether it failed: a JSON-RPC error, a tool's error result, or a stream death.
    pub fn failed(&self) -> bool {
        matches!(
            self.last.verdict,
            Verdict::Error { .. } | Verdict::Orphaned { .. }
        ) || self.last.is_tool_error()
    }
}

/// Every operation of the model, in the order they began: the rounds of a multi-round-trip
/// call are one operation (its last round holds the outcome), and a task operation is one,
/// its requests about the task (`tasks/get`, `tasks/result`, …) folded into it. What an
/// operation is, and when it starts, is [`Model::operation`]'s to say.
pub fn operations(model: &Model) -> Vec<Operation<'_>> {
    model
        .calls
        .iter()
        .filter(|call| model.is_operation_root(call.index))
        .filter_map(|call| {
            let op = model.operation(call.index)?;
            // A task operation's outcome is on its root (the tasks/result answer closes it);
            // a multi-round call's on its last round.
            let last = match op.task {
                Some(_) => call,
                None => op
                    .requests
                    .last()
                    .and_then(|&i| model.calls.get(i))
                    .unwrap_or(call),
            };
            Some(Operation {
                last,
                started_at: op.started_at,
            })
        })
        .collect()
}

/// Count, failures and latency percentiles of a group of operations.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Operations seen.
    pub count: usize,
    /// Operations that failed (see [`Operation::failed`]).
    pub errors: usize,
    /// Operations with a latency (a result or an error arrived).
    pub timed: usize,
    /// The 50th percentile latency in milliseconds (nearest rank), if any were timed.
    pub p50: Option<f64>,
    /// The 95th percentile.
    pub p95: Option<f64>,
    /// The 99th percentile.
    pub p99: Option<f64>,
    /// The largest latency.
    pub max: Option<f64>,
}

impl Stats {
    /// The stats of these operations.
    pub fn of(ops: &[Operation<'_>]) -> Self {
        let mut samples: Vec<f64> = ops.iter().filter_map(Operation::latency_ms).collect();
        samples.sort_by(f64::total_cmp);
        Self {
            count: ops.len(),
            errors: ops.iter().filter(|op| op.failed()).count(),
            timed: samples.len(),
            p50: percentile(&samples, 50.0),
            p95: percentile(&samples, 95.0),
            p99: percentile(&samples, 99.0),
            max: samples.last().copied(),
        }
    }

    /// Failed operations as a share of all (0 when there are none).
    pub fn error_rate(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.errors as f64 / self.count as f64
        }
    }
}

/// The nearest-rank percentile of sorted samples: the smallest value with at least `p`% of the
/// samples at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// What a row of the stats groups.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// A tool's `tools/call`s.
    Tool(String),
    /// A method's requests (every method, `tools/call` included), by who sent them.
    Method(String),
}

impl Key {
    /// `tool echo`, `method tools/list`.
    pub fn label(&self) -> String {
        match self {
            Key::Tool(name) => format!("tool {name}"),
            Key::Method(name) => format!("method {name}"),
        }
    }
}

/// The stats per tool and per method of the operations that started by `until` (all when
/// `None`; a replay passes its cursor), tools first.
pub fn by_key(model: &Model, until: Option<DateTime<Utc>>) -> BTreeMap<Key, Stats> {
    let mut groups: BTreeMap<Key, Vec<Operation<'_>>> = BTreeMap::new();
    for op in operations(model) {
        if until.is_some_and(|t| op.started_at > t) {
            continue;
        }
        let method = match op.last.dir {
            Direction::ClientToServer => op.last.method.to_string(),
            Direction::ServerToClient => format!("{} (server → client)", op.last.method),
        };
        groups.entry(Key::Method(method)).or_default().push(op);
        if let Some(tool) = &op.last.tool {
            groups
                .entry(Key::Tool(tool.to_string()))
                .or_default()
                .push(op);
        }
    }
    groups
        .into_iter()
        .map(|(key, ops)| (key, Stats::of(&ops)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), Some(5.0));
        assert_eq!(percentile(&samples, 95.0), Some(10.0));
        assert_eq!(percentile(&samples, 10.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
    }
}
