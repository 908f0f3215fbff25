//! Prometheus metrics: the real binary with `--metrics-listen` in front of the test server, a
//! call orphaned by an injected reset, scraped by a real Prometheus server (Debian package
//! `prometheus`), and the orphaned counter read back through Prometheus's HTTP API. Also the
//! endpoint's own rules: the Host guard, the path, the method, and label values a hostile
//! server cannot grow without limit.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::peers::{Proc, Proxy};
use mcpscope_testserver::{self as testserver, client::McpClient};
use serde_json::{Value, json};

/// The metrics address the proxy printed on stderr (`mcpscope: metrics at http://A/metrics`).
fn metrics_addr(proxy: &Proxy) -> SocketAddr {
    const PREFIX: &str = "mcpscope: metrics at http://";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(line) = proxy
            .stderr
            .snapshot()
            .into_iter()
            .find(|l| l.contains(PREFIX))
        {
            let rest = &line[line.find(PREFIX).map_or(0, |i| i + PREFIX.len())..];
            let addr = rest.trim_end_matches("/metrics").trim();
            return addr.parse().expect("metrics address");
        }
        assert!(
            Instant::now() < deadline,
            "no metrics line\n{}",
            proxy.dump()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One raw HTTP/1.1 request; the status line and the body.
fn http(addr: SocketAddr, method: &str, path: &str, host: &str) -> (String, String) {
    try_http(addr, method, path, host).expect("HTTP exchange")
}

/// [`http`], or the error of a peer not listening (yet).
fn try_http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
) -> std::io::Result<(String, String)> {
    let mut sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        sock,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    sock.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    Ok((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

/// The value of the series `name` whose labels include every pair of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

async fn proxy_with_orphan(extra: &[&str]) -> (testserver::TestServer, Proxy, SocketAddr) {
    // No event ids: a reset stream cannot be resumed, so its call is orphaned at once.
    let server = testserver::start(testserver::Options {
        event_ids: false,
        ..Default::default()
    })
    .await
    .expect("test server");
    let mut args = vec![
        "--metrics-listen",
        "127.0.0.1:0",
        "--fault",
        "reset after 1 events when tool=slow",
    ];
    args.extend_from_slice(extra);
    let proxy = Proxy::start(&server.url(), &args);
    let metrics = metrics_addr(&proxy);
    let mut client = McpClient::new(&proxy.url("/mcp")).expect("client");
    client.handshake().await.expect("handshake");
    let echo = client
        .call("echo", json!({"text": "hi"}), false)
        .await
        .expect("echo");
    assert!(echo.result().is_some(), "{echo:?}");
    let slow = client
        .call("slow", json!({"steps": 3, "interval_ms": 100}), false)
        .await
        .expect("slow");
    assert!(
        slow.result().is_none(),
        "the reset must orphan the call: {slow:?}"
    );
    proxy
        .wait_notice(Duration::from_secs(10), |n| n["kind"] == "call_orphaned")
        .unwrap_or_else(|| panic!("no call_orphaned notice\n{}", proxy.dump()));
    (server, proxy, metrics)
}

/// Waits until the endpoint counts what the proxy printed (the fold runs beside the view).
fn scrape_until(addr: SocketAddr, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = http(addr, "GET", "/metrics", &addr.to_string());
        assert!(status.contains(" 200 "), "{status}\n{body}");
        if done(&body) || Instant::now() > deadline {
            return body;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_counts_an_orphaned_call_and_refuses_foreign_hosts() {
    let (_server, proxy, addr) = proxy_with_orphan(&[]).await;
    let text = scrape_until(addr, |t| {
        sample(t, "mcpscope_calls_orphaned_total", &[("how", "reset")]).is_some()
    });
    assert!(text.ends_with("# EOF\n"), "OpenMetrics text: {text}");
    assert_eq!(
        sample(
            &text,
            "mcpscope_calls_orphaned_total",
            &[("how", "reset"), ("mcp_method_name", "tools/call")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mcpscope_calls_total",
            &[("gen_ai_tool_name", "echo"), ("verdict", "answered")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mcpscope_calls_total",
            &[("gen_ai_tool_name", "slow"), ("verdict", "orphaned")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mcp_client_operation_duration_seconds_count",
            &[("gen_ai_tool_name", "echo"), ("outcome", "answered")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mcpscope_stream_ends_total",
            &[("how", "reset"), ("cause", "injected"), ("death", "true")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "mcpscope_faults_fired_total", &[("fault", "reset")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "mcpscope_death_to_orphan_seconds_count", &[]),
        Some(1.0),
        "{text}"
    );
    // The guards: a foreign Host (DNS rebinding), another path, another method.
    let (status, _) = http(addr, "GET", "/metrics", "evil.example:80");
    assert!(status.contains(" 403 "), "{status}");
    let (status, _) = http(addr, "GET", "/", &addr.to_string());
    assert!(status.contains(" 404 "), "{status}");
    let (status, _) = http(addr, "POST", "/metrics", &addr.to_string());
    assert!(status.contains(" 405 "), "{status}");
    drop(proxy);
}

#[test]
fn a_metrics_address_off_loopback_is_refused_without_allow_remote() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
            "--json",
            "--no-record",
            "--metrics-listen",
            "0.0.0.0:0",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--metrics-listen 0.0.0.0:0 is not a loopback address"),
        "{stderr}"
    );
}

fn prometheus() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("prometheus"))
            .find(|p| p.is_file())
    });
    found.expect("prometheus must be installed (apt-get install prometheus; CI does, in .ci/run)")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

/// Asks Prometheus's HTTP API for `query`; the first sample's value, if any.
fn query(prometheus: SocketAddr, query: &str) -> Option<f64> {
    let encoded: String = query
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let path = format!("/api/v1/query?query={encoded}");
    let (status, body) = try_http(prometheus, "GET", &path, &prometheus.to_string()).ok()?;
    if !status.contains(" 200 ") {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Prometheus: apt-get install prometheus (CI does, in .ci/run), then run scripts/test.sh"]
async fn a_real_prometheus_scrapes_the_orphaned_call() {
    let bin = prometheus();
    let (_server, proxy, metrics) = proxy_with_orphan(&[]).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: mcpscope\n    static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .expect("config");
    let web: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start prometheus");
    let mut prometheus = Proc {
        child,
        name: "prometheus".into(),
    };
    // Prometheus scrapes every second; give it a generous bound, and stop as soon as it says.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut orphaned = None;
    while Instant::now() < deadline {
        orphaned = query(web, "sum(mcpscope_calls_orphaned_total)");
        if orphaned.is_some_and(|v| v >= 1.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let up = query(web, "up{job=\"mcpscope\"}");
    prometheus.terminate(Duration::from_secs(5));
    assert!(
        orphaned.is_some_and(|v| v >= 1.0),
        "Prometheus read {orphaned:?} orphaned calls (up = {up:?})\n{}",
        proxy.dump()
    );
    assert_eq!(up, Some(1.0), "the scrape target is up");
}
