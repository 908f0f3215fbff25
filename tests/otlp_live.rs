//! Live OTLP export: the real proxy in front of the test server, spans decoded by a collector
//! in the test (hyper on 127.0.0.1:0, the official proto definitions); and a collector that
//! refuses or never answers leaves the proxy's round trips as they were.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::controller as fault;
use mcpscope_proxy::{self as proxy, Config};
use mcpscope_session::Session;
use mcpscope_testserver as testserver;
use mcpscope_testserver::client::McpClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

/// A session with the exporter subscribed (sending to `collector` every 100 ms) and a proxy in
/// front of `upstream` feeding it: the proxy, the session, the view's feed and the exporter.
async fn subscribed(
    upstream: &str,
    collector: SocketAddr,
) -> (
    proxy::Proxy,
    Session,
    mpsc::UnboundedReceiver<mcpscope_engine::event::Event>,
    mcpscope_telemetry::Telemetry,
) {
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: upstream.parse().expect("uri"),
        ..Default::default()
    };
    let mut options = mcpscope_telemetry::Options::new(
        format!("http://{collector}/v1/traces")
            .parse()
            .expect("uri"),
    );
    options.interval = Duration::from_millis(100);
    let mut builder = Session::builder("http", Redactor::disabled());
    let telemetry = mcpscope_telemetry::subscribe(&mut builder, options);
    let mut live = builder.start().expect("session");
    let proxy = proxy::start(config, live.sink()).await.expect("proxy");
    let view = live.feed().expect("feed");
    (proxy, live, view, telemetry)
}

/// A collector on 127.0.0.1:0: decodes each request and answers 200, or never answers.
async fn collector(answer: bool) -> (SocketAddr, mpsc::UnboundedReceiver<(String, Vec<Span>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let tx = tx.clone();
                async move {
                    let kind = req
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    let body = req.into_body().collect().await.expect("body").to_bytes();
                    let decoded = ExportTraceServiceRequest::decode(body).expect("protobuf");
                    let spans = decoded
                        .resource_spans
                        .into_iter()
                        .flat_map(|r| r.scope_spans)
                        .flat_map(|s| s.spans)
                        .collect();
                    let _ = tx.send((kind, spans));
                    if !answer {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                }
            });
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(tcp), svc).await;
            });
        }
    });
    (addr, rx)
}

