//! Recording bytes per byte on the wire, for `scripts/bench.sh`: an SSE flood of 1 KB events
//! and a session of small `tools/call`s (SSE and JSON answers), each through the in-process
//! proxy with recording on and a counting relay in front of it. Also gives the size the same
//! events took in format version 1 (one `serde_json` line per event), for comparison.
//!
//! Usage: bench_record_size [--events N] [--calls N] --work DIR --out FILE.md

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use mcpscope_engine::event::Event;
use mcpscope_engine::record::{self, Create, Recorder};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::Config;
use mcpscope_testkit::live::Proxied;
use mcpscope_testkit::wirecount;
use mcpscope_testserver as testserver;
use mcpscope_testserver::client::McpClient;

struct Args {
    events: usize,
    calls: usize,
    work: PathBuf,
    out: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        events: 100_000,
        calls: 2_000,
        work: PathBuf::from("bench-out"),
        out: PathBuf::from("bench-out/size.md"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--events" => args.events = value.parse()?,
            "--calls" => args.calls = value.parse()?,
            "--work" => args.work = value.into(),
            "--out" => args.out = value.into(),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

/// One measured run.
struct Row {
    what: String,
    wire: u64,
    v2: u64,
    v1: u64,
}

/// Reading the flood's recording back: every event in order, the index, a range at its end.
struct Reading {
    events: u64,
    read_all: Duration,
    index: Duration,
    last_100: Duration,
}

fn reading(path: &Path) -> anyhow::Result<Reading> {
    let start = Instant::now();
    let mut events = 0u64;
    for event in record::Events::open(path)? {
        event?;
        events += 1;
    }
    let read_all = start.elapsed();
    let start = Instant::now();
    let index = record::index_file(path, 4096)?;
    let index_time = start.elapsed();
    let start = Instant::now();
    let tail: Vec<Event> = record::read_range(path, &index, events.saturating_sub(100)..events)?
        .collect::<Result<_, _>>()?;
    let last_100 = start.elapsed();
    anyhow::ensure!(
        tail.len() as u64 == events.min(100),
        "read_range gave {}",
        tail.len()
    );
    Ok(Reading {
        events,
        read_all,
        index: index_time,
        last_100,
    })
}

/// Event lines' bytes in version 2 (the file, header aside) and in version 1.
fn sizes(path: &Path) -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read(path)?;
    let header = text.iter().position(|b| *b == b'\n').unwrap_or(0) + 1;
    let mut v1 = 0u64;
    for event in record::Events::open(path)? {
        let event: Event = event?;
        v1 += serde_json::to_vec(&event)?.len() as u64 + 1;
    }
    Ok(((text.len() - header) as u64, v1))
}

async fn proxy(upstream: &str, path: &Path) -> anyhow::Result<Proxied> {
    let config = Config {
        listen: "127.0.0.1:0".parse()?,
        upstream: upstream.parse()?,
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let recorder = Recorder::create(path, Create::Replace, true)?;
    Ok(Proxied::start(config, Some(recorder), Redactor::new()).await)
}

async fn finish(running: Proxied) -> anyhow::Result<()> {
    running
        .stop(Duration::from_secs(30))
        .await
        .context("the recorder did not finish")?;
    Ok(())
}

async fn flood(args: &Args) -> anyhow::Result<(Row, Reading)> {
    let path = args.work.join("size-flood.jsonl");
    let upstream = wirecount::flooding_upstream(args.events).await?;
    let running = proxy(&format!("http://{upstream}/mcp"), &path).await?;
    let (relay, wire) = wirecount::counting_relay(running.proxy.addr).await?;
    tokio::time::timeout(Duration::from_secs(300), wirecount::post_once(relay)).await??;
    tokio::time::sleep(Duration::from_millis(100)).await;
    finish(running).await?;
    let (v2, v1) = sizes(&path)?;
    let read = reading(&path)?;
    std::fs::remove_file(&path).ok();
    let row = Row {
        what: format!("SSE flood: {} events of 1 KB on one stream", args.events),
        wire: wire.bytes(),
        v2,
        v1,
    };
    Ok((row, read))
}

async fn calls(args: &Args, json_responses: bool) -> anyhow::Result<Row> {
    let path = args.work.join("size-calls.jsonl");
    let server = testserver::start(testserver::Options {
        json_responses,
        ..Default::default()
    })
    .await?;
    let running = proxy(&server.url(), &path).await?;
    let (relay, wire) = wirecount::counting_relay(running.proxy.addr).await?;
    let mut client = McpClient::new(&format!("http://{relay}/mcp"))?;
    let session = async {
        client.handshake().await?;
        for n in 0..args.calls {
            let text = format!("call number {n} with a sentence of ordinary length");
            client
                .call("echo", serde_json::json!({ "text": text }), false)
                .await?;
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(300), session).await??;
    drop(client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    finish(running).await?;
    server.shutdown().await;
    let (v2, v1) = sizes(&path)?;
    std::fs::remove_file(&path).ok();
    let answers = if json_responses { "JSON" } else { "SSE" };
    Ok(Row {
        what: format!("{} `tools/call` echo, {answers} answers", args.calls),
        wire: wire.bytes(),
        v2,
        v1,
    })
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.work)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (rows, read) = runtime.block_on(async {
        let (flooded, read) = flood(&args).await?;
        let rows = vec![
            flooded,
            calls(&args, false).await?,
            calls(&args, true).await?,
        ];
        anyhow::Ok((rows, read))
    })?;
    let mut md = String::from(
        "## Recording size: bytes per byte on the wire\n\n\
         Wire bytes: everything that crossed the client's side of the proxy (request and response \
         heads and bodies, chunk framing), counted by a relay in front of it. Recording bytes: the \
         event lines (format version 2, as written; version 1 recomputed from the same events). \
         Target: ≤ 1.3×.\n\n\
         | session | wire bytes | v2 bytes | v2 / wire | v1 bytes | v1 / wire | target |\n\
         |---|---:|---:|---:|---:|---:|---|\n",
    );
    for r in &rows {
        let ratio = r.v2 as f64 / r.wire as f64;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2}× | {} | {:.2}× | {} |",
            r.what,
            r.wire,
            r.v2,
            ratio,
            r.v1,
            r.v1 as f64 / r.wire as f64,
            if ratio <= 1.3 { "met" } else { "MISSED" }
        );
    }
    let _ = write!(
        md,
        "\nReading the flood's recording back ({} events): every event in order with \
         `record::Events` {:.2} s; `record::index_file(path, 4096)` {:.2} s; then \
         `read_range` of the last 100 events {:.1} ms.\n",
        read.events,
        read.read_all.as_secs_f64(),
        read.index.as_secs_f64(),
        read.last_100.as_secs_f64() * 1000.0
    );
    std::fs::File::create(&args.out)?.write_all(md.as_bytes())?;
    print!("{md}");
    Ok(())
}
