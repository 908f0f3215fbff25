//! The built-in test server and the demo client, over real sockets on 127.0.0.1.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use mcpscope_engine::wire::ContentKind;
use mcpscope_testserver::client::{Answer, McpClient, Outcome};
use mcpscope_testserver::democlient::{self, DemoStep};
use mcpscope_testserver::{self as testserver, Options, TestServer};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(20);

async fn server(opts: Options) -> TestServer {
    testserver::start(opts).await.expect("start test server")
}

fn default_opts() -> Options {
    Options::default()
}

fn client(url: &str) -> McpClient {
    McpClient::new(url).expect("client")
}

/// POSTs `message` and reads the answer to the end of its body.
async fn exchange(c: &mut McpClient, message: &Value) -> Answer {
    c.post(message).await.expect("post").answer(None).await
}

/// Sends `method` with `headers` and reads the answer to the end of its body.
async fn send(
    c: &mut McpClient,
    method: Method,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Answer {
    c.send(method, body, headers)
        .await
        .expect("send")
        .answer(None)
        .await
}

fn init_msg(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

fn call(id: i64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
}

/// A client with a session initialized at `version` (`notifications/initialized` sent).
async fn init(url: &str, version: &str) -> McpClient {
    let mut c = client(url).speaking(version);
    let answer = c.initialize().await.expect("initialize");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(c.session().is_some(), "a session id");
    assert_eq!(
        answer.result().expect("a result")["protocolVersion"],
        version
    );
    assert_eq!(c.initialized().await.expect("initialized"), 202);
    c
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
        let mut c = client(&url);

        let answer = exchange(&mut c, &init_msg("2025-11-25")).await;
        assert_eq!(answer.status, 200);
        let sid = c.session().expect("session id").to_string();
        assert!(
            sid.len() >= 16 && sid.chars().all(|c| c.is_ascii_hexdigit()),
            "{sid}"
        );
        // 2025-11-25: a priming event (id, empty data) first.
        assert!(answer.frames[0].frame.id.is_some());
        assert!(answer.frames[0].frame.data.is_empty());
        let msgs = &answer.messages;
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(
            msgs[0]["result"]["serverInfo"]["name"],
            "mcpscope-testserver"
        );

        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let mut fresh = client(&url);
        let answer = exchange(&mut fresh, &list).await;
        assert_eq!(answer.status, 400, "missing session");
        let answer = exchange(&mut client(&url).with_session("nope"), &list).await;
        assert_eq!(answer.status, 404, "unknown session");
        let answer = exchange(&mut c, &list).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.messages[0]["id"], 1);

        // Unsupported version → negotiated down to the latest session revision.
        let answer = exchange(&mut fresh, &init_msg("1999-01-01")).await;
        assert_eq!(
            answer.messages[0]["result"]["protocolVersion"],
            "2025-11-25"
        );

        // Unknown method; notification → 202; elsewhere → 404.
        let nope = json!({"jsonrpc": "2.0", "id": 2, "method": "nope/nope"});
        let answer = exchange(&mut c, &nope).await;
        assert_eq!(answer.messages[0]["error"]["code"], -32601);
        let mut elsewhere = client(&format!("http://{}/other", srv.addr));
        assert_eq!(exchange(&mut elsewhere, &list).await.status, 404);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn bad_json_is_a_parse_error() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let answer = client(&srv.url())
            .send_bytes(Method::POST, Some(Bytes::from_static(b"{not json")), &[])
            .await
            .expect("send")
            .answer(None)
            .await;
        assert_eq!(answer.status, 400);
        assert_eq!(answer.messages[0]["error"]["code"], -32700);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn tools_list_has_annotations() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = init(&srv.url(), "2025-06-18").await;
        let answer = c.request("tools/list", json!({})).await.expect("list");
        let tools = answer.result().expect("result")["tools"]
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
        let fail = c.call("fail", json!({}), false).await.expect("fail");
        assert_eq!(fail.result().expect("result")["isError"], true);
        let peek = c.call("peek", json!({}), false).await.expect("peek");
        assert_eq!(peek.text(), Some("0"));
        let t = Instant::now();
        let poke = c.call("poke", json!({}), false).await.expect("poke");
        assert_eq!(poke.text(), Some("1"));
        assert!(t.elapsed() >= Duration::from_millis(250));
        let peek = c.call("peek", json!({}), false).await.expect("peek");
        assert_eq!(peek.text(), Some("1"));
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn slow_streams_progress_events_as_they_happen() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = init(&srv.url(), "2025-11-25").await;
        let mut msg = call(7, "slow", json!({"steps": 4, "interval_ms": 150}));
        msg["params"]["_meta"] = json!({"progressToken": "tok"});
        let answer = exchange(&mut c, &msg).await;
        assert_eq!(answer.status, 200);
        let events = &answer.frames;
        let data: Vec<_> = events.iter().filter(|s| !s.frame.data.is_empty()).collect();
        assert_eq!(data.len(), 5, "{events:?}");
        let mut ids = std::collections::HashSet::new();
        for s in events {
            let id = s.frame.id.clone().expect("every event has an id");
            assert!(ids.insert(id), "ids are unique");
        }
        for (i, s) in data[..4].iter().enumerate() {
            let v: Value = serde_json::from_str(&s.frame.data).expect("json");
            assert_eq!(v["method"], "notifications/progress");
            assert_eq!(v["params"]["progressToken"], "tok");
            assert_eq!(v["params"]["progress"], i as u64 + 1);
        }
        let last: Value = serde_json::from_str(&data[4].frame.data).expect("json");
        assert_eq!(last["id"], 7);
        // Each progress event arrived on its own, not all at the end.
        for w in data[..4].windows(2) {
            let gap = w[1].at.duration_since(w[0].at);
            assert!(
                gap >= Duration::from_millis(80),
                "events were buffered: gap {gap:?}"
            );
        }

        // Without a progress token: log messages instead.
        let answer = exchange(
            &mut c,
            &call(8, "slow", json!({"steps": 2, "interval_ms": 10})),
        )
        .await;
        assert_eq!(answer.messages.len(), 3);
        assert_eq!(answer.messages[0]["method"], "notifications/message");
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
        let answer = exchange(&mut client(&srv.url()), &init_msg("2025-11-25")).await;
        assert_eq!(answer.frames.len(), 1);
        assert!(answer.frames[0].frame.id.is_none());
        srv.shutdown().await;

        let srv = server(Options {
            retry_ms: Some(1234),
            ..default_opts()
        })
        .await;
        let answer = exchange(&mut client(&srv.url()), &init_msg("2025-11-25")).await;
        assert_eq!(answer.frames[0].frame.retry, Some(1234));
        assert!(answer.frames[0].frame.id.is_some());
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
        let mut c = init(&srv.url(), "2025-06-18").await;
        let echo = c
            .call("echo", json!({"text": "hi"}), false)
            .await
            .expect("echo");
        assert_eq!(echo.status, 200);
        assert_eq!(echo.content(), ContentKind::Json);
        assert_eq!(echo.text(), Some("hi"));
        let id = c.next_id();
        let slow = c
            .call("slow", json!({"steps": 2, "interval_ms": 10}), true)
            .await
            .expect("slow");
        let Outcome::Response(v) = &slow.outcome else {
            panic!("{slow:?}")
        };
        assert_eq!(v["id"], id);
        assert!(text(v).contains("done"));
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
        let mut c = init(&url, "2025-11-25").await;
        let sid = c.session().expect("session").to_string();
        assert_eq!(c.delete().await.expect("DELETE"), 200);
        let mut gone = client(&url).with_session(&sid);
        let echo = gone
            .call("echo", json!({"text": "x"}), false)
            .await
            .expect("echo");
        assert_eq!(echo.status, 404);
        assert_eq!(send(&mut gone, Method::GET, &[], None).await.status, 404);
        assert_eq!(gone.delete().await.expect("DELETE"), 404);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn sessionless_2026_07_28() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = client(&srv.url());
        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "server/discover"),
        ];
        let discover = modern(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}));
        let answer = send(&mut c, Method::POST, &h, Some(&discover)).await;
        assert_eq!(answer.status, 200);
        assert!(answer.header("mcp-session-id").is_none());
        let r = &answer.messages[0]["result"];
        assert_eq!(r["serverInfo"]["name"], "mcpscope-testserver");
        assert!(r["capabilities"]["tools"].is_object());
        assert!(
            r["supportedVersions"]
                .as_array()
                .expect("versions")
                .iter()
                .any(|v| v == "2026-07-28")
        );
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], 0);
        assert_eq!(r["cacheScope"], "private");

        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let echo = modern(call(2, "echo", json!({"text": "no session"})));
        let answer = send(&mut c, Method::POST, &h, Some(&echo)).await;
        assert_eq!(answer.status, 200);
        assert_eq!(text(&answer.messages[0]), "no session");
        assert_eq!(answer.messages[0]["result"]["resultType"], "complete");

        // Without the header and without a session: 400 (a probing client falls back to initialize).
        assert_eq!(exchange(&mut c, &discover).await.status, 400);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// `msg` with the 2026-07-28 `_meta` envelope.
