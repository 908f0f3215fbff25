//! The seed report's fault matrix on real sockets: a raw upstream that kills streams exactly as
//! real servers do, a raw client that tells a reset from a clean end, and the proxy between them.
//! What the client observes through the proxy must match what it observes directly, and the
//! verdict must follow the death within 50 ms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{EndHow, Event};
use mcpscope_engine::model::{Model, Verdict, What};
use mcpscope_proxy as proxy;
use mcpscope_testkit::raw::{End, Observed, observe, read_head, reset};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How the raw upstream answers a `tools/call`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// SSE response, one notification, then a clean close (FIN) before the result.
    SseEof,
    /// SSE response, one notification, then a reset (RST).
    SseReset,
    /// The server dies: the response stream and every GET stream are reset.
    ServerDies,
    /// A JSON response cut short by a reset.
    JsonReset,
    /// HTTP 503.
    Status503,
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\nconnection: close\r\n\r\n";
const NOTIFY: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n";

/// A raw HTTP/1.1 upstream; records when it killed a stream.
struct Upstream {
    addr: std::net::SocketAddr,
    deaths: Arc<Mutex<Vec<DateTime<Utc>>>>,
}

async fn start_upstream(fault: Fault) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    let deaths = Arc::new(Mutex::new(Vec::new()));
    let gets: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
    let recorded = deaths.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let deaths = recorded.clone();
            let gets = gets.clone();
            tokio::spawn(async move {
                let Some((head, _body)) = read_head(&mut sock).await else {
                    return;
                };
                if head.starts_with("GET") {
                    let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
                    let _ = sock.write_all(b": open\n\n").await;
                    gets.lock().expect("gets").push(sock);
                    return;
                }
                match fault {
                    Fault::Status503 => {
                        let _ = sock.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                    }
                    Fault::JsonReset => {
                        let body = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"never"}]}}"#;
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock.write_all(&body.as_bytes()[..20]).await;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        deaths.lock().expect("deaths").push(Utc::now());
                        reset(sock);
                    }
                    Fault::SseEof | Fault::SseReset | Fault::ServerDies => {
                        let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
                        let _ = sock.write_all(NOTIFY.as_bytes()).await;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        deaths.lock().expect("deaths").push(Utc::now());
                        if fault == Fault::SseEof {
                            let _ = sock.shutdown().await;
                            drop(sock);
                        } else {
                            reset(sock);
                        }
                        if fault == Fault::ServerDies {
                            for get in gets.lock().expect("gets").drain(..) {
                                reset(get);
                            }
                        }
                    }
                }
            });
        }
    });
    Upstream { addr, deaths }
}

struct Proxied {
    addr: std::net::SocketAddr,
    events: mpsc::UnboundedReceiver<Event>,
    _proxy: proxy::Proxy,
}

async fn start_proxy(upstream: std::net::SocketAddr) -> Proxied {
    let (proxy, events) = mcpscope_testkit::raw::proxy_to(upstream).await;
    Proxied {
        addr: proxy.addr,
        events,
        _proxy: proxy,
    }
}

/// Folds events until a notice matches; returns the model and when the notice was produced.
async fn fold_until(
    events: &mut mpsc::UnboundedReceiver<Event>,
    model: &mut Model,
    want: impl Fn(&What) -> bool,
) -> DateTime<Utc> {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("the awaited notice within 5 s")
            .expect("feed open");
        if model.apply(&event).iter().any(|n| want(&n.what)) {
            return Utc::now();
        }
    }
}

const CALL: &str =
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"poke","arguments":{}}}"#;

async fn seed_case(fault: Fault) -> (Observed, Observed, Model, Option<i64>) {
    let direct_upstream = start_upstream(fault).await;
    let direct = observe(direct_upstream.addr, "POST", CALL).await;

    let upstream = start_upstream(fault).await;
    let mut proxied = start_proxy(upstream.addr).await;
    let through = observe(proxied.addr, "POST", CALL).await;
    let mut model = Model::new();
    let wanted = |w: &What| matches!(w, What::CallOrphaned { .. } | What::CallFailed { .. });
    let noticed = fold_until(&mut proxied.events, &mut model, wanted).await;
    let death = upstream.deaths.lock().expect("deaths").first().copied();
    let lag = death.map(|d| (noticed - d).num_milliseconds());
    (direct, through, model, lag)
}

fn poke_verdict(model: &Model) -> Verdict {
    model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("poke"))
        .map(|c| c.verdict.clone())
        .expect("poke call")
}

fn assert_orphaned(model: &Model, how: EndHow, lag: Option<i64>) {
    match poke_verdict(model) {
        Verdict::Orphaned { death, .. } => assert_eq!(death.how, Some(how)),
        other => panic!("expected orphaned, got {other:?}"),
    }
    let lag = lag.expect("the upstream recorded the death");
    assert!(lag < 50, "verdict {lag} ms after the death");
}