fn attr(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?;
    match value.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

#[tokio::test]
async fn live_spans_for_answered_and_orphaned_calls_with_their_session_root() {
    let server = testserver::start(testserver::Options {
        event_ids: false,
        ..Default::default()
    })
    .await
    .expect("test server");
    let (collector, mut received) = collector(true).await;
    let (proxy, live, mut view, telemetry) = subscribed(&server.url(), collector).await;
    let rules = vec!["reset after 1 events when tool=slow".to_string()];
    let _engine = fault::install(&proxy, &rules, None).expect("rules");
    let viewed = tokio::spawn(async move {
        let mut n = 0usize;
        while view.recv().await.is_some() {
            n += 1;
        }
        n
    });

    let mut client = McpClient::new(&format!("http://{}/mcp", proxy.addr)).expect("client");
    client.handshake().await.expect("handshake");
    let session = client.session().expect("session").to_string();
    let echo = client
        .call("echo", json!({"text": "hi"}), false)
        .await
        .expect("echo");
    assert!(echo.result().is_some(), "{echo:?}");
    let slow = client
        .call("slow", json!({"steps": 3, "interval_ms": 100}), false)
        .await
        .expect("slow");
    assert!(slow.result().is_none(), "{slow:?}");

    // The call spans arrive while the proxy runs, before any root span.
    let mut spans: Vec<Span> = Vec::new();
    let deadline = Instant::now() + WAIT;
    while !spans.iter().any(|s| s.name == "tools/call slow") {
        let left = deadline.saturating_duration_since(Instant::now());
        let (kind, batch) = tokio::time::timeout(left, received.recv())
            .await
            .expect("spans within the bound")
            .expect("collector open");
        assert_eq!(kind, "application/x-protobuf");
        spans.extend(batch);
    }
    assert!(spans.iter().all(|s| s.name != "mcp.session"));
    telemetry.finish_within(WAIT).await;
    while let Ok((_, batch)) = received.try_recv() {
        spans.extend(batch);
    }

    let root = spans
        .iter()
        .find(|s| s.name == "mcp.session")
        .expect("root span");
    assert!(root.parent_span_id.is_empty());
    assert_eq!(
        attr(root, "mcp.session.id").as_deref(),
        Some(session.as_str())
    );
    let echo = spans
        .iter()
        .find(|s| s.name == "tools/call echo")
        .expect("echo span");
    let slow = spans
        .iter()
        .find(|s| s.name == "tools/call slow")
        .expect("slow span");
    for call in [echo, slow] {
        assert_eq!(call.trace_id, root.trace_id);
        assert_eq!(call.parent_span_id, root.span_id);
        assert_eq!(call.trace_id.len(), 16);
        assert_eq!(call.span_id.len(), 8);
        assert_eq!(call.kind, 3, "CLIENT");
        assert_eq!(attr(call, "mcp.method.name").as_deref(), Some("tools/call"));
        assert_eq!(
            attr(call, "mcp.session.id").as_deref(),
            Some(session.as_str())
        );
        assert_eq!(
            attr(call, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(attr(call, "server.address").as_deref(), Some("127.0.0.1"));
        assert!(call.end_time_unix_nano >= call.start_time_unix_nano);
        assert!(call.start_time_unix_nano > 0);
    }
    assert_eq!(attr(echo, "gen_ai.tool.name").as_deref(), Some("echo"));
    assert_eq!(attr(echo, "mcpscope.verdict").as_deref(), Some("answered"));
    assert!(echo.status.as_ref().is_none_or(|s| s.code == 0));
    assert_eq!(attr(slow, "gen_ai.tool.name").as_deref(), Some("slow"));
    assert_eq!(attr(slow, "mcpscope.verdict").as_deref(), Some("orphaned"));
    assert_eq!(attr(slow, "error.type").as_deref(), Some("orphaned"));
    assert_eq!(slow.status.as_ref().map(|s| s.code), Some(2), "ERROR");
    let died = slow
        .events
        .iter()
        .find(|e| e.name == "stream_died")
        .expect("stream_died event");
    assert!(died.attributes.iter().any(|kv| kv.key == "how"));
    // One span per call: the initialize call's, the two tools' (no duplicates).
    let calls: Vec<&Span> = spans.iter().filter(|s| s.name != "mcp.session").collect();
    let mut ids: Vec<&Vec<u8>> = calls.iter().map(|s| &s.span_id).collect();
    ids.dedup();
    assert_eq!(ids.len(), calls.len());

    drop(proxy);
    drop(client);
    drop(live);
    let _ = tokio::time::timeout(Duration::from_secs(2), viewed).await;
}

/// Round trips through the real binary with `--otlp-endpoint` pointing at `endpoint`: every
/// call is answered, each well within the bound.
async fn round_trips_unchanged(endpoint: String) {
    let server = testserver::start(testserver::Options::default())
        .await
        .expect("test server");
    let upstream = server.url();
    let proxy = tokio::task::spawn_blocking(move || {
        common::peers::Proxy::start(&upstream, &["--otlp-endpoint", &endpoint])
    })
    .await
    .expect("proxy");
    let mut client = McpClient::new(&proxy.url("/mcp")).expect("client");
    let started = Instant::now();
    client.handshake().await.expect("handshake");
    for i in 0..20 {
        let call = Instant::now();
        let text = format!("hi {i}");
        let answer = tokio::time::timeout(
            Duration::from_secs(2),
            client.call("echo", json!({ "text": text }), false),
        )
        .await
        .expect("answered promptly")
        .expect("echo");
        assert!(answer.result().is_some(), "{answer:?}\n{}", proxy.dump());
        assert!(
            call.elapsed() < Duration::from_secs(1),
            "{:?}",
            call.elapsed()
        );
        // Spread over more than one batch interval: several export attempts fail meanwhile.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_refusing_collector_costs_the_traffic_nothing() {
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    round_trips_unchanged(format!("http://{addr}/v1/traces")).await;
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_the_traffic_nothing() {
    let (addr, mut received) = collector(false).await;
    round_trips_unchanged(format!("http://{addr}/v1/traces")).await;
    // The exporter did reach it (and is still waiting for an answer).
    let (kind, _) = tokio::time::timeout(WAIT, received.recv())
        .await
        .expect("a request reached the collector")
        .expect("collector open");
    assert_eq!(kind, "application/x-protobuf");
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// A collector that answers 200 with an endless body, after recording each request head.
async fn flooding_collector() -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
    use tokio::io::AsyncWriteExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let Some((head, _)) = mcpscope_testkit::raw::read_head(&mut sock).await else {
                    return;
                };
                let _ = tx.send(head);
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\r\n")
                    .await;
                let chunk = vec![b'x'; 1 << 20];
                // Up to 2 GiB, or until the exporter stops reading.
                for _ in 0..2048 {
                    if sock.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_flooding_its_answer_is_read_a_few_kib_and_userinfo_is_basic_auth() {
    let (addr, mut heads) = flooding_collector().await;
    let (tx, rx) = mpsc::channel(1024);
    let mut options = mcpscope_telemetry::Options::new(
        format!("http://otel:C0ll-Secret@{addr}/v1/traces")
            .parse()
            .expect("uri"),
    );
    options.interval = Duration::from_millis(50);
    options.timeout = Duration::from_secs(8);
    let telemetry = mcpscope_telemetry::start(rx, options);
    let before = rss_kib();
    let mut peak = before;
    // A finished call, so that a span is sent.
    for event in mcpscope_engine::fixtures::scenario() {
        tx.send(event).await.expect("send");
    }
    let head = tokio::time::timeout(WAIT, heads.recv())
        .await
        .expect("a request reached the collector")
        .expect("open");
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        peak = peak.max(rss_kib());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lower = head.to_ascii_lowercase();
    // base64("otel:C0ll-Secret")
    assert!(
        head.contains("authorization: Basic b3RlbDpDMGxsLVNlY3JldA=="),
        "{head}"
    );
    assert!(lower.contains(&format!("host: {addr}")), "{head}");
    assert!(!head.contains("C0ll-Secret"), "{head}");
    let grown_mib = peak.saturating_sub(before) / 1024;
    eprintln!("RSS before {before} KiB, peak {peak} KiB (+{grown_mib} MiB)");
    assert!(grown_mib < 32, "the answer was buffered: +{grown_mib} MiB");
    let (_, _, sent) = telemetry.stats.snapshot();
    assert!(sent >= 1, "the 200 counts as sent");
    drop(tx);
    telemetry.finish_within(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_in_flight_at_shutdown_is_counted_dropped() {
    let (addr, mut received) = collector(false).await;
    let (tx, rx) = mpsc::channel(1024);
    let mut options =
        mcpscope_telemetry::Options::new(format!("http://{addr}/v1/traces").parse().expect("uri"));
    options.interval = Duration::from_millis(50);
    options.timeout = Duration::from_secs(30);
    let telemetry = mcpscope_telemetry::start(rx, options);
    for event in mcpscope_engine::fixtures::scenario() {
        tx.send(event).await.expect("send");
    }
    tokio::time::timeout(WAIT, received.recv())
        .await
        .expect("a request reached the collector")
        .expect("open");
    let stats = telemetry.stats.clone();
    telemetry.finish_within(Duration::from_millis(300)).await;
    let (_, dropped, sent) = stats.snapshot();
    assert_eq!(sent, 0);
    assert!(
        dropped >= 1,
        "the span in flight is counted dropped: {dropped}"
    );
}

/// A task operation goes out when it ends: while the task works, its `tasks/get` span is held
/// (the exporter ticks every 100 ms); once `tasks/result` answers, the operation's span arrives
/// with the task id and its last reported status, and the create, `tasks/get` and `tasks/result`
/// spans are its children.
#[tokio::test]
async fn a_task_operation_is_sent_as_one_span_over_its_requests_when_it_ends() {
    let server = testserver::start(testserver::Options::default())
        .await
        .expect("test server");
    let (collector, mut received) = collector(true).await;
    let (proxy, live, mut view, telemetry) = subscribed(&server.url(), collector).await;
    let viewed = tokio::spawn(async move { while view.recv().await.is_some() {} });

    let mut client = McpClient::new(&format!("http://{}/mcp", proxy.addr))
        .expect("client")
        .speaking("2025-11-25");
    client.handshake().await.expect("handshake");
    let created = client
        .request(
            "tools/call",
            json!({"name": "slow_task", "arguments": {"ms": 1000}, "task": {"ttl": 30000}}),
        )
        .await
        .expect("create");
    let task_id = created.result().expect("CreateTaskResult")["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let polled = client
        .request("tasks/get", json!({"taskId": task_id}))
        .await
        .expect("tasks/get");
    assert_eq!(polled.result().expect("task")["status"], "working");
    // Several ticks pass while the task works: nothing of the operation goes out.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut spans: Vec<Span> = Vec::new();
    while let Ok((_, batch)) = received.try_recv() {
        spans.extend(batch);
    }
    assert!(
        spans.iter().all(|s| attr(s, "mcp.task.id").is_none()),
        "sent before the operation ended: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let done = client
        .request("tasks/result", json!({"taskId": task_id}))
        .await
        .expect("tasks/result");
    assert_eq!(done.text(), Some("done after 1000 ms"), "{done:?}");

    let deadline = Instant::now() + WAIT;
    while !spans.iter().any(|s| s.name == "tools/call slow_task task") {
        let left = deadline.saturating_duration_since(Instant::now());
        let (_, batch) = tokio::time::timeout(left, received.recv())
            .await
            .expect("the operation's span within the bound")
            .expect("collector open");
        spans.extend(batch);
    }
    telemetry.finish_within(WAIT).await;
    while let Ok((_, batch)) = received.try_recv() {
        spans.extend(batch);
    }
    let op = spans
        .iter()
        .find(|s| s.name == "tools/call slow_task task")
        .expect("operation span");
    assert_eq!(attr(op, "mcp.task.id").as_deref(), Some(task_id.as_str()));
    // The poll said `working`; the tasks/result answer that ended the operation completes it.
    assert_eq!(attr(op, "mcp.task.status").as_deref(), Some("completed"));
    assert_eq!(attr(op, "mcpscope.task.polls").as_deref(), Some("1"));
    assert_eq!(attr(op, "mcpscope.verdict").as_deref(), Some("answered"));
    assert!(op.end_time_unix_nano - op.start_time_unix_nano >= 1_000_000_000 - 50_000_000);
    let mut children: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == op.span_id)
        .collect();
    children.sort_by_key(|s| s.start_time_unix_nano);
    let methods: Vec<String> = children
        .iter()
        .filter_map(|s| attr(s, "mcp.method.name"))
        .collect();
    assert_eq!(methods, ["tools/call", "tasks/get", "tasks/result"]);
    for child in &children {
        assert_eq!(child.trace_id, op.trace_id);
        assert_eq!(
            attr(child, "mcp.task.id").as_deref(),
            Some(task_id.as_str())
        );
    }
    drop(proxy);
    drop(client);
    drop(live);
    let _ = tokio::time::timeout(Duration::from_secs(2), viewed).await;
}
