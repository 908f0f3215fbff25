//! What a huge SSE line costs the proxy: the real binary in front of a raw upstream that answers
//! a POST with 200 MiB of SSE data and no newline, its peak RSS sampled from /proc while a raw
//! client reads the whole body.

#![allow(dead_code)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::peers::Proxy;

const BODY: usize = 200 << 20;

/// Serves one POST: an SSE head, then `BODY` bytes of one unfinished `data:` line.
fn upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming().take(8).flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    format!("http://{addr}/mcp")
}

/// Answers one connection's request (a probe that sends nothing gets nothing).
fn serve(mut conn: TcpStream) {
    {
        // The request: its head, then as many body bytes as it announces.
        if common::peers::read_request(&mut conn).is_none() {
            return;
        }
        let _ = conn.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: ",
        );
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..BODY >> 20 {
            if conn.write_all(&chunk).is_err() {
                return;
            }
        }
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Past the 16 MiB event limit the stream is forwarded undecoded and nothing more is held: the
/// proxy's peak RSS grows by far less than the body (it grew by 50–70 MiB, three to four times the
/// limit, while a line buffer grown by doubling left its earlier copies behind).
#[test]
fn a_200_mib_sse_line_costs_about_the_event_limit() {
    let proxy = Proxy::start(&upstream(), &[]);
    let pid = proxy.proc.child.id();
    std::thread::sleep(Duration::from_millis(300));
    let before = status_kib(pid, "VmHWM:");
    let url = proxy.url("/mcp");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let reader = std::thread::spawn(move || {
        let mut conn = TcpStream::connect(&addr).expect("connect");
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes()).expect("send");
        let mut total = 0usize;
        let mut first = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return (total, String::from_utf8_lossy(&first).into_owned()),
                Ok(n) => {
                    if first.len() < 512 {
                        first.extend_from_slice(&buf[..n.min(512)]);
                    }
                    total += n;
                }
            }
        }
    });
    let started = Instant::now();
    while !reader.is_finished() {
        assert!(started.elapsed() < Duration::from_secs(120), "bounded");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (received, start) = reader.join().expect("reader");
    let peak = status_kib(pid, "VmHWM:");
    eprintln!(
        "200 MiB SSE line: {received} bytes through in {:?}, proxy VmHWM {before} → {peak} KiB",
        started.elapsed()
    );
    assert!(
        received > BODY,
        "the whole body passed: {received} bytes: {start}"
    );
    let grew = peak.saturating_sub(before);
    assert!(
        grew < 40 << 10,
        "the proxy's peak grew by {grew} KiB ({before} → {peak} KiB) for a 16 MiB limit"
    );
}
