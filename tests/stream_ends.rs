//! Every exchange ends exactly once, and broken input gets an answer: a client that gives up
//! before the response head, an oversized or badly framed request body, an upstream whose
//! response head does not parse, and SSE bodies that end inside an event, carry data that is
//! not UTF-8 or pass the decoder's limit (their bytes still forwarded unchanged).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg};
use mcpscope_engine::wire::observe::{NOT_UTF8, TRUNCATED};
use mcpscope_proxy::{self as proxy, Config, Limits, Proxy};
use mcpscope_session::sink::EventSink;
use mcpscope_testkit::raw::{Close, read_head, read_reply};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(5);

/// A raw upstream: reads each request head (and its Content-Length body), writes `reply`, then
/// closes (FIN) — or, with no reply, keeps the connection open without a word.
async fn raw_upstream(reply: Option<Vec<u8>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let reply = reply.clone();
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                match reply {
                    Some(bytes) => {
                        let _ = sock.write_all(&bytes).await;
                        let _ = sock.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    addr
}

async fn start(upstream: SocketAddr, limits: Limits) -> (Proxy, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = Config {
        upstream: format!("http://{upstream}/mcp").parse().expect("uri"),
        limits,
        ..Default::default()
    };
    let proxy = proxy::start(config, EventSink::new(tx))
        .await
        .expect("proxy");
    (proxy, rx)
}

async fn events(rx: &mut mpsc::UnboundedReceiver<Event>) -> Vec<EventKind> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    std::iter::from_fn(|| rx.try_recv().ok())
        .map(|e| e.kind)
        .collect()
}

/// Each opened exchange has exactly one response end; returns those ends.
fn ends_once(events: &[EventKind]) -> Vec<(EndHow, Leg, Option<String>)> {
    let mut out = Vec::new();
    for opened in events.iter().filter_map(|k| match k {
        EventKind::StreamOpened { stream, .. } => Some(*stream),
        _ => None,
    }) {
        let ends: Vec<_> = events
            .iter()
            .filter_map(|k| match k {
                EventKind::StreamEnded {
                    stream,
                    dir: Direction::ServerToClient,
                    how,
                    leg,
                    detail,
                    ..
                } if *stream == opened => Some((*how, *leg, detail.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(ends.len(), 1, "stream #{opened}: {ends:?} in {events:?}");
        out.extend(ends);
    }
    out
}

fn post_head(addr: SocketAddr, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-session-id: s1\r\n{extra}\r\n"
    )
}

async fn post_raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.expect("connect");
    let _ = sock.write_all(bytes).await;
    sock
}

const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

fn post(addr: SocketAddr, body: &str) -> Vec<u8> {
    let mut bytes = post_head(addr, &format!("content-length: {}\r\n", body.len())).into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

#[tokio::test]
async fn a_client_that_gives_up_before_the_response_head_is_ended_cancelled() {
    let upstream = raw_upstream(None).await;
    let (proxy, mut rx) = start(upstream, Limits::default()).await;
    for n in 0..20 {
        let sock = post_raw(proxy.addr, &post(proxy.addr, PING)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        if n % 2 == 0 {
            mcpscope_testkit::raw::reset(sock);
        } else {
            drop(sock);
        }
    }
    let mut all = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        all.extend(events(&mut rx).await);
        let ended = all
            .iter()
            .filter(|k| {
                matches!(
                    k,
                    EventKind::StreamEnded {
                        dir: Direction::ServerToClient,
                        ..
                    }
                )
            })
            .count();
        if ended >= 20 || Instant::now() > deadline {
            break;
        }
    }
    let ends = ends_once(&all);
    assert_eq!(ends.len(), 20, "{all:?}");
    for (how, leg, _) in ends {
        assert_eq!((how, leg), (EndHow::Cancelled, Leg::Client));
    }
    assert!(
        proxy.shared.live_streams().is_empty(),
        "faults no longer reach them"
    );
}

#[tokio::test]
async fn an_oversized_request_is_answered_413_not_reset() {
    let upstream = raw_upstream(None).await;
    let limits = Limits {
        request_body: 1024,
        ..Limits::default()
    };
    let (proxy, mut rx) = start(upstream, limits).await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"pad":"{}"}}}}"#,
        "a".repeat(256 * 1024)
    );
    let sent = Instant::now();
    let sock = post_raw(proxy.addr, &post(proxy.addr, &body)).await;
    let reply = read_reply(sock, sent, WAIT).await;
    assert_eq!(reply.status, 413, "{reply:?}");
    assert_ne!(reply.end, Close::Reset, "{reply:?}");
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).expect("JSON-RPC error");
    let message = answer["error"]["message"].as_str().expect("message");
    assert!(message.contains("1024 bytes"), "{message}");
    let all = events(&mut rx).await;
    let ends = ends_once(&all);
    assert!(
        matches!(&ends[..], [(EndHow::Error, Leg::Client, Some(d))] if d.contains("1024 bytes")),
        "{ends:?}"
    );
}

