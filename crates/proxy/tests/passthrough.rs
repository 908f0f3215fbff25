//! The proxy is transparent: bytes, headers, timing and the client's departure pass through.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg};
use mcpscope_engine::model::{Model, Verdict};
use mcpscope_testkit::raw::{observe, proxy_to, read_head};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

type Handler = Arc<
    dyn Fn(String, Vec<u8>, TcpStream) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync,
>;

async fn upstream(handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                if let Some((head, body)) = read_head(&mut sock).await {
                    handler(head, body, sock).await;
                }
            });
        }
    });
    addr
}

/// Collects events until `quiet` passes without one.
async fn drain(rx: &mut mpsc::UnboundedReceiver<Event>, quiet: Duration) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(quiet, rx.recv()).await {
        out.push(event);
    }
    out
}

const CALL: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;

/// SSE with CRLF lines, a comment, a multi-line event, broken JSON and the result, close-delimited.
const ODD_SSE: &[u8] = b": keep-alive\r\n\r\nid: a1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"method\":\"notifications/message\",\"params\":{}}\r\n\r\ndata: {not json\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n";

#[tokio::test]
async fn odd_but_legal_sse_and_broken_json_pass_byte_for_byte_and_are_flagged() {
    let handler: Handler = Arc::new(|_, _, mut sock| {
        Box::pin(async move {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            for piece in ODD_SSE.chunks(7) {
                let _ = sock.write_all(piece).await;
            }
            let _ = sock.shutdown().await;
        })
    });
    let up = upstream(handler).await;
    let direct = observe(up, "POST", CALL).await;
    let (proxy, mut rx) = proxy_to(up).await;
    let through = observe(proxy.addr, "POST", CALL).await;
    assert_eq!(direct.body, ODD_SSE);
    assert_eq!(through, direct);
    let events = drain(&mut rx, Duration::from_millis(200)).await;
    let sse: Vec<&EventKind> = events
        .iter()
        .map(|e| &e.kind)
        .filter(|k| matches!(k, EventKind::SseEvent { .. }))
        .collect();
    assert_eq!(
        sse.len(),
        3,
        "three events; the comment-only block is not one"
    );
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::InvalidMessage { reason, .. } if reason.contains("invalid JSON"))));
    let (model, _) = Model::from_events(&events);
    assert_eq!(model.calls[0].verdict, Verdict::Answered);
    assert_eq!(
        model
            .messages
            .iter()
            .filter(|m| m.dir == Direction::ServerToClient && m.invalid.is_none())
            .count(),
        2
    );
}

#[tokio::test]
async fn sse_events_are_not_held_back() {
    let handler: Handler = Arc::new(|_, _, mut sock| {
        Box::pin(async move {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            for (i, pause) in [(1, 400u64), (2, 0)] {
                let data = format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"n\":{i}}}}}\n\n"
                );
                let _ = sock
                    .write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
                    .await;
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            let _ = sock.write_all(b"0\r\n\r\n").await;
        })
    });
    let up = upstream(handler).await;
    let (proxy, _rx) = proxy_to(up).await;
    let mut sock = TcpStream::connect(proxy.addr).await.expect("connect");
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n\r\n{CALL}",
        proxy.addr,
        CALL.len()
    );
    sock.write_all(req.as_bytes()).await.expect("write");
    let started = Instant::now();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut first_at = None;
    while !seen.contains("\"n\":2") {
        let n = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf))
            .await
            .expect("data")
            .expect("read");
        assert!(n > 0, "closed early");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        if first_at.is_none() && seen.contains("\"n\":1") {
            first_at = Some(started.elapsed());
        }
    }
    let first = first_at.expect("first event");
    let second = started.elapsed();
    assert!(
        second - first >= Duration::from_millis(300),
        "the first event waited for the second: {first:?} vs {second:?}"
    );
}

