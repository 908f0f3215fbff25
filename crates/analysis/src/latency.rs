//! Latency per tool and per method as the reports write it: JSON for `check --json` and
//! `diff`, a table with a histogram line per tool for the Markdown export. The numbers come
//! from the engine's `model::stats` (one definition of an operation and its percentiles).

use std::collections::BTreeMap;

use mcpscope_engine::model::Model;
use mcpscope_engine::model::stats::{self, Key, Operation, Stats};
use serde_json::{Value, json};

use crate::describe::markdown_cell;

/// Milliseconds rounded to a microsecond, as JSON (null when absent).
fn ms(value: Option<f64>) -> Value {
    value.map_or(Value::Null, |v| json!((v * 1000.0).round() / 1000.0))
}

/// One row's figures as JSON.
pub fn stats_json(stats: &Stats) -> Value {
    json!({
        "count": stats.count,
        "errors": stats.errors,
        "error_rate": (stats.error_rate() * 10_000.0).round() / 10_000.0,
        "timed": stats.timed,
        "p50_ms": ms(stats.p50),
        "p95_ms": ms(stats.p95),
        "p99_ms": ms(stats.p99),
        "max_ms": ms(stats.max),
    })
}

/// Verdict counts per tool (by verdict name), over operations.
pub fn verdicts_by_tool(model: &Model) -> BTreeMap<String, BTreeMap<&'static str, usize>> {
    let mut out: BTreeMap<String, BTreeMap<&'static str, usize>> = BTreeMap::new();
    for op in stats::operations(model) {
        if let Some(tool) = &op.last.tool {
            *out.entry(tool.to_string())
                .or_default()
                .entry(op.last.verdict.name())
                .or_insert(0) += 1;
        }
    }
    out
}

/// `{"tools": {name: figures + verdicts}, "methods": {name: figures}}`.
pub fn json(model: &Model) -> Value {
    let verdicts = verdicts_by_tool(model);
    let mut tools = serde_json::Map::new();
    let mut methods = serde_json::Map::new();
    for (key, stats) in stats::by_key(model, None) {
        match key {
            Key::Tool(name) => {
                let mut row = stats_json(&stats);
                row["verdicts"] = json!(verdicts.get(&name).cloned().unwrap_or_default());
                tools.insert(name, row);
            }
            Key::Method(name) => {
                methods.insert(name, stats_json(&stats));
            }
        }
    }
    json!({ "tools": tools, "methods": methods })
}

/// Eight bars of a latency histogram, from 0 to the largest latency in equal steps (`▁` for an
/// empty bucket).
pub fn histogram(samples: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let Some(max) = samples.iter().copied().reduce(f64::max) else {
        return String::new();
    };
    let mut buckets = [0usize; 8];
    for &v in samples {
        let i = if max <= 0.0 {
            0
        } else {
            ((v / max) * 8.0).floor() as usize
        };
        buckets[i.min(7)] += 1;
    }
    let top = buckets.iter().copied().max().unwrap_or(1).max(1);
    buckets
        .iter()
        .map(|&n| {
            if n == 0 {
                ' '
            } else {
                BARS[((n * 8).div_ceil(top)).clamp(1, 8) - 1]
            }
        })
        .collect()
}

fn fmt_ms(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.1}"))
}

/// The Markdown section: a row per tool with its histogram, then a row per method.
pub fn markdown(model: &Model) -> String {
    let by_key = stats::by_key(model, None);
    if by_key.is_empty() {
        return String::new();
    }
    let ops = stats::operations(model);
    let mut out = String::from(
        "## Latency\n\n\
         | tool / method | calls | errors | p50 ms | p95 ms | p99 ms | histogram (0 → max) |\n\
         |---|---:|---:|---:|---:|---:|---|\n",
    );
    for (key, stats) in &by_key {
        let samples: Vec<f64> = ops
            .iter()
            .filter(|op| match key {
                Key::Tool(name) => op.last.tool.as_deref() == Some(name.as_str()),
                Key::Method(_) => false,
            })
            .filter_map(Operation::latency_ms)
            .collect();
        let bars = match key {
            Key::Tool(_) => format!("`{}` max {} ms", histogram(&samples), fmt_ms(stats.max)),
            Key::Method(_) => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            markdown_cell(&key.label()),
            stats.count,
            stats.errors,
            fmt_ms(stats.p50),
            fmt_ms(stats.p95),
            fmt_ms(stats.p99),
            bars
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_bucket_from_zero_to_the_largest() {
        assert_eq!(histogram(&[]), "");
        assert_eq!(histogram(&[1.0, 1.0, 8.0]), " █     ▄");
        assert_eq!(histogram(&[0.0]), "█       ");
    }
}