#[tokio::test]
async fn a_broken_chunked_body_is_answered_400() {
    let upstream = raw_upstream(None).await;
    let (proxy, mut rx) = start(upstream, Limits::default()).await;
    let mut bytes = post_head(proxy.addr, "transfer-encoding: chunked\r\n").into_bytes();
    bytes.extend_from_slice(b"5\r\n{\"jso\r\nzz\r\nnonsense\r\n0\r\n\r\n");
    let sent = Instant::now();
    let sock = post_raw(proxy.addr, &bytes).await;
    let reply = read_reply(sock, sent, WAIT).await;
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(reply.text().contains("framing"), "{reply:?}");
    let ends = ends_once(&events(&mut rx).await);
    assert!(
        matches!(&ends[..], [(EndHow::Error, Leg::Client, Some(_))]),
        "{ends:?}"
    );
}

#[tokio::test]
async fn a_response_head_that_does_not_parse_is_answered_502() {
    let upstream = raw_upstream(Some(b"garbage\r\n\r\n".to_vec())).await;
    let (proxy, mut rx) = start(upstream, Limits::default()).await;
    let sent = Instant::now();
    let sock = post_raw(proxy.addr, &post(proxy.addr, PING)).await;
    let reply = read_reply(sock, sent, WAIT).await;
    assert_eq!(reply.status, 502, "{reply:?}");
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).expect("JSON-RPC error");
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not parse"))
    );
    let ends = ends_once(&events(&mut rx).await);
    assert!(
        matches!(&ends[..], [(EndHow::Error, Leg::Upstream, Some(_))]),
        "{ends:?}"
    );
}

/// An SSE body through the proxy (close-delimited, ended cleanly by the upstream): the bytes the
/// client got, and the events.
async fn sse_through(body: &[u8], limits: Limits) -> (Vec<u8>, Vec<EventKind>) {
    let mut reply =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
    reply.extend_from_slice(body);
    let upstream = raw_upstream(Some(reply)).await;
    let (proxy, mut rx) = start(upstream, limits).await;
    let sent = Instant::now();
    let sock = post_raw(proxy.addr, &post(proxy.addr, PING)).await;
    let reply = read_reply(sock, sent, WAIT).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let all = events(&mut rx).await;
    ends_once(&all);
    (reply.body, all)
}

fn invalid(events: &[EventKind]) -> Vec<String> {
    events
        .iter()
        .filter_map(|k| match k {
            EventKind::InvalidMessage {
                dir: Direction::ServerToClient,
                reason,
                ..
            } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

fn messages(events: &[EventKind]) -> usize {
    events
        .iter()
        .filter(|k| {
            matches!(
                k,
                EventKind::Message {
                    dir: Direction::ServerToClient,
                    ..
                }
            )
        })
        .count()
}

#[tokio::test]
async fn a_clean_end_inside_an_sse_event_is_a_truncated_event() {
    let body =
        b"data: {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,";
    let (got, events) = sse_through(body, Limits::default()).await;
    assert_eq!(got, body, "forwarded unchanged");
    assert_eq!(invalid(&events), [TRUNCATED.to_string()]);
    assert_eq!(messages(&events), 1);
}

#[tokio::test]
async fn sse_data_that_is_not_utf8_is_an_invalid_message() {
    let body = b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"t\":\"\xff\xfe\"}}\n\n";
    let (got, events) = sse_through(body, Limits::default()).await;
    assert_eq!(got, body, "forwarded unchanged");
    assert_eq!(invalid(&events), [NOT_UTF8.to_string()]);
    assert_eq!(messages(&events), 0);
}

#[tokio::test]
async fn an_sse_event_past_the_limit_is_reported_once_and_forwarded_byte_exact() {
    let mut body = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\n".to_vec();
    body.extend_from_slice(format!("data: {}\n\n", "x".repeat(500)).as_bytes());
    body.extend_from_slice(format!("data: {}\n\n", "y".repeat(500)).as_bytes());
    body.extend_from_slice(b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n");
    let limits = Limits {
        sse_event: 128,
        ..Limits::default()
    };
    let (got, events) = sse_through(&body, limits).await;
    assert_eq!(got, body, "forwarded byte-exact");
    let reasons = invalid(&events);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("128 bytes"), "{reasons:?}");
    assert_eq!(messages(&events), 1, "nothing decoded after the limit");
}

#[tokio::test]
async fn the_binary_takes_its_body_limit_from_the_command_line() {
    let upstream = raw_upstream(None).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--upstream"])
        .arg(format!("http://{upstream}/mcp"))
        .args(["--no-record", "--json", "--max-request-body", "2048"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mcpscope");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "mcpscope did not listen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"pad":"{}"}}}}"#,
        "a".repeat(8 * 1024)
    );
    let sent = Instant::now();
    let sock = post_raw(addr, &post(addr, &body)).await;
    let reply = read_reply(sock, sent, WAIT).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 413, "{reply:?}");
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).expect("JSON-RPC error");
    let message = answer["error"]["message"].as_str().expect("message");
    assert!(message.contains("2048 bytes"), "{message}");
}

