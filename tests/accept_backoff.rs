//! Out of file descriptors, the proxy backs off from `accept` instead of spinning, logs the
//! burst a bounded number of times, and serves again once connections close. The real binary
//! runs under a lowered descriptor limit (`prlimit`).

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

/// The descriptor limit the proxy runs under.
const NOFILE: usize = 48;

/// Kills the child when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn accept_lines(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("accept"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn accept_failures_back_off_and_the_proxy_recovers() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: prlimit is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcpscope.log");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").port()
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let _child = Child(
        Command::new("prlimit")
            .arg(format!("--nofile={NOFILE}:{NOFILE}"))
            .arg(env!("CARGO_BIN_EXE_mcpscope"))
            .args(["--listen", &addr.to_string()])
            .args(["--upstream", "http://127.0.0.1:1/mcp"])
            .args(["--headless", "--no-record"])
            .args(["--request-head-timeout", "60s", "--idle-timeout", "60s"])
            .env("MCPSCOPE_LOG", &log)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn prlimit mcpscope"),
    );
    let start = Instant::now();
    while TcpStream::connect(addr).await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // More idle connections than the proxy has descriptors: its accepts start failing.
    let mut held = Vec::new();
    for _ in 0..NOFILE * 2 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let start = Instant::now();
    while accept_lines(&log).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no accept failure logged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Three seconds of failing accepts: without backoff that would be dozens of lines.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let failing = accept_lines(&log);
    assert_eq!(failing.len(), 1, "{failing:#?}");
    assert!(failing[0].contains("backing off"), "{failing:#?}");

    // Once the connections close, the proxy serves again and reports the burst with a count.
    drop(held);
    let start = Instant::now();
    loop {
        let reply =
            mcpscope_testkit::raw::exchange(addr, "GET", None, None, Duration::from_secs(2)).await;
        if reply.status != 0 {
            // The upstream is unreachable: the proxy itself answers.
            assert_eq!(reply.status, 502, "{}", reply.head);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the proxy never served again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The burst is reported over (once, with its count) at an accept a quiet second later.
    let start = Instant::now();
    while !accept_lines(&log)
        .iter()
        .any(|l| l.contains("accepting again after"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:#?}",
            accept_lines(&log)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let reply =
            mcpscope_testkit::raw::exchange(addr, "GET", None, None, Duration::from_secs(2)).await;
        assert_eq!(reply.status, 502, "{}", reply.head);
    }
    let lines = accept_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:#?}");
}
