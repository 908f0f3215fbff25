//! The proxy is never held by a slow peer: a client that dribbles its request head or its body,
//! an idle keep-alive connection, an upstream that never connects or never answers. And a long
//! SSE response is never cut by any of those timers. Real sockets on loopback, short timeouts.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mcpscope_engine::event::{Event, EventKind};
use mcpscope_engine::model::{Model, Verdict};
use mcpscope_proxy::{self as proxy, Config, Proxy, Timeouts};
use mcpscope_session::sink::EventSink;
use mcpscope_testkit::raw::{self, Close};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Short timeouts for the tests; each test shortens the one it checks further.
fn timeouts() -> Timeouts {
    Timeouts {
        request_head: Duration::from_secs(5),
        request_body: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        connect: Duration::from_secs(5),
        response_head: Duration::from_secs(5),
    }
}

async fn proxy_with(
    upstream: SocketAddr,
    timeouts: Timeouts,
) -> (Proxy, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = Config {
        upstream: format!("http://{upstream}/mcp").parse().expect("uri"),
        timeouts,
        ..Default::default()
    };
    let proxy = proxy::start(config, EventSink::new(tx))
        .await
        .expect("proxy");
    (proxy, rx)
}

/// An upstream that answers every request with a JSON-RPC result echoing its id (keep-alive).
async fn answering_upstream() -> SocketAddr {
    tiring_upstream(usize::MAX).await
}

/// An upstream that reads requests and never answers (connections held open).
async fn silent_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut sock, _)) = listener.accept().await {
            let _ = raw::read_head(&mut sock).await;
            held.push(sock);
        }
    });
    addr
}

fn call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {}}})
}

/// Reads until FIN or reset; how long it took.
async fn until_closed(sock: &mut TcpStream, wait: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(wait, sock.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

async fn drain(rx: &mut mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    events
}

#[tokio::test]
async fn a_slowloris_client_is_closed_while_others_are_served() {
    let upstream = answering_upstream().await;
    let (proxy, _rx) = proxy_with(
        upstream,
        Timeouts {
            request_head: Duration::from_millis(1000),
            ..timeouts()
        },
    )
    .await;
    let addr = proxy.addr;
    let slow = tokio::spawn(async move {
        let mut sock = TcpStream::connect(addr).await.expect("connect");
        let head = format!("POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 2\r\n\r\n{{}}");
        let start = Instant::now();
        for byte in head.as_bytes() {
            if sock.write_all(&[*byte]).await.is_err() {
                return (start.elapsed(), true);
            }
            let mut buf = [0u8; 64];
            match tokio::time::timeout(Duration::from_millis(200), sock.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return (start.elapsed(), true),
                Ok(Ok(_)) => return (start.elapsed(), false),
                Err(_) => {}
            }
        }
        (start.elapsed(), false)
    });
    // Meanwhile, another client is served at once, several times.
    for id in 1..=3 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let reply =
            raw::exchange(addr, "POST", None, Some(&call(id)), Duration::from_secs(3)).await;
        assert_eq!(reply.status, 200, "{}", reply.head);
        let body: Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["id"], id);
    }
    let (after, closed) = slow.await.expect("slow client");
    assert!(closed, "the dribbling client was answered or never closed");
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_millis(2500),
        "closed after {after:?}"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let upstream = answering_upstream().await;
    let (proxy, _rx) = proxy_with(
        upstream,
        Timeouts {
            idle: Duration::from_millis(600),
            ..timeouts()
        },
    )
    .await;
    let mut sock = TcpStream::connect(proxy.addr).await.expect("connect");
    let body = call(1).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        proxy.addr,
        body.len()
    );
    sock.write_all(request.as_bytes()).await.expect("write");
    let mut buf = vec![0u8; 4096];
    let n = sock.read(&mut buf).await.expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The response is complete and the connection is kept alive; nothing more is sent.
    let closed = until_closed(&mut sock, Duration::from_secs(3)).await;
    let closed = closed.expect("the idle connection was never closed");
    assert!(
        closed >= Duration::from_millis(400) && closed < Duration::from_millis(2000),
        "closed after {closed:?}"
    );
}

#[tokio::test]
async fn an_sse_stream_outlives_every_connection_timer() {
    // The upstream opens an SSE stream, sends an event, holds it 1.5 s, sends another, ends.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.expect("accept");
        let _ = raw::read_head(&mut sock).await;
        let event = |data: &str| {
            let text = format!("data: {data}\n\n");
            format!("{:x}\r\n{text}\r\n", text.len())
        };
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let _ = sock
            .write_all(
                format!(
                    "{head}{}",
                    event(
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}"
                    )
                )
                .as_bytes(),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let last = event("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
        let _ = sock.write_all(format!("{last}0\r\n\r\n").as_bytes()).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let short = Duration::from_millis(300);
    let (proxy, _rx) = proxy_with(
        upstream,
        Timeouts {
            request_head: short,
            request_body: short,
            idle: short,
            connect: short,
            response_head: short,
        },
    )
    .await;
    let sent = Instant::now();
    let sock = raw::send(proxy.addr, "POST", None, Some(&call(1))).await;
    let reply = raw::read_reply(sock, sent, Duration::from_secs(4)).await;
    assert_eq!(reply.status, 200, "{}", reply.head);
    assert!(reply.complete, "the SSE stream was cut: {:?}", reply.text());
    assert!(reply.text().contains("\"id\":1"), "{}", reply.text());
    assert!(sent.elapsed() >= Duration::from_millis(1400));
}

#[tokio::test]
async fn an_upstream_that_never_answers_gets_a_504_with_the_request_id() {
    let upstream = silent_upstream().await;
    let (proxy, mut rx) = proxy_with(
        upstream,
        Timeouts {
            response_head: Duration::from_millis(500),
            ..timeouts()
        },
    )
    .await;
    let sent = Instant::now();
    let reply = raw::exchange(
        proxy.addr,
        "POST",
        None,
        Some(&call(42)),
        Duration::from_secs(4),
    )
    .await;
    let took = sent.elapsed();
    assert_eq!(reply.status, 504, "{}", reply.head);
    assert!(
        took < Duration::from_millis(2000),
        "answered after {took:?}"
    );
    let body: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(body["id"], 42);
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("response head"), "{message}");
    let events = drain(&mut rx).await;
    assert!(
        events.iter().any(|e| matches!(&e.kind,
        EventKind::UpstreamUnreachable { error, .. } if error.contains("--response-head-timeout")))
    );
    let (model, _) = Model::from_events(&events);
    let call = model
        .calls
        .iter()
        .find(|c| c.id.value() == json!(42))
        .expect("the call");
    match &call.verdict {
        Verdict::Error { message } => {
            assert!(message.contains("response head"), "{message}")
        }
        other => panic!("verdict {other:?}"),
    }
}