/// An upstream that answers every request with a `200` SSE head and resets the connection at
/// once (SO_LINGER 0).
async fn head_then_reset_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\n\r\n";
                let _ = sock.write_all(head.as_bytes()).await;
                mcpscope_testkit::raw::reset(sock);
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reset_right_after_the_response_head_still_delivers_the_head_every_time() {
    let upstream = head_then_reset_upstream().await;
    let (proxy, _rx) = start(upstream, Limits::default()).await;
    let call =
        serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poke"}});
    let mut lost = Vec::new();
    const RUNS: usize = 60;
    for run in 0..RUNS {
        let sock = mcpscope_testkit::raw::send(proxy.addr, "POST", Some("s1"), Some(&call)).await;
        let reply = read_reply(sock, Instant::now(), WAIT).await;
        if reply.status != 200 || reply.end != Close::Reset {
            lost.push((run, reply.status, reply.end));
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {RUNS} runs did not see the 200 head followed by a reset: {lost:?}",
        lost.len()
    );
}

/// A `tools/call` answer whose result nests `depth` arrays deep.
fn deep_answer(depth: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"deep"}}],"structuredContent":{{"v":{}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// The call's verdict once the proxy's events are folded.
fn verdict_of(events: Vec<EventKind>) -> mcpscope_engine::model::verdict::Verdict {
    let mut model = mcpscope_engine::model::Model::new();
    for kind in events {
        model.apply(&Event::now(kind));
    }
    let call = model.calls.iter().next().expect("the call");
    call.verdict.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_valid_answer_nested_200_deep_is_paired_with_its_call_in_json_and_sse() {
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"poke"}}"#;
    let answer = deep_answer(200);
    let json = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let sse = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: message\ndata: {answer}\n\n"
    );
    for (what, reply) in [("JSON", json), ("SSE", sse)] {
        let upstream = raw_upstream(Some(reply.into_bytes())).await;
        let (proxy, mut rx) = start(upstream, Limits::default()).await;
        let sent = Instant::now();
        let sock = post_raw(proxy.addr, &post(proxy.addr, call)).await;
        let got = read_reply(sock, sent, WAIT).await;
        assert_eq!(got.status, 200, "{what}: {got:?}");
        assert!(
            got.text().contains(&answer),
            "{what}: the client gets the whole answer"
        );
        let all = events(&mut rx).await;
        assert_eq!(
            invalid(&all),
            Vec::<String>::new(),
            "{what}: a valid answer is valid"
        );
        assert_eq!(messages(&all), 1, "{what}: one answer");
        let verdict = verdict_of(all);
        assert!(
            matches!(verdict, mcpscope_engine::model::verdict::Verdict::Answered),
            "{what}: the call is answered, not {verdict:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_the_proxy_within_a_second_while_a_client_holds_an_open_call() {
    // The upstream opens the call's SSE stream and never says more.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\n\r\n: open\n\n";
                let _ = sock.write_all(head.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    let dir = common::peers::temp_dir();
    let rec = dir.path().join("rec.jsonl");
    let rec_arg = rec.to_string_lossy().into_owned();
    let mut proxy = common::peers::Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--record", &rec_arg, "--no-publish"],
    );
    let addr: SocketAddr = proxy
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("proxy address");
    let call =
        serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poke"}});
    // The client holds its connection open, waiting on the answer.
    let mut held = mcpscope_testkit::raw::send(addr, "POST", Some("s1"), Some(&call)).await;
    let mut first = [0u8; 64];
    let n = tokio::time::timeout(WAIT, tokio::io::AsyncReadExt::read(&mut held, &mut first))
        .await
        .expect("the head within 5 s")
        .expect("read");
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let pid = proxy.proc.child.id().to_string();
    let sent = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = loop {
        if let Some(status) = proxy.proc.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "still running 5 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let took = sent.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(1),
        "exited {took:?} after SIGTERM"
    );
    let events = mcpscope_engine::record::read_file(&rec)
        .expect("recording")
        .events;
    let shutdown = events.iter().any(|e| {
        matches!(&e.kind, EventKind::StreamEnded { dir: Direction::ServerToClient, detail: Some(d), .. } if d == "shutdown")
    });
    assert!(shutdown, "the held exchange ends as shutdown: {events:?}");
    drop(held);
}