fn modern(mut msg: Value) -> Value {
    msg["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}
    });
    msg
}

#[tokio::test]
async fn headers_must_agree_with_the_body_2026_07_28() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = client(&srv.url());
        let echo = modern(call(3, "echo", json!({"text": "x"})));
        for (h, code) in [
            // Mcp-Name names another tool.
            (
                [
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "poke"),
                ],
                -32020,
            ),
            // Mcp-Method names another method.
            (
                [
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", "tools/list"),
                    ("mcp-name", "echo"),
                ],
                -32020,
            ),
        ] {
            let answer = send(&mut c, Method::POST, &h, Some(&echo)).await;
            assert_eq!(answer.status, 400, "{h:?}");
            assert_eq!(answer.messages[0]["error"]["code"], code, "{h:?}");
        }
        // No envelope: invalid params.
        let bare = call(4, "echo", json!({"text": "x"}));
        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let answer = send(&mut c, Method::POST, &h, Some(&bare)).await;
        assert_eq!(answer.status, 400);
        assert_eq!(answer.messages[0]["error"]["code"], -32602);
        // A revision we do not speak: -32022 naming the ones we do.
        let mut future = echo.clone();
        future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
        let h = [
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let answer = send(&mut c, Method::POST, &h, Some(&future)).await;
        assert_eq!(answer.status, 400);
        assert_eq!(answer.messages[0]["error"]["code"], -32022);
        assert!(answer.messages[0]["error"]["data"]["supported"].is_array());
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn input_required_rounds_2026_07_28() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = client(&srv.url());
        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "test_elicitation"),
        ];
        let first = modern(call(5, "test_elicitation", json!({"message": "name?"})));
        let answer = send(&mut c, Method::POST, &h, Some(&first)).await;
        let r = &answer.messages[0]["result"];
        assert_eq!(r["resultType"], "input_required", "{r}");
        let asked = &r["inputRequests"]["elicitation"];
        assert_eq!(asked["method"], "elicitation/create");
        assert_eq!(asked["params"]["message"], "name?");
        let mut retry = first.clone();
        retry["id"] = json!(6);
        retry["params"]["inputResponses"] =
            json!({"elicitation": {"action": "accept", "content": {"response": "Ada"}}});
        let answer = send(&mut c, Method::POST, &h, Some(&retry)).await;
        let r = &answer.messages[0]["result"];
        assert_eq!(r["resultType"], "complete", "{r}");
        assert!(text(&answer.messages[0]).contains("Ada"), "{r}");
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn dns_rebinding_is_refused() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = client(&srv.url());
        let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let h = [
            ("host", "evil.example.com"),
            ("origin", "http://evil.example.com"),
        ];
        assert_eq!(
            send(&mut c, Method::POST, &h, Some(&discover)).await.status,
            403
        );
        let h = [("origin", "http://evil.example.com")];
        assert_eq!(
            send(&mut c, Method::POST, &h, Some(&discover)).await.status,
            403
        );
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn resumption_replays_missed_events_and_the_result() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = init(&srv.url(), "2025-11-25").await;
        let mut msg = call(9, "slow", json!({"steps": 5, "interval_ms": 150}));
        msg["params"]["_meta"] = json!({"progressToken": "r"});
        let mut cut = c.post(&msg).await.expect("post");
        let mut seen = 0;
        cut.until(|f| {
            if !f.data.is_empty() {
                seen += 1;
            }
            seen == 2
        })
        .await;
        let last_id = cut
            .frames
            .last()
            .and_then(|s| s.frame.id.clone())
            .expect("an id");
        drop(cut); // the client loses the stream after two progress events
        tokio::time::sleep(Duration::from_millis(400)).await;

        let resumed = c.resume(&last_id, json!(9)).await.expect("resume");
        assert_eq!(resumed.status, 200);
        let msgs = &resumed.messages;
        let progress: Vec<u64> = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"]["progress"].as_u64().expect("n"))
            .collect();
        assert_eq!(progress, vec![3, 4, 5]);
        assert_eq!(msgs.last().expect("result")["id"], 9);
        assert!(text(msgs.last().expect("result")).contains("done"));

        // An id of an unknown stream is refused.
        let refused = c.resume("s999-1", json!(9)).await.expect("resume");
        assert_eq!(refused.status, 400);
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
        let mut c = init(&url, "2025-11-25").await;
        let mut get = c.get(None).await.expect("GET");
        assert_eq!(get.status, 200);
        assert!(
            get.header("content-type")
                .unwrap_or("")
                .starts_with("text/event-stream")
        );
        let poke = c.call("poke", json!({}), false).await.expect("poke");
        assert_eq!(poke.text(), Some("1"));
        assert!(get.until(|f| f.data.contains("counter is now")).await);
        assert!(
            get.messages
                .iter()
                .any(|m| m["method"] == "notifications/message")
        );
        // 2026-07-28 has no GET stream.
        let h = [("mcp-protocol-version", "2026-07-28")];
        assert_eq!(
            send(&mut client(&url), Method::GET, &h, None).await.status,
            405
        );
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
            let mut c = init(&url, "2025-03-26").await;
            let batch = json!([
                call(1, "echo", json!({"text": "a"})),
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 0, "progress": 1}},
                call(2, "slow", json!({"steps": 1, "interval_ms": 10})),
                call(3, "peek", json!({})),
            ]);
            let answer = exchange(&mut c, &batch).await;
            assert_eq!(answer.status, 200);
            let msgs = &answer.messages;
            let mut ids: Vec<i64> = msgs.iter().filter_map(|m| m["id"].as_i64()).collect();
            ids.sort();
            assert_eq!(ids, vec![1, 2, 3], "{msgs:?}");

            // Only notifications → 202.
            let notes = json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]);
            assert_eq!(exchange(&mut c, &notes).await.status, 202);

            // No batches after 2025-03-26.
            let mut later = init(&url, "2025-06-18").await;
            assert_eq!(exchange(&mut later, &batch).await.status, 400);
            srv.shutdown().await;
        }
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn a_cancellation_is_a_notification_the_server_accepts() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let mut c = init(&srv.url(), "2025-11-25").await;
        let status = c
            .cancel(json!(1), "no longer needed")
            .await
            .expect("cancel");
        assert_eq!(status, 202);
        srv.shutdown().await;
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

