//! Criterion benches of the in-process parts: SSE framing, JSON-RPC parsing and classification,
//! and the model fold. Kept short (run by `scripts/bench.sh`; see docs/benchmarks.md).
#![allow(missing_docs)] // criterion_group! generates an undocumented function

#[path = "../bench/synth.rs"]
mod synth;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

use mcpscope_engine::model::Model;
use mcpscope_engine::wire::jsonrpc::{classify, parse_body};
use mcpscope_engine::wire::sse::SseParser;

/// `count` SSE events of about `size` bytes each, as an upstream writes them.
fn sse_stream(count: usize, size: usize) -> Vec<u8> {
    let skeleton = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"message":""}}"#;
    let pad = size.saturating_sub(skeleton.len() + 8);
    let data = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":1,"progress":1,"message":"{}"}}}}"#,
        "x".repeat(pad)
    );
    let mut out = Vec::with_capacity(count * (data.len() + 8));
    for _ in 0..count {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(data.as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out
}

fn sse(c: &mut Criterion) {
    let mut g = c.benchmark_group("sse_parse");
    for (label, size, chunk) in [
        ("1KB_events_16KB_chunks", 1024usize, 16 * 1024usize),
        ("100B_events_16KB_chunks", 100, 16 * 1024),
        ("1KB_events_100B_chunks", 1024, 100),
    ] {
        let input = sse_stream((1 << 20) / size, size);
        g.throughput(Throughput::Bytes(input.len() as u64));
        g.bench_function(label, |b| {
            b.iter(|| {
                let mut p = SseParser::new();
                let mut out = Vec::new();
                let mut n = 0;
                for piece in input.chunks(chunk) {
                    p.feed(piece, &mut out);
                    n += out.len();
                    out.clear();
                }
                black_box(n)
            })
        });
    }
    g.finish();
}

fn jsonrpc(c: &mut Criterion) {
    let msgs: Vec<Value> = [
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"total":3}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"boom"}}"#,
    ]
    .iter()
    .filter_map(|s| serde_json::from_str(s).ok())
    .collect();
    let mut g = c.benchmark_group("jsonrpc");
    g.throughput(Throughput::Elements(msgs.len() as u64));
    g.bench_function("classify_4_messages", |b| {
        b.iter(|| {
            for m in &msgs {
                black_box(classify(black_box(m)));
            }
        })
    });
    let body = sse_stream(1, 1024);
    let json = &body[6..body.len() - 2];
    g.throughput(Throughput::Bytes(json.len() as u64));
    g.bench_function("parse_body_1KB_progress", |b| {
        b.iter(|| black_box(parse_body(black_box(json))))
    });
    g.finish();
}

fn fold(c: &mut Criterion) {
    let events = synth::events(20_000, 20);
    let mut g = c.benchmark_group("model");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("fold_20k_events", |b| {
        b.iter(|| {
            let mut m = Model::new();
            let mut n = 0;
            for e in &events {
                n += m.apply(e).len();
            }
            black_box((m.calls.len(), n))
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = sse, jsonrpc, fold
}
criterion_main!(benches);
