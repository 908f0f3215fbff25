//! The one raw-socket helper of the tests: an HTTP/1.1 wire observer (client and server side)
//! that sees the wire as it is, byte by byte: a TCP reset is told apart from a FIN, chunked
//! framing is checked, not trusted, and the arrival of body bytes is timed. MCP-level requests go
//! through `mcpscope_testserver::client` instead; this is for what only a byte-level view can tell.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

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

/// The protocol revision sent with a session by [`send`].
pub const VERSION: &str = "2025-06-18";

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

/// What [`observe`] saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Status code.
    pub status: u16,
    /// Body bytes (de-chunked).
    pub body: Vec<u8>,
    /// How it ended.
    pub end: End,
}

/// How the connection ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// A read returned 0 (FIN).
    Fin,
    /// A read (or write) failed with ConnectionReset.
    Reset,
    /// Still open when the wait ran out (or, for [`observe`], when the framing completed).
    Open,
}

/// What [`read_reply`] saw.
#[derive(Debug)]
pub struct Reply {
    /// 0 when no head arrived.
    pub status: u16,
    /// The response head (or whatever bytes arrived, when no head did).
    pub head: String,
    /// The decoded body.
    pub body: Vec<u8>,
    /// Whether the body's framing completed (last chunk, or Content-Length reached).
    pub complete: bool,
    /// How the connection ended.
    pub end: Close,
    /// Reads that carried body bytes: (time since the request was sent, bytes so far in the body).
    pub body_reads: Vec<(Duration, usize)>,
}

impl Reply {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A response header.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
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

/// The body so far, decoded per the head; says whether its framing completed (a close-delimited
/// body completes with `fin`).
fn decode(head: &str, raw_body: &[u8], fin: bool) -> (Vec<u8>, bool) {
    let lower = head.to_ascii_lowercase();
    if lower.contains("transfer-encoding: chunked") {
        return decode_chunked(raw_body);
    }
    let length = lower.lines().find_map(|l| {
        l.strip_prefix("content-length:")
            .and_then(|v| v.trim().parse::<usize>().ok())
    });
    match length {
        Some(n) => (
            raw_body[..raw_body.len().min(n)].to_vec(),
            raw_body.len() >= n,
        ),
        None => (raw_body.to_vec(), fin),
    }
}

/// The head and where the body starts, once the head is whole.
fn split_head(raw: &[u8]) -> Option<(String, usize)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((
        String::from_utf8_lossy(&raw[..split]).into_owned(),
        split + 4,
    ))
}

/// Whether the bytes hold a whole response (framing complete).
pub fn complete(raw: &[u8]) -> Option<End> {
    let (head, start) = split_head(raw)?;
    let lower = head.to_ascii_lowercase();
    let delimited =
        lower.contains("transfer-encoding: chunked") || lower.contains("content-length:");
    (delimited && decode(&head, &raw[start..], false).1).then_some(End::Clean)
}

/// Writes one request (with `Connection: close`), with the session headers if `session` is set.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    session: Option<&str>,
    body: Option<&serde_json::Value>,
) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.expect("connect");
    let body = body.map(serde_json::Value::to_string).unwrap_or_default();
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if method == "GET" {
        request.push_str("accept: text/event-stream\r\n");
    } else {
        request.push_str(
            "content-type: application/json\r\naccept: application/json, text/event-stream\r\n",
        );
    }
    if let Some(session) = session {
        request.push_str(&format!(
            "mcp-session-id: {session}\r\nmcp-protocol-version: {VERSION}\r\n"
        ));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    // A write may fail when the peer resets at once; the read reports it.
    let _ = sock.write_all(request.as_bytes()).await;
    sock
}

/// Reads until FIN, a reset, `wait` running out or, with `until_complete`, the framing
/// completing; gives the bytes, the reads (time, total so far) and how the connection ended.
async fn read_raw(
    sock: &mut TcpStream,
    sent: Instant,
    wait: Duration,
    until_complete: bool,
) -> (Vec<u8>, Vec<(Duration, usize)>, Close) {
    let deadline = tokio::time::Instant::now() + wait;
    let mut raw = Vec::new();
    let mut reads = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let end = loop {
        match tokio::time::timeout_at(deadline, sock.read(&mut buf)).await {
            Err(_) => break Close::Open,
            Ok(Ok(0)) => break Close::Fin,
            Ok(Ok(n)) => {
                raw.extend_from_slice(&buf[..n]);
                reads.push((sent.elapsed(), raw.len()));
                if until_complete && complete(&raw).is_some() {
                    break Close::Open;
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => break Close::Reset,
            Ok(Err(e)) => panic!("read failed with {e:?}, not a reset"),
        }
    };
    (raw, reads, end)
}

/// Reads until FIN, a reset, or `wait` runs out.
pub async fn read_reply(mut sock: TcpStream, sent: Instant, wait: Duration) -> Reply {
    let (raw, reads, end) = read_raw(&mut sock, sent, wait, false).await;
    let Some((head, body_start)) = split_head(&raw) else {
        return Reply {
            status: 0,
            head: String::from_utf8_lossy(&raw).into_owned(),
            body: Vec::new(),
            complete: false,
            end,
            body_reads: Vec::new(),
        };
    };
    let (body, complete) = decode(&head, &raw[body_start..], end == Close::Fin);
    let body_reads = reads
        .into_iter()
        .filter(|(_, total)| *total > body_start)
        .map(|(t, total)| (t, decode(&head, &raw[body_start..total], false).0.len()))
        .collect();
    Reply {
        status: status_of(&head),
        head,
        body,
        complete,
        end,
        body_reads,
    }
}

/// [`send`], then [`read_reply`].
pub async fn exchange(
    addr: SocketAddr,
    method: &str,
    session: Option<&str>,
    body: Option<&serde_json::Value>,
    wait: Duration,
) -> Reply {
    let sent = Instant::now();
    let sock = send(addr, method, session, body).await;
    read_reply(sock, sent, wait).await
}

fn status_of(head: &str) -> u16 {
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Sends one request (session `s1`, kept alive) and reads until the response's framing completes
/// or the connection ends.
pub async fn observe(addr: SocketAddr, method: &str, body: &str) -> Observed {
    let mut sock = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-session-id: s1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(request.as_bytes()).await.expect("write");
    let wait = Duration::from_secs(30);
    let (raw, _, close) = read_raw(&mut sock, Instant::now(), wait, true).await;
    let (head, start) = split_head(&raw).expect("a response head");
    let (body, framed) = decode(&head, &raw[start..], true);
    let end = match close {
        Close::Open if complete(&raw).is_none() => {
            panic!(
                "no end within 30 s; got {:?}",
                String::from_utf8_lossy(&raw)
            )
        }
        Close::Open => End::Clean,
        Close::Reset => End::Reset,
        Close::Fin if framed => End::Clean,
        Close::Fin => End::Truncated,
    };
    Observed {
        status: status_of(&head),
        body,
        end,
    }
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
        ..Default::default()
    };
    let proxy = mcpscope_proxy::start(config, mcpscope_session::sink::EventSink::new(tx))
        .await
        .expect("proxy");
    (proxy, rx)
}