#[tokio::test]
async fn get_refusals_answer_gets_or_resumptions_with_their_status() {
    tokio::time::timeout(BOUND, async {
        let every_get = testserver::GetRefusal {
            every_get: Some(405),
            resumption: None,
        };
        let srv = testserver::start_refusing(default_opts(), every_get)
            .await
            .expect("start");
        let mut c = init(&srv.url(), "2025-11-25").await;
        assert_eq!(send(&mut c, Method::GET, &[], None).await.status, 405);
        assert_eq!(
            c.resume("s1-1", json!(1)).await.expect("resume").status,
            405
        );
        srv.shutdown().await;

        let resumption = testserver::GetRefusal {
            every_get: None,
            resumption: Some(404),
        };
        let srv = testserver::start_refusing(default_opts(), resumption)
            .await
            .expect("start");
        let mut c = init(&srv.url(), "2025-11-25").await;
        assert_eq!(
            c.resume("s1-1", json!(1)).await.expect("resume").status,
            404
        );
        let get = c
            .send(Method::GET, None, &[])
            .await
            .expect("a plain GET is served");
        assert_eq!(get.status, 200);
        drop(get);
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// 2025-11-25 tasks: `slow_task` called as a task answers with a `CreateTaskResult` at once;
/// `tasks/get` reads it working, `tasks/result` waits for the work and brings the tool's result
/// tied to the task, `tasks/list` lists it; a second task is cancelled (its `tasks/result` is an
/// error, a second cancel is refused), each change is announced on the GET stream, and an
/// unknown task is invalid params. Before 2025-11-25 there is no `tasks` capability and the
/// task field is ignored.
#[tokio::test]
async fn slow_task_is_a_task_with_get_result_list_cancel_and_status_notifications() {
    tokio::time::timeout(BOUND, async {
        let srv = server(default_opts()).await;
        let url = srv.url();
        let mut c = client(&url).speaking("2025-11-25");
        let init = c.initialize().await.expect("initialize");
        let caps = &init.result().expect("result")["capabilities"]["tasks"];
        assert!(caps["requests"]["tools"]["call"].is_object(), "{caps}");
        assert!(caps["list"].is_object() && caps["cancel"].is_object(), "{caps}");
        assert_eq!(c.initialized().await.expect("initialized"), 202);
        let mut get = c.open_get().await.expect("GET stream");
        let tools = exchange(&mut c, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
        let listed = tools.messages[0]["result"]["tools"].as_array().expect("tools").clone();
        let slow_task = listed.iter().find(|t| t["name"] == "slow_task").expect("slow_task");
        assert_eq!(slow_task["execution"]["taskSupport"], "optional");

        let started = Instant::now();
        let create = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "slow_task", "arguments": {"ms": 600}, "task": {"ttl": 30000}}});
        let created = exchange(&mut c, &create).await;
        assert!(started.elapsed() < Duration::from_millis(500), "answered at once");
        let task = &created.messages[0]["result"]["task"];
        assert_eq!(task["status"], "working", "{created:?}");
        assert_eq!(task["ttl"], 30000);
        assert!(task["createdAt"].is_string() && task["pollInterval"].is_u64(), "{task}");
        let id = task["taskId"].as_str().expect("taskId").to_string();

        let about = |n: i64, method: &str, id: &str| {
            json!({"jsonrpc": "2.0", "id": n, "method": method, "params": {"taskId": id}})
        };
        let polled = exchange(&mut c, &about(3, "tasks/get", &id)).await;
        assert_eq!(polled.messages[0]["result"]["status"], "working", "{polled:?}");
        let done = exchange(&mut c, &about(4, "tasks/result", &id)).await;
        assert!(started.elapsed() >= Duration::from_millis(600), "tasks/result waited");
        let result = &done.messages[0]["result"];
        assert_eq!(text(&done.messages[0]), "done after 600 ms", "{done:?}");
        assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
        let list = exchange(&mut c, &json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/list"})).await;
        let tasks = list.messages[0]["result"]["tasks"].as_array().expect("tasks").clone();
        assert!(tasks.iter().any(|t| t["taskId"] == id.as_str() && t["status"] == "completed"), "{tasks:?}");

        let mut second = create.clone();
        second["id"] = json!(6);
        second["params"]["arguments"]["ms"] = json!(10_000);
        let created = exchange(&mut c, &second).await;
        let other = created.messages[0]["result"]["task"]["taskId"].as_str().expect("id").to_string();
        let cancelled = exchange(&mut c, &about(7, "tasks/cancel", &other)).await;
        assert_eq!(cancelled.messages[0]["result"]["status"], "cancelled", "{cancelled:?}");
        let again = exchange(&mut c, &about(8, "tasks/cancel", &other)).await;
        assert_eq!(again.messages[0]["error"]["code"], -32602, "{again:?}");
        let lost = exchange(&mut c, &about(9, "tasks/result", &other)).await;
        assert!(lost.messages[0]["error"].is_object(), "{lost:?}");
        let unknown = exchange(&mut c, &about(10, "tasks/get", "no-such-task")).await;
        assert_eq!(unknown.messages[0]["error"]["code"], -32602, "{unknown:?}");

        assert_eq!(c.delete().await.expect("delete"), 200);
        let notes = get.ended(Duration::from_secs(5)).await.expect("GET ended");
        let statuses: Vec<(String, String)> = notes
            .messages
            .iter()
            .filter(|m| m["method"] == "notifications/tasks/status")
            .map(|m| (m["params"]["taskId"].as_str().unwrap_or("").to_string(),
                      m["params"]["status"].as_str().unwrap_or("").to_string()))
            .collect();
        assert_eq!(statuses, [(id.clone(), "completed".to_string()), (other, "cancelled".to_string())]);

        // Before tasks: no capability, and the task field is ignored (the call just runs).
        let mut old = client(&url).speaking("2025-06-18");
        let init = old.initialize().await.expect("initialize");
        assert!(init.result().expect("result")["capabilities"].get("tasks").is_none());
        let mut plain = create.clone();
        plain["params"]["arguments"]["ms"] = json!(50);
        let answered = exchange(&mut old, &plain).await;
        assert_eq!(text(&answered.messages[0]), "done after 50 ms", "{answered:?}");
        srv.shutdown().await;
    })
    .await
    .expect("bounded");
}
