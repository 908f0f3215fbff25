#![allow(dead_code)]
//! A raw HTTP/1.1 client and server helpers that see the wire as it is: a reset is told apart
//! from a clean end, and chunked framing is checked, not trusted.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads a request head and its Content-Length body.
pub async fn read_head(sock: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = buf[pos + 4..].to_vec();
            while body.len() < length {
                let n = sock.read(&mut byte).await.ok()?;
                if n == 0 {
                    return None;
                }
                body.extend_from_slice(&byte[..n]);
            }
            return Some((head, body));
        }
        let n = sock.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    }
}

/// Closes a socket with a TCP reset.
pub fn reset(sock: TcpStream) {
    let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
    drop(sock);
}

/// How a response ended, as a client sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The framing completed, or a close-delimited body ended with FIN.
    Clean,
    /// The connection was reset.
    Reset,
    /// FIN before the framing completed.
    Truncated,
}

/// What a raw client observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Status code.
    pub status: u16,
    /// Body bytes (de-chunked).
    pub body: Vec<u8>,
    /// How it ended.
    pub end: End,
}

/// Decodes a chunked body; says whether the terminating chunk was seen.
pub fn decode_chunked(raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut rest = raw;
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return (out, false);
        };
        let size_text = String::from_utf8_lossy(&rest[..line_end]).to_string();
        let Ok(size) = usize::from_str_radix(size_text.trim(), 16) else {
            return (out, false);
        };
        rest = &rest[line_end + 2..];
        if size == 0 {
            return (out, true);
        }
        if rest.len() < size + 2 {
            out.extend_from_slice(&rest[..rest.len().min(size)]);
            return (out, false);
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Sends one request and reads until the response's framing completes or the connection ends.
pub async fn observe(addr: std::net::SocketAddr, method: &str, body: &str) -> Observed {
    let mut sock = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-session-id: s1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let outcome = loop {
        match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await {
            Err(_) => panic!("no end within 5 s; got {:?}", String::from_utf8_lossy(&raw)),
            Ok(Ok(0)) => break None,
            Ok(Ok(n)) => {
                raw.extend_from_slice(&buf[..n]);
                if let Some(done) = complete(&raw) {
                    break Some(done);
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                break Some(End::Reset);
            }
            Ok(Err(e)) => panic!("read error: {e}"),
        }
    };
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let payload = &raw[split + 4..];
    let chunked = head.contains("transfer-encoding: chunked");
    let (body, framed) = if chunked {
        decode_chunked(payload)
    } else {
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        (payload.to_vec(), length.is_none_or(|n| payload.len() >= n))
    };
    let end = match outcome {
        Some(end) => end,
        None if framed => End::Clean,
        None => End::Truncated,
    };
    Observed { status, body, end }
}

/// Whether the bytes hold a whole response (framing complete).
pub fn complete(raw: &[u8]) -> Option<End> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let payload = &raw[split + 4..];
    if head.contains("transfer-encoding: chunked") {
        return decode_chunked(payload).1.then_some(End::Clean);
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))?
        .trim()
        .parse::<usize>()
        .ok()?;
    (payload.len() >= length).then_some(End::Clean)
}

/// Starts the proxy in-process toward `upstream` (path `/mcp`); its events arrive on the receiver.
pub async fn proxy_to(
    upstream: std::net::SocketAddr,
) -> (
    mcpscope_proxy::Proxy,
    tokio::sync::mpsc::UnboundedReceiver<mcpscope_engine::event::Event>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let config = mcpscope_proxy::Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: format!("http://{upstream}/mcp").parse().expect("uri"),
        insecure: false,
        allow_remote: false,
        redact: true,
    };
    let proxy = mcpscope_proxy::start(config, mcpscope_proxy::sink::EventSink::new(tx))
        .await
        .expect("proxy");
    (proxy, rx)
}
