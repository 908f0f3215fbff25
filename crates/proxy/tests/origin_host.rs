//! The Origin and Host guards on real sockets: a web page elsewhere cannot call the proxy, a
//! rebinding name cannot reach it, a malformed Host is refused; every refusal is answered with a
//! JSON-RPC error saying why, recorded with its end, and never reaches the upstream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpscope_engine::event::{Event, EventKind};
use mcpscope_proxy::{self as proxy, Config, Proxy};
use mcpscope_session::sink::EventSink;
use mcpscope_testkit::raw;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// An upstream that counts the requests it sees and answers each with a JSON-RPC result.
async fn counting_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                while raw::read_head(&mut sock).await.is_some() {
                    count.fetch_add(1, Ordering::SeqCst);
                    let reply = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
                        reply.len()
                    );
                    if sock.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

async fn proxy_with(
    upstream: SocketAddr,
    tune: impl FnOnce(&mut Config),
) -> (Proxy, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut config = Config {
        upstream: format!("http://{upstream}/mcp").parse().expect("uri"),
        ..Default::default()
    };
    tune(&mut config);
    let proxy = proxy::start(config, EventSink::new(tx))
        .await
        .expect("proxy");
    (proxy, rx)
}

/// Sends `head_lines` (without the request line and the final blank line) and a small body.
async fn request(addr: SocketAddr, head_lines: &str) -> raw::Reply {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\n{head_lines}content-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut sock = TcpStream::connect(addr).await.expect("connect");
    let sent = Instant::now();
    sock.write_all(request.as_bytes()).await.expect("write");
    raw::read_reply(sock, sent, Duration::from_secs(3)).await
}

/// The refusal's JSON-RPC error message.
fn refusal_message(reply: &raw::Reply) -> String {
    let body: Value = serde_json::from_slice(&reply.body).expect("a JSON body");
    assert_eq!(body["jsonrpc"], "2.0");
    body["error"]["message"]
        .as_str()
        .expect("an error message")
        .to_string()
}

/// Whether the events hold a stream that was opened and ended (the refusal recorded).
async fn recorded_end(rx: &mut mpsc::UnboundedReceiver<Event>, status: u16) -> bool {
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut head = false;
    let mut ended = false;
    while let Ok(event) = rx.try_recv() {
        match event.kind {
            EventKind::ResponseHead { status: s, .. } if s == status => head = true,
            EventKind::StreamEnded { .. } => ended = true,
            _ => {}
        }
    }
    head && ended
}

#[tokio::test]
async fn a_foreign_origin_is_refused_before_the_upstream() {
    let (upstream, seen) = counting_upstream().await;
    let (proxy, mut rx) = proxy_with(upstream, |_| {}).await;
    let host = format!("host: {}\r\n", proxy.addr);
    let reply = request(proxy.addr, &format!("{host}origin: http://evil.com\r\n")).await;
    assert_eq!(reply.status, 403, "{}", reply.head);
    assert!(refusal_message(&reply).contains("Origin"));
    assert!(recorded_end(&mut rx, 403).await);
    let reply = request(proxy.addr, &format!("{host}origin: null\r\n")).await;
    assert_eq!(reply.status, 403, "{}", reply.head);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the upstream saw a refused request"
    );
}

#[tokio::test]
async fn loopback_and_allowed_origins_pass() {
    let (upstream, seen) = counting_upstream().await;
    let (proxy, _rx) = proxy_with(upstream, |c| {
        c.allow_origins = vec!["https://app.example".into()];
    })
    .await;
    let host = format!("host: {}\r\n", proxy.addr);
    for origin in [
        "http://localhost:6274",
        "http://127.0.0.1:3000",
        "http://[::1]",
        "https://app.example",
    ] {
        let reply = request(proxy.addr, &format!("{host}origin: {origin}\r\n")).await;
        assert_eq!(reply.status, 200, "{origin}: {}", reply.head);
    }
    let reply = request(proxy.addr, &host).await;
    assert_eq!(reply.status, 200, "no Origin: {}", reply.head);
    assert_eq!(seen.load(Ordering::SeqCst), 5);
    let reply = request(
        proxy.addr,
        &format!("{host}origin: https://other.example\r\n"),
    )
    .await;
    assert_eq!(reply.status, 403, "{}", reply.head);
}

#[tokio::test]
async fn a_duplicate_or_missing_host_is_a_400() {
    let (upstream, seen) = counting_upstream().await;
    let (proxy, mut rx) = proxy_with(upstream, |_| {}).await;
    let reply = request(
        proxy.addr,
        &format!("host: {}\r\nhost: evil.com\r\n", proxy.addr),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.head);
    assert!(refusal_message(&reply).contains("Host"));
    assert!(recorded_end(&mut rx, 400).await);
    let reply = request(proxy.addr, "").await;
    assert_eq!(reply.status, 400, "{}", reply.head);
    assert!(refusal_message(&reply).contains("Host"));
    assert!(recorded_end(&mut rx, 400).await);
    assert_eq!(seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn allow_remote_keeps_the_host_guard() {
    let (upstream, seen) = counting_upstream().await;
    let (proxy, mut rx) = proxy_with(upstream, |c| c.allow_remote = true).await;
    let reply = request(proxy.addr, "host: attacker.example:9000\r\n").await;
    assert_eq!(reply.status, 403, "{}", reply.head);
    assert!(refusal_message(&reply).contains("--allow-host"));
    assert!(recorded_end(&mut rx, 403).await);
    assert_eq!(seen.load(Ordering::SeqCst), 0);

    let (proxy, _rx) = proxy_with(upstream, |c| {
        c.allow_remote = true;
        c.allow_hosts = vec!["box.lan".into()];
    })
    .await;
    let reply = request(proxy.addr, "host: box.lan:9000\r\n").await;
    assert_eq!(reply.status, 200, "{}", reply.head);
    let reply = request(proxy.addr, "host: attacker.example\r\n").await;
    assert_eq!(reply.status, 403, "{}", reply.head);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}