/// An upstream that answers the first `answered` requests of each connection with a JSON-RPC
/// result echoing its id, then reads the next and never answers it (the connection held open).
async fn tiring_upstream(answered: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                for _ in 0..answered {
                    let Some((_, body)) = raw::read_head(&mut sock).await else {
                        return;
                    };
                    let id = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|v| v.get("id").cloned())
                        .unwrap_or(Value::Null);
                    let reply = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
                        reply.len()
                    );
                    if sock.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
                let _ = raw::read_head(&mut sock).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    addr
}

/// One request on a kept client connection; its response, read whole.
async fn post_on(client: &mut TcpStream, id: u64) -> (String, Value) {
    let body = call(id).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    client.write_all(request.as_bytes()).await.expect("write");
    let (head, body) = tokio::time::timeout(Duration::from_secs(4), raw::read_head(client))
        .await
        .expect("answered in time")
        .expect("a response");
    (head, serde_json::from_slice(&body).expect("json"))
}

#[tokio::test]
async fn the_response_head_timeout_holds_on_a_kept_connection_and_never_fires_late() {
    // The upstream connection outlives its requests: the wait for each head is bounded anew,
    // and a deadline that passed while the connection sat idle does not cut the next request.
    let upstream = tiring_upstream(2).await;
    let (proxy, _rx) = proxy_with(
        upstream,
        Timeouts {
            response_head: Duration::from_millis(400),
            ..timeouts()
        },
    )
    .await;
    let mut client = TcpStream::connect(proxy.addr).await.expect("connect");
    let (head, body) = post_on(&mut client, 1).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body["id"], 1);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (head, body) = post_on(&mut client, 2).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body["id"], 2);
    let sent = Instant::now();
    let (head, body) = post_on(&mut client, 3).await;
    let took = sent.elapsed();
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    assert_eq!(body["id"], 3);
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(2000),
        "answered after {took:?}"
    );
}

#[tokio::test]
async fn a_black_hole_upstream_gets_a_504_within_the_connect_timeout() {
    // A listener that never accepts, its accept queue filled: further SYNs are dropped.
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind");
    socket.listen(0).expect("listen");
    let upstream = socket
        .local_addr()
        .expect("addr")
        .as_socket()
        .expect("inet");
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(upstream)).await
        {
            fillers.push(s);
        }
    }
    let (proxy, _rx) = proxy_with(
        upstream,
        Timeouts {
            connect: Duration::from_millis(500),
            ..timeouts()
        },
    )
    .await;
    let sent = Instant::now();
    let reply = raw::exchange(
        proxy.addr,
        "POST",
        None,
        Some(&call(9)),
        Duration::from_secs(4),
    )
    .await;
    let took = sent.elapsed();
    assert!(
        reply.status == 504 || reply.status == 502,
        "{} {:?}",
        reply.head,
        reply.end
    );
    assert!(
        took < Duration::from_millis(2000),
        "answered after {took:?}"
    );
    let body: Value = serde_json::from_slice(&reply.body).expect("json");
    assert_eq!(body["id"], 9);
    drop(socket);
}

#[tokio::test]
async fn a_stalled_request_body_gets_a_408() {
    let upstream = answering_upstream().await;
    let (proxy, mut rx) = proxy_with(
        upstream,
        Timeouts {
            request_body: Duration::from_millis(500),
            ..timeouts()
        },
    )
    .await;
    let mut sock = TcpStream::connect(proxy.addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"jsonrpc\"",
        proxy.addr
    );
    sock.write_all(head.as_bytes()).await.expect("write");
    let sent = Instant::now();
    let reply = raw::read_reply(sock, sent, Duration::from_secs(4)).await;
    assert_eq!(reply.status, 408, "{}", reply.head);
    assert!(sent.elapsed() < Duration::from_millis(2000));
    assert_ne!(
        reply.end,
        Close::Open,
        "the connection stays open after a 408"
    );
    let body: Value = serde_json::from_slice(&reply.body).expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("request body"))
    );
    let events = drain(&mut rx).await;
    assert!(
        events.iter().any(|e| matches!(&e.kind,
        EventKind::StreamEnded { detail: Some(d), .. } if d.contains("request body not received")))
    );
}