#[tokio::test]
async fn sse_clean_end_before_the_result_stays_a_clean_end() {
    let (direct, through, model, lag) = seed_case(Fault::SseEof).await;
    assert_eq!(direct.end, End::Clean);
    assert_eq!(through, direct, "same status, bytes and kind of end");
    assert_orphaned(&model, EndHow::Eof, lag);
}

#[tokio::test]
async fn sse_reset_stays_a_reset() {
    let (direct, through, model, lag) = seed_case(Fault::SseReset).await;
    assert_eq!(direct.end, End::Reset);
    assert_eq!((through.status, &through.end), (direct.status, &direct.end));
    assert!(direct.body.starts_with(&through.body) || through.body.starts_with(&direct.body));
    assert_orphaned(&model, EndHow::Reset, lag);
}

#[tokio::test]
async fn json_then_reset_stays_a_reset() {
    let (direct, through, model, lag) = seed_case(Fault::JsonReset).await;
    assert_eq!(direct.end, End::Reset);
    assert_eq!((through.status, &through.end), (direct.status, &direct.end));
    assert_orphaned(&model, EndHow::Reset, lag);
}

#[tokio::test]
async fn http_503_passes_through_and_fails_the_call() {
    let (direct, through, model, _) = seed_case(Fault::Status503).await;
    assert_eq!(direct.status, 503);
    assert_eq!(through, direct);
    assert_eq!(
        poke_verdict(&model),
        Verdict::Error {
            message: "HTTP 503".into()
        }
    );
}

/// Opens a GET stream and waits for its first bytes; returns the socket.
async fn open_get(addr: std::net::SocketAddr) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: s1\r\n\r\n"
    );
    sock.write_all(request.as_bytes()).await.expect("write");
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf))
        .await
        .expect("GET head")
        .expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    sock
}

/// Reads until the GET stream ends; returns whether it was reset.
async fn get_end(mut sock: TcpStream) -> End {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf))
            .await
            .expect("GET end within 5 s")
        {
            Ok(0) => return End::Truncated,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return End::Reset,
            Err(e) => panic!("GET read: {e}"),
        }
    }
}

#[tokio::test]
async fn the_server_dying_resets_the_call_stream_and_the_get_stream() {
    let direct_upstream = start_upstream(Fault::ServerDies).await;
    let get = open_get(direct_upstream.addr).await;
    let direct = observe(direct_upstream.addr, "POST", CALL).await;
    let direct_get = get_end(get).await;

    let upstream = start_upstream(Fault::ServerDies).await;
    let mut proxied = start_proxy(upstream.addr).await;
    let get = open_get(proxied.addr).await;
    let through = observe(proxied.addr, "POST", CALL).await;
    let through_get = get_end(get).await;

    assert_eq!(
        (direct.end.clone(), direct_get.clone()),
        (End::Reset, End::Reset)
    );
    assert_eq!((through.end, through_get), (direct.end, direct_get));
    let mut model = Model::new();
    fold_until(&mut proxied.events, &mut model, |w| {
        matches!(w, What::CallOrphaned { .. })
    })
    .await;
    let noticed = Utc::now();
    assert!(matches!(poke_verdict(&model), Verdict::Orphaned { .. }));
    // The GET stream's death is seen too.
    fold_until(&mut proxied.events, &mut model, |w| {
        matches!(
            w,
            What::StreamEnded {
                how: EndHow::Reset,
                ..
            }
        )
    })
    .await;
    let death = upstream.deaths.lock().expect("deaths")[0];
    assert!((noticed - death).num_milliseconds() < 200);
}

#[tokio::test]
async fn an_unreachable_upstream_gets_a_502_with_a_jsonrpc_error() {
    let unused = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let dead = unused.local_addr().expect("addr");
    drop(unused);
    let mut proxied = start_proxy(dead).await;
    let through = observe(proxied.addr, "POST", CALL).await;
    assert_eq!(through.status, 502);
    let body: serde_json::Value = serde_json::from_slice(&through.body).expect("JSON body");
    assert_eq!(body["id"], 7);
    let message = body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains(&dead.to_string()) && message.contains("unreachable"),
        "{message}"
    );
    let mut model = Model::new();
    fold_until(&mut proxied.events, &mut model, |w| {
        matches!(w, What::UpstreamUnreachable { .. })
    })
    .await;
}

#[tokio::test]
async fn a_non_loopback_host_is_refused() {
    let upstream = start_upstream(Fault::Status503).await;
    let proxied = start_proxy(upstream.addr).await;
    let mut sock = TcpStream::connect(proxied.addr).await.expect("connect");
    sock.write_all(b"POST /mcp HTTP/1.1\r\nhost: attacker.example\r\ncontent-length: 2\r\n\r\n{}")
        .await
        .expect("write");
    let mut buf = [0u8; 256];
    let n = sock.read(&mut buf).await.expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 403"));
}
