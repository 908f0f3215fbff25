//! The built-in test server and the demo client, over real sockets on 127.0.0.1.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcpscope_engine::wire::sse::{SseFrame, SseParser};
use mcpscope_testkit::democlient::{self, DemoStep};
use mcpscope_testkit::testserver::{self, Options, TestServer};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(20);

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn server(opts: Options) -> TestServer {
    testserver::start(opts).await.expect("start test server")
}

fn default_opts() -> Options {
    Options::default()
}

async fn send(
    c: &HttpClient,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> http::Response<Incoming> {
    let mut req = Request::builder()
        .method(method)
        .uri(url)
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let bytes = match body {
        Some(v) => {
            req = req.header("content-type", "application/json");
            Bytes::from(v.to_string())
        }
        None => Bytes::new(),
    };
    c.request(req.body(Full::new(bytes)).expect("request"))
        .await
        .expect("send")
}

async fn post(
    c: &HttpClient,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> http::Response<Incoming> {
    send(c, Method::POST, url, headers, Some(body)).await
}

fn content_type(h: &HeaderMap) -> String {
    h.get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

async fn body_json(resp: http::Response<Incoming>) -> Value {
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("json body")
}

/// Reads SSE events with their arrival times, until the stream ends or `stop` says so.
async fn read_events(
    body: &mut Incoming,
    mut stop: impl FnMut(&SseFrame) -> bool,
) -> Vec<(SseFrame, Instant)> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("body frame");
        if let Some(data) = frame.data_ref() {
            parser.feed(data, &mut frames);
            let now = Instant::now();
            for f in frames.drain(..) {
                let done = stop(&f);
                out.push((f, now));
                if done {
                    return out;
                }
            }
        }
    }
    out
}

fn messages(events: &[(SseFrame, Instant)]) -> Vec<Value> {
    events
        .iter()
        .filter(|(f, _)| !f.data.trim().is_empty())
        .map(|(f, _)| serde_json::from_str(&f.data).expect("event data is JSON"))
        .collect()
}

async fn sse_messages(resp: http::Response<Incoming>) -> Vec<Value> {
    assert!(content_type(resp.headers()).starts_with("text/event-stream"));
    let mut body = resp.into_body();
    messages(&read_events(&mut body, |_| false).await)
}

fn init_msg(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

fn call(id: i64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
}

/// Initializes a session; returns its id.
async fn init(c: &HttpClient, url: &str, version: &str) -> String {
    let resp = post(c, url, &[], &init_msg(version)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("session id")
        .to_string();
    let ct = content_type(resp.headers());
    let msgs = if ct.starts_with("text/event-stream") {
        sse_messages(resp).await
    } else {
        vec![body_json(resp).await]
    };
    assert_eq!(
        msgs.last().expect("a response")["result"]["protocolVersion"],
        version
    );
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = post(
        c,
        url,
        &[("mcp-session-id", &sid), ("mcp-protocol-version", version)],
        &note,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    sid
}

/// Result text of a tools/call response.
fn text(msg: &Value) -> &str {
    msg["result"]["content"][0]["text"].as_str().unwrap_or("")
}

#[tokio::test]
async fn initialize_assigns_and_requires_session() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();

        let resp = post(&c, &url, &[], &init_msg("2025-11-25")).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let sid = resp.headers()["mcp-session-id"]
            .to_str()
            .expect("ascii")
            .to_string();
        assert!(
            sid.len() >= 16 && sid.chars().all(|c| c.is_ascii_hexdigit()),
            "{sid}"
        );
        let mut body = resp.into_body();
        let events = read_events(&mut body, |_| false).await;
        // 2025-11-25: a priming event (id, empty data) first.
        assert!(events[0].0.id.is_some());
        assert!(events[0].0.data.is_empty());
        let msgs = messages(&events);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(
            msgs[0]["result"]["serverInfo"]["name"],
            "mcpscope-testserver"
        );

        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let resp = post(&c, &url, &[], &list).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "missing session");
        let resp = post(&c, &url, &[("mcp-session-id", "nope")], &list).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "unknown session");
        let resp = post(&c, &url, &[("mcp-session-id", &sid)], &list).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let msgs = sse_messages(resp).await;
        assert_eq!(msgs[0]["id"], 1);

        // Unsupported version → negotiated down to the latest session revision.
        let resp = post(&c, &url, &[], &init_msg("1999-01-01")).await;
        let msgs = sse_messages(resp).await;
        assert_eq!(msgs[0]["result"]["protocolVersion"], "2025-11-25");

        // Unknown method; notification → 202; elsewhere → 404.
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &json!({"jsonrpc": "2.0", "id": 2, "method": "nope/nope"}),
        )
        .await;
        assert_eq!(sse_messages(resp).await[0]["error"]["code"], -32601);
        let resp = post(&c, &format!("http://{}/other", srv.addr), &[], &list).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn bad_json_is_a_parse_error() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let c = client();
        let req = Request::post(srv.url())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(b"{not json")))
            .expect("request");
        let resp = c.request(req).await.expect("send");
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let v = body_json(resp).await;
        assert_eq!(v["error"]["code"], -32700);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn tools_list_has_annotations() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();
        let sid = init(&c, &url, "2025-06-18").await;
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
        let msgs = sse_messages(resp).await;
        let tools = msgs[0]["result"]["tools"]
            .as_array()
            .expect("tools")
            .clone();
        let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).cloned().expect(n);
        for n in ["echo", "slow", "peek", "poke", "fail"] {
            assert!(by_name(n)["inputSchema"].is_object());
        }
        assert_eq!(by_name("peek")["annotations"]["readOnlyHint"], true);
        let poke = by_name("poke");
        assert!(poke["annotations"]["readOnlyHint"].is_null());
        assert!(poke["annotations"]["idempotentHint"].is_null());

        // fail → isError; peek/poke move the counter.
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(2, "fail", json!({})),
        )
        .await;
        assert_eq!(sse_messages(resp).await[0]["result"]["isError"], true);
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(3, "peek", json!({})),
        )
        .await;
        assert_eq!(text(&sse_messages(resp).await[0]), "0");
        let t = Instant::now();
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(4, "poke", json!({})),
        )
        .await;
        assert_eq!(text(&sse_messages(resp).await[0]), "1");
        assert!(t.elapsed() >= Duration::from_millis(250));
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(5, "peek", json!({})),
        )
        .await;
        assert_eq!(text(&sse_messages(resp).await[0]), "1");
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn slow_streams_progress_events_as_they_happen() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();
        let sid = init(&c, &url, "2025-11-25").await;
        let mut msg = call(7, "slow", json!({"steps": 4, "interval_ms": 150}));
        msg["params"]["_meta"] = json!({"progressToken": "tok"});
        let resp = post(
            &c,
            &url,
            &[
                ("mcp-session-id", &sid),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            &msg,
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let mut body = resp.into_body();
        let events = read_events(&mut body, |_| false).await;
        let data: Vec<_> = events.iter().filter(|(f, _)| !f.data.is_empty()).collect();
        assert_eq!(data.len(), 5, "{events:?}");
        let mut ids = std::collections::HashSet::new();
        for (f, _) in &events {
            let id = f.id.clone().expect("every event has an id");
            assert!(ids.insert(id), "ids are unique");
        }
        for (i, (f, _)) in data[..4].iter().enumerate() {
            let v: Value = serde_json::from_str(&f.data).expect("json");
            assert_eq!(v["method"], "notifications/progress");
            assert_eq!(v["params"]["progressToken"], "tok");
            assert_eq!(v["params"]["progress"], i as u64 + 1);
        }
        let last: Value = serde_json::from_str(&data[4].0.data).expect("json");
        assert_eq!(last["id"], 7);
        // Each progress event arrived on its own, not all at the end.
        for w in data[..4].windows(2) {
            let gap = w[1].1.duration_since(w[0].1);
            assert!(
                gap >= Duration::from_millis(80),
                "events were buffered: gap {gap:?}"
            );
        }

        // Without a progress token: log messages instead.
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(8, "slow", json!({"steps": 2, "interval_ms": 10})),
        )
        .await;
        let msgs = sse_messages(resp).await;
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0]["method"], "notifications/message");
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn no_event_ids_and_retry_options() {
    tokio::time::timeout(BOUND, async {
        let srv = server(Options {
            event_ids: false,
            ..default_opts()
        })
        .await;
        let c = client();
        let resp = post(&c, &srv.url(), &[], &init_msg("2025-11-25")).await;
        let mut body = resp.into_body();
        let events = read_events(&mut body, |_| false).await;
        assert_eq!(events.len(), 1);
        assert!(events[0].0.id.is_none());
        srv.shutdown().await;

        let srv = server(Options {
            retry_ms: Some(1234),
            ..default_opts()
        })
        .await;
        let resp = post(&c, &srv.url(), &[], &init_msg("2025-11-25")).await;
        let mut body = resp.into_body();
        let events = read_events(&mut body, |_| false).await;
        assert_eq!(events[0].0.retry, Some(1234));
        assert!(events[0].0.id.is_some());
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn json_mode_answers_application_json() {
    tokio::time::timeout(BOUND, async {
        let srv = server(Options {
            json_responses: true,
            ..default_opts()
        })
        .await;
        let url = srv.url();
        let c = client();
        let sid = init(&c, &url, "2025-06-18").await;
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(1, "echo", json!({"text": "hi"})),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(content_type(resp.headers()).starts_with("application/json"));
        let v = body_json(resp).await;
        assert_eq!(text(&v), "hi");
        let mut msg = call(2, "slow", json!({"steps": 2, "interval_ms": 10}));
        msg["params"]["_meta"] = json!({"progressToken": 1});
        let v = body_json(post(&c, &url, &[("mcp-session-id", &sid)], &msg).await).await;
        assert_eq!(v["id"], 2);
        assert!(text(&v).contains("done"));
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn delete_ends_the_session() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();
        let sid = init(&c, &url, "2025-11-25").await;
        let resp = send(&c, Method::DELETE, &url, &[("mcp-session-id", &sid)], None).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(1, "echo", json!({"text": "x"})),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let resp = send(&c, Method::GET, &url, &[("mcp-session-id", &sid)], None).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let resp = send(&c, Method::DELETE, &url, &[("mcp-session-id", &sid)], None).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn sessionless_2026_07_28() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();
        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "server/discover"),
        ];
        let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let resp = post(&c, &url, &h, &discover).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(resp.headers().get("mcp-session-id").is_none());
        let msgs = sse_messages(resp).await;
        let r = &msgs[0]["result"];
        assert_eq!(r["serverInfo"]["name"], "mcpscope-testserver");
        assert!(r["capabilities"]["tools"].is_object());
        assert!(
            r["supportedVersions"]
                .as_array()
                .expect("versions")
                .iter()
                .any(|v| v == "2026-07-28")
        );

        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let resp = post(
            &c,
            &url,
            &h,
            &call(2, "echo", json!({"text": "no session"})),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(text(&sse_messages(resp).await[0]), "no session");

        // Without the header and without a session: 400 (a probing client falls back to initialize).
        let resp = post(&c, &url, &[], &discover).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn resumption_replays_missed_events_and_the_result() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();
        let sid = init(&c, &url, "2025-11-25").await;
        let mut msg = call(9, "slow", json!({"steps": 5, "interval_ms": 150}));
        msg["params"]["_meta"] = json!({"progressToken": "r"});
        let resp = post(&c, &url, &[("mcp-session-id", &sid)], &msg).await;
        let mut body = resp.into_body();
        let mut seen = 0;
        let first = read_events(&mut body, |f| {
            if !f.data.is_empty() {
                seen += 1;
            }
            seen == 2
        })
        .await;
        let last_id = first.last().and_then(|(f, _)| f.id.clone()).expect("an id");
        drop(body); // the client loses the stream after two progress events
        tokio::time::sleep(Duration::from_millis(400)).await;

        let resp = send(
            &c,
            Method::GET,
            &url,
            &[("mcp-session-id", &sid), ("last-event-id", &last_id)],
            None,
        )
        .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let msgs = sse_messages(resp).await;
        let progress: Vec<u64> = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"]["progress"].as_u64().expect("n"))
            .collect();
        assert_eq!(progress, vec![3, 4, 5]);
        assert_eq!(msgs.last().expect("result")["id"], 9);
        assert!(text(msgs.last().expect("result")).contains("done"));

        // An id of an unknown stream is refused.
        let resp = send(
            &c,
            Method::GET,
            &url,
            &[("mcp-session-id", &sid), ("last-event-id", "s999-1")],
            None,
        )
        .await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn get_stream_carries_server_notifications() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let c = client();
        let sid = init(&c, &url, "2025-11-25").await;
        let resp = send(&c, Method::GET, &url, &[("mcp-session-id", &sid)], None).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(content_type(resp.headers()).starts_with("text/event-stream"));
        let mut get_body = resp.into_body();
        let resp = post(
            &c,
            &url,
            &[("mcp-session-id", &sid)],
            &call(1, "poke", json!({})),
        )
        .await;
        assert_eq!(text(&sse_messages(resp).await[0]), "1");
        let events = read_events(&mut get_body, |f| f.data.contains("counter is now")).await;
        assert!(
            messages(&events)
                .iter()
                .any(|m| m["method"] == "notifications/message")
        );
        // 2026-07-28 has no GET stream.
        let resp = send(
            &c,
            Method::GET,
            &url,
            &[("mcp-protocol-version", "2026-07-28")],
            None,
        )
        .await;
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn batch_2025_03_26() {
    tokio::time::timeout(BOUND, async {
        for json_responses in [false, true] {
            let srv = server(Options { json_responses, ..default_opts() }).await;
            let url = srv.url();
            let c = client();
            let sid = init(&c, &url, "2025-03-26").await;
            let batch = json!([
                call(1, "echo", json!({"text": "a"})),
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 0, "progress": 1}},
                call(2, "slow", json!({"steps": 1, "interval_ms": 10})),
                call(3, "peek", json!({})),
            ]);
            let resp = post(&c, &url, &[("mcp-session-id", &sid)], &batch).await;
            assert_eq!(resp.status(), StatusCode::OK);
            let msgs = if json_responses {
                body_json(resp).await.as_array().expect("array").clone()
            } else {
                sse_messages(resp).await
            };
            let mut ids: Vec<i64> = msgs.iter().filter_map(|m| m["id"].as_i64()).collect();
            ids.sort();
            assert_eq!(ids, vec![1, 2, 3], "{msgs:?}");

            // Only notifications → 202.
            let notes = json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]);
            let resp = post(&c, &url, &[("mcp-session-id", &sid)], &notes).await;
            assert_eq!(resp.status(), StatusCode::ACCEPTED);

            // No batches after 2025-03-26.
            let sid2 = init(&c, &url, "2025-06-18").await;
            let resp = post(&c, &url, &[("mcp-session-id", &sid2)], &batch).await;
            assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
            srv.shutdown().await;
        }
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn demo_client_completes_every_step() {
    tokio::time::timeout(Duration::from_secs(40), async {
        let srv = server(default_opts()).await;
        let mut script = democlient::default_script();
        for step in &mut script {
            if let DemoStep::Wait(d) = step {
                *d = Duration::from_millis(100);
            }
        }
        let outcomes = democlient::run_script(&srv.url(), &script)
            .await
            .expect("demo");
        assert_eq!(outcomes.len(), script.len());
        for o in &outcomes {
            assert!(o.ok, "{o:?}");
        }
        let poke = outcomes
            .iter()
            .find(|o| o.step == "tools/call poke")
            .expect("poke");
        assert_eq!(poke.detail, "1");
        let echo = outcomes
            .iter()
            .rfind(|o| o.step == "tools/call echo")
            .expect("echo");
        assert_eq!(echo.detail, "still there?");
        democlient::run_demo(&srv.url()).await.expect("run_demo");
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn demo_client_carries_on_after_a_dead_stream() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let script = vec![
            DemoStep::Initialize,
            DemoStep::Initialized,
            DemoStep::call("nope", json!({}), false),
            DemoStep::call("echo", json!({"text": "after"}), false),
            DemoStep::EndSession,
            DemoStep::call("echo", json!({"text": "gone"}), false),
        ];
        let outcomes = democlient::run_script(&srv.url(), &script)
            .await
            .expect("demo");
        let ok: Vec<bool> = outcomes.iter().map(|o| o.ok).collect();
        assert_eq!(
            ok,
            vec![true, true, false, true, true, false],
            "{outcomes:?}"
        );
        srv.shutdown().await;

        // initialize failing is an error.
        assert!(
            democlient::run_script("http://127.0.0.1:1/mcp", &[DemoStep::Initialize])
                .await
                .is_err()
        );
    })
    .await
    .expect("bounded");
}
