//! Memory of the live proxy under a long session (run by `scripts/bench.sh`; see docs/benchmarks.md).
//!
//! Starts a raw in-process upstream, then the `mcpscope` binary with recording on, once with the
//! headless `--json` view and once with the TUI (in a detached tmux session, when tmux is
//! installed), and drives through each: SSE events of 1 KB on one stream, then JSON calls,
//! then 10 idle seconds. Reads the proxy's VmRSS after each step and its peak (VmHWM).
//! Writes Markdown to `--out`.
//!
//! Usage: bench_memory --mcpscope PATH [--events N] [--calls N] [--work DIR] [--out FILE]

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Events per chunk the upstream writes (one write per chunk keeps the upstream fast).
const EVENTS_PER_CHUNK: u64 = 16;

fn event_of_size(size: usize) -> String {
    let skeleton =
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":""}}"#;
    let pad = size.saturating_sub(skeleton.len() + "data: \n\n".len());
    format!(
        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"{}\"}}}}\n\n",
        "x".repeat(pad)
    )
}

/// Answers one connection's requests: `/mcp/stream?n=N` with N SSE events of 1 KB then the
/// result, anything else with a JSON result.
async fn upstream_conn(tcp: TcpStream) -> std::io::Result<()> {
    let (read, mut write) = tcp.into_split();
    let mut read = BufReader::new(read);
    let event = event_of_size(1024);
    let mut chunk = Vec::new();
    for _ in 0..EVENTS_PER_CHUNK {
        chunk.extend_from_slice(event.as_bytes());
    }
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            read.read_line(&mut header).await?;
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        read.read_exact(&mut body).await?;
        let id = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(serde_json::Value::Null);
        let result = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"ok"}}]}}}}"#
        );
        if let Some(query) = target.strip_prefix("/mcp/stream?n=") {
            let n: u64 = query.parse().unwrap_or(0);
            write
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                .await?;
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(&chunk);
            framed.extend_from_slice(b"\r\n");
            for _ in 0..n / EVENTS_PER_CHUNK {
                write.write_all(&framed).await?;
            }
            let last = format!("data: {result}\n\n");
            write
                .write_all(format!("{:x}\r\n{last}\r\n0\r\n\r\n", last.len()).as_bytes())
                .await?;
        } else {
            write
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{result}",
                        result.len()
                    )
                    .as_bytes(),
                )
                .await?;
        }
    }
}

async fn serve_upstream(listener: TcpListener) {
    while let Ok((tcp, _)) = listener.accept().await {
        let _ = tcp.set_nodelay(true);
        tokio::spawn(upstream_conn(tcp));
    }
}

struct Client {
    addr: SocketAddr,
    send: SendRequest<Full<Bytes>>,
}

impl Client {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        Ok(Self { addr, send })
    }

    /// Posts a `tools/call` and reads the whole answer; returns its body bytes.
    async fn call(&mut self, path: &str, id: u64) -> anyhow::Result<u64> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"work","arguments":{{}}}}}}"#
        );
        let request = Request::post(path)
            .header("host", self.addr.to_string())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(Bytes::from(body)))?;
        self.send.ready().await?;
        let response = self.send.send_request(request).await?;
        let mut body = response.into_body();
        let mut bytes = 0u64;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                bytes += data.len() as u64;
            }
        }
        Ok(bytes)
    }
}

/// The proxy under test: its pid, its port, and how to stop it.
struct Proxy {
    pid: u32,
    port: u16,
    child: Option<Child>,
    tmux: Option<String>,
}

impl Proxy {
    fn rss_kib(&self) -> u64 {
        vm_status(self.pid, "VmRSS:").unwrap_or(0)
    }

    fn peak_kib(&self) -> u64 {
        vm_status(self.pid, "VmHWM:").unwrap_or(0)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        if let Some(child) = self.child.as_mut() {
            let _ = child.wait();
        }
        if let Some(session) = &self.tmux {
            std::thread::sleep(Duration::from_millis(500));
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", session])
                .status();
        }
    }
}