#[tokio::test]
async fn end_to_end_headers_pass_and_hop_by_hop_headers_do_not() {
    let handler: Handler = Arc::new(|head, _, mut sock| {
        Box::pin(async move {
            let body = head.to_ascii_lowercase();
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nmcp-session-id: abc\r\nx-upstream: yes\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        })
    });
    let up = upstream(handler).await;
    let (proxy, _rx) = proxy_to(up).await;
    let mut sock = TcpStream::connect(proxy.addr).await.expect("connect");
    let headers = [
        "mcp-session-id: s-42",
        "mcp-protocol-version: 2025-11-25",
        "last-event-id: 17",
        "authorization: Bearer secret-token",
        "mcp-method: tools/call",
        "mcp-name: echo",
        "accept: application/json, text/event-stream",
    ];
    let req = format!(
        "POST /mcp?x=1 HTTP/1.1\r\nhost: localhost:{}\r\n{}\r\nconnection: keep-alive, x-hop\r\nx-hop: secret\r\nkeep-alive: timeout=5\r\ncontent-length: 2\r\n\r\n{{}}",
        proxy.addr.port(),
        headers.join("\r\n")
    );
    sock.write_all(req.as_bytes()).await.expect("write");
    let (resp_head, echoed) = &head_and_body(&mut sock).await;
    assert!(echoed.starts_with("post /mcp?x=1 http/1.1"), "{echoed}");
    for header in headers {
        assert!(
            echoed.contains(&header.to_ascii_lowercase()),
            "missing {header} in {echoed}"
        );
    }
    assert!(
        echoed.contains(&format!("host: {up}")),
        "Host is the upstream's: {echoed}"
    );
    assert!(
        !echoed.contains("x-hop") && !echoed.contains("keep-alive: timeout"),
        "{echoed}"
    );
    let resp_head = resp_head.to_ascii_lowercase();
    assert!(
        resp_head.contains("mcp-session-id: abc") && resp_head.contains("x-upstream: yes"),
        "{resp_head}"
    );
}

#[tokio::test]
async fn many_clients_at_once_each_get_their_own_answer() {
    let handler: Handler = Arc::new(|_, body, mut sock| {
        Box::pin(async move {
            let req: serde_json::Value = serde_json::from_slice(&body).expect("json");
            tokio::time::sleep(Duration::from_millis(20)).await;
            let answer = serde_json::json!({"jsonrpc":"2.0","id":req["id"],"result":{"echo":req["params"]["arguments"]}}).to_string();
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        })
    });
    let up = upstream(handler).await;
    let (proxy, mut rx) = proxy_to(up).await;
    let addr = proxy.addr;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            tokio::spawn(async move {
                let call = format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":{{"n":{i}}}}}}}"#);
                let seen = observe(addr, "POST", &call).await;
                let v: serde_json::Value = serde_json::from_slice(&seen.body).expect("json");
                (i, v)
            })
        })
        .collect();
    for task in tasks {
        let (i, v) = task.await.expect("task");
        assert_eq!(v["id"], i);
        assert_eq!(v["result"]["echo"]["n"], i);
    }
    let events = drain(&mut rx, Duration::from_millis(200)).await;
    let (model, _) = Model::from_events(&events);
    assert_eq!(model.calls.len(), 50);
    assert!(model.calls.iter().all(|c| c.verdict == Verdict::Answered));
}

