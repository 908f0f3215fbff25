//! The binary warns at start when nothing listens at the upstream's address.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn an_unreachable_upstream_is_warned_about_at_start() {
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["--listen", "127.0.0.1:0", "--headless", "--no-record"])
        .args(["--upstream", &format!("http://127.0.0.1:{port}/mcp")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpscope");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    let warning = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("WARNING") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let warning = warning.unwrap_or_else(|| panic!("no warning in {seen:#?}"));
    assert!(
        warning.contains(&format!("127.0.0.1:{port}")) && warning.contains("cannot be reached"),
        "{warning}"
    );
    assert!(
        seen.iter().any(|l| l.contains("listening on")),
        "the proxy listens all the same: {seen:#?}"
    );
}