fn vm_status(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn wait_port(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        if Instant::now() > deadline {
            bail!("mcpscope did not listen on port {port}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum View {
    Json,
    Tui,
}

async fn start(mcpscope: &Path, upstream: u16, record: &Path, view: View) -> anyhow::Result<Proxy> {
    let port = free_port()?;
    let _ = std::fs::remove_file(record);
    let args = [
        "--listen".to_string(),
        format!("127.0.0.1:{port}"),
        "--upstream".to_string(),
        format!("http://127.0.0.1:{upstream}/mcp"),
        "--record".to_string(),
        record.display().to_string(),
    ];
    let proxy = match view {
        View::Json => {
            let child = Command::new(mcpscope)
                .args(&args)
                .arg("--json")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("mcpscope")?;
            Proxy {
                pid: child.id(),
                port,
                child: Some(child),
                tmux: None,
            }
        }
        View::Tui => {
            let session = format!("mcpscope-bench-memory-{}", std::process::id());
            let command = std::iter::once(format!("exec {}", mcpscope.display()))
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            let status = Command::new("tmux")
                .args(["new-session", "-d", "-s", &session, "-x", "200", "-y", "50"])
                .arg(&command)
                .status()
                .context("tmux")?;
            if !status.success() {
                bail!("tmux new-session failed");
            }
            let out = Command::new("tmux")
                .args(["display", "-p", "-t", &session, "#{pane_pid}"])
                .output()?;
            let pid = String::from_utf8_lossy(&out.stdout).trim().parse()?;
            Proxy {
                pid,
                port,
                child: None,
                tmux: Some(session),
            }
        }
    };
    wait_port(port).await?;
    Ok(proxy)
}

fn mib(kib: u64) -> String {
    format!("{:.0}", kib as f64 / 1024.0)
}

/// One view's run: returns a table row per step.
async fn run_view(
    args: &Args,
    upstream: u16,
    view: View,
    md: &mut String,
) -> anyhow::Result<Vec<(String, u64)>> {
    let name = if view == View::Json { "--json" } else { "TUI" };
    let record = args
        .work
        .join(format!("memory-{}.jsonl", name.trim_start_matches('-')));
    let proxy = start(&args.mcpscope, upstream, &record, view).await?;
    let addr = SocketAddr::from(([127, 0, 0, 1], proxy.port));
    let mut rows = vec![("start".to_string(), proxy.rss_kib())];
    let mut done = 0u64;
    for target in &args.events {
        let t0 = Instant::now();
        let mut client = Client::connect(addr).await?;
        let bytes = client
            .call(&format!("/mcp/stream?n={}", target - done), 1)
            .await?;
        eprintln!(
            "bench_memory: {name}: {} events ({} MB) in {:.1} s",
            target - done,
            bytes / 1_000_000,
            t0.elapsed().as_secs_f64()
        );
        done = *target;
        rows.push((format!("after {done} SSE events"), proxy.rss_kib()));
    }
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let per = args.calls / 4;
    for worker in 0..4u64 {
        tasks.spawn(async move {
            let mut client = Client::connect(addr).await?;
            for i in 0..per {
                client.call("/mcp/json", worker * per + i + 2).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(result) = tasks.join_next().await {
        result??;
    }
    eprintln!(
        "bench_memory: {name}: {} calls in {:.1} s",
        per * 4,
        t0.elapsed().as_secs_f64()
    );
    rows.push((format!("after {} JSON calls", per * 4), proxy.rss_kib()));
    tokio::time::sleep(Duration::from_secs(10)).await;
    rows.push(("after 10 s idle".to_string(), proxy.rss_kib()));
    rows.push(("peak (VmHWM)".to_string(), proxy.peak_kib()));
    drop(proxy);
    let recorded = std::fs::metadata(&record).map(|m| m.len()).unwrap_or(0);
    let _ = writeln!(md, "- {name}: recording {} MB", recorded / 1_000_000);
    // Measured: not left behind (some 11 GB for 10 M events) to fill the disk, and the page
    // cache the benchmarks after it allocate from.
    let _ = std::fs::remove_file(mcpscope_timeline::savedindex::sidecar_for(&record));
    let _ = std::fs::remove_file(&record);
    Ok(rows)
}

struct Args {
    mcpscope: PathBuf,
    events: Vec<u64>,
    calls: u64,
    work: PathBuf,
    out: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut mcpscope = None;
    let mut events = vec![1_000_000];
    let mut calls = 100_000;
    let mut work = PathBuf::from("bench-out");
    let mut out = PathBuf::from("bench-out/memory.md");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--mcpscope" => mcpscope = Some(PathBuf::from(val()?)),
            // Cumulative totals, comma-separated: `1000000,10000000`.
            "--events" => {
                events = val()?
                    .split(',')
                    .map(|n| n.trim().parse())
                    .collect::<Result<_, _>>()?
            }
            "--calls" => calls = val()?.parse()?,
            "--work" => work = PathBuf::from(val()?),
            "--out" => out = PathBuf::from(val()?),
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(Args {
        mcpscope: mcpscope.ok_or_else(|| anyhow!("--mcpscope PATH is required"))?,
        events,
        calls,
        work,
        out,
    })
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.work)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let md = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let upstream = listener.local_addr()?.port();
        tokio::spawn(serve_upstream(listener));
        let mut notes = String::new();
        let mut views = vec![("`--json`", View::Json)];
        if Command::new("tmux").arg("-V").output().is_ok() {
            views.push(("TUI", View::Tui));
        }
        let mut columns = Vec::new();
        for (name, view) in views {
            columns.push((name, run_view(&args, upstream, view, &mut notes).await?));
        }
        let mut md = String::from("| proxy VmRSS (MiB) |");
        for (name, _) in &columns {
            let _ = write!(md, " {name} |");
        }
        md.push_str("\n|---|");
        md.push_str(&"---:|".repeat(columns.len()));
        md.push('\n');
        for (i, (step, _)) in columns[0].1.iter().enumerate() {
            let _ = write!(md, "| {step} |");
            for (_, rows) in &columns {
                let _ = write!(md, " {} |", rows.get(i).map_or("-".into(), |r| mib(r.1)));
            }
            md.push('\n');
        }
        md.push('\n');
        md.push_str(&notes);
        anyhow::Ok(md)
    })?;
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, &md)?;
    println!("{md}");
    Ok(())
}