#[tokio::test]
async fn a_client_that_goes_away_drops_the_upstream_request() {
    let (closed_tx, mut closed_rx) = mpsc::unbounded_channel::<Instant>();
    let handler: Handler = Arc::new(move |_, _, mut sock| {
        let closed_tx = closed_tx.clone();
        Box::pin(async move {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            let event = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n";
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            let _ = sock.write_all(chunk.as_bytes()).await;
            // Wait until the proxy drops its upstream connection.
            let mut buf = [0u8; 16];
            let _ = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await;
            let _ = closed_tx.send(Instant::now());
        })
    });
    let up = upstream(handler).await;
    let (proxy, mut rx) = proxy_to(up).await;
    let mut sock = TcpStream::connect(proxy.addr).await.expect("connect");
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n\r\n{CALL}",
        proxy.addr,
        CALL.len()
    );
    sock.write_all(req.as_bytes()).await.expect("write");
    let mut buf = [0u8; 4096];
    let _ = sock.read(&mut buf).await.expect("first bytes");
    let left = Instant::now();
    drop(sock);
    let dropped = tokio::time::timeout(Duration::from_secs(5), closed_rx.recv())
        .await
        .expect("upstream dropped")
        .expect("time");
    assert!(dropped - left < Duration::from_secs(2));
    let events = drain(&mut rx, Duration::from_millis(200)).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::StreamEnded {
            dir: Direction::ServerToClient,
            how: EndHow::Cancelled,
            leg: Leg::Client,
            ..
        }
    )));
}

#[tokio::test]
async fn on_http2_a_reset_kills_only_its_own_stream() {
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let handler: Handler = Arc::new(|head, _, mut sock| {
        Box::pin(async move {
            if head.contains("\"poke\"") || head.contains("x-kill: 1") {
                let sse = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let _ = sock.write_all(sse.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                mcpscope_testkit::raw::reset(sock);
            } else {
                let body = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            }
        })
    });
    let up = upstream(handler).await;
    let (proxy, _rx) = proxy_to(up).await;
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2c handshake");
    tokio::spawn(conn);
    let request = |kill: bool| {
        http::Request::post(format!("http://{}/mcp", proxy.addr))
            .header("x-kill", if kill { "1" } else { "0" })
            .body(Full::new(bytes::Bytes::from_static(CALL.as_bytes())))
            .expect("request")
    };
    let dying = sender
        .send_request(request(true))
        .await
        .expect("head of the dying stream");
    let outcome = tokio::time::timeout(Duration::from_secs(5), dying.into_body().collect())
        .await
        .expect("end");
    assert!(
        outcome.is_err(),
        "the dying stream ends in an error (RST_STREAM)"
    );
    let fine = tokio::time::timeout(Duration::from_secs(5), sender.send_request(request(false)))
        .await
        .expect("second answer")
        .expect("the connection survived the sibling's reset");
    assert_eq!(fine.status(), 200);
}

#[tokio::test]
async fn a_request_body_sent_in_pieces_goes_upstream_whole_and_is_read_as_one_message() {
    let handler: Handler = Arc::new(|_, body, mut sock| {
        Box::pin(async move {
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            let _ = sock.write_all(&body).await;
        })
    });
    let up = upstream(handler).await;
    let (proxy, mut rx) = proxy_to(up).await;
    let mut sock = TcpStream::connect(proxy.addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        proxy.addr.port()
    );
    sock.write_all(head.as_bytes()).await.expect("head");
    for piece in CALL.as_bytes().chunks(CALL.len() / 3 + 1) {
        let chunk = [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat();
        sock.write_all(&chunk).await.expect("chunk");
        sock.flush().await.expect("flush");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    sock.write_all(b"0\r\n\r\n").await.expect("last chunk");
    let (_, echoed) = head_and_body(&mut sock).await;
    assert_eq!(echoed, CALL, "the upstream got the body whole");
    let events = drain(&mut rx, Duration::from_millis(300)).await;
    let sent: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Message {
                dir: Direction::ClientToServer,
                body,
                ..
            } => Some(body.clone()),
            _ => None,
        })
        .collect();
    let expected: serde_json::Value = serde_json::from_str(CALL).expect("json");
    assert_eq!(sent, [expected], "one message, from all the pieces");
}

/// Reads a connection to its end (within 5 s): the response's head and its body, as text.
async fn head_and_body(sock: &mut TcpStream) -> (String, String) {
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), sock.read_to_end(&mut raw))
        .await
        .expect("response")
        .expect("read");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("head");
    (head.to_string(), body.to_string())
}
