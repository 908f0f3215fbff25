//! The mock upstream: a shipped recording served to live clients (a raw Rust client and the
//! official Python SDK client) re-enacts the server side: the same results, the same deaths.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use mcpscope_engine::event::EndHow;
use mcpscope_engine::record;
use mcpscope_proxy::mock::{ServeHandle, serve};
use mcpscope_testserver::client::{Answer, McpClient, Outcome};

const BOUND: Duration = Duration::from_secs(30);

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings")
        .join(format!("{name}.jsonl"))
}

async fn mock(name: &str, speed: f64) -> ServeHandle {
    let recording = record::read_file(&shipped(name)).expect("read the shipped recording");
    let listen = "127.0.0.1:0".parse().expect("addr");
    serve(recording, listen, speed).await.expect("serve")
}

fn text(a: &Answer) -> String {
    a.text()
        .map(str::to_string)
        .unwrap_or_else(|| format!("{:?}", a.outcome))
}

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, f).await.expect("bounded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dies_served_the_client_sees_the_reset() {
    bounded(async {
        let mock = mock("server-dies", 1.0).await;
        let mut c = McpClient::new(&mock.url()).expect("client");
        let init = c.handshake().await.expect("initialize");
        assert!(init.result().is_some(), "{init:?}");
        assert!(
            c.session().is_some(),
            "the recorded Mcp-Session-Id is handed out"
        );
        let mut get = c.open_get().await.expect("GET");
        assert_eq!(get.status, 200);
        let tools = c
            .request("tools/list", json!({}))
            .await
            .expect("tools/list");
        assert!(tools.result().is_some(), "{tools:?}");
        let echo = c
            .call("echo", json!({"text": "hello"}), false)
            .await
            .expect("echo");
        assert_eq!(text(&echo), "hello");
        let started = Instant::now();
        let poke = c.call("poke", json!({}), true).await.expect("poke");
        assert!(
            matches!(
                poke.outcome,
                Outcome::Died {
                    how: EndHow::Reset,
                    head: true,
                    ..
                }
            ),
            "the SSE stream opens, then is reset: {poke:?}"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(80),
            "the recorded pacing (~100 ms to the death) is kept: {:?}",
            started.elapsed()
        );
        let get_end = get.ended(Duration::from_secs(5)).await;
        assert_eq!(
            get_end.as_ref().and_then(Answer::died),
            Some(EndHow::Reset),
            "the GET stream dies with the server: {get_end:?}"
        );
        let again = c
            .call("echo", json!({"text": "still there?"}), false)
            .await
            .expect("echo");
        assert_eq!(text(&again), "still there?");
        assert!(mock.mismatches().is_empty(), "{:?}", mock.mismatches());
        assert!(mock.unused().is_empty(), "{:?}", mock.unused());
    })
    .await;
}

/// What the raw client gets from a healthy session: tool results by tool.
async fn healthy_session(url: &str) -> Vec<(String, String)> {
    let mut c = McpClient::new(url).expect("client");
    let init = c.handshake().await.expect("initialize");
    assert!(init.result().is_some(), "{init:?}");
    // No tools/list: the live ids are shifted from the recorded ones, so id substitution shows.
    let mut out = Vec::new();
    let calls = [
        ("echo", json!({"text": "hello"}), false),
        ("slow", json!({"steps": 3, "interval_ms": 100}), true),
        ("poke", json!({}), false),
        ("peek", json!({}), false),
    ];
    for (tool, args, progress) in calls {
        let id = json!(c.next_id());
        let o = c.call(tool, args, progress).await.expect("call");
        if let Outcome::Response(v) = &o.outcome {
            assert_eq!(v.get("id"), Some(&id), "the response carries the live id");
        }
        out.push((tool.to_string(), text(&o)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_served_gives_the_same_tool_results_as_live() {
    bounded(async {
        let server = mcpscope_testserver::start(mcpscope_testserver::Options {
            event_ids: false,
            ..Default::default()
        })
        .await
        .expect("test server");
        let live = healthy_session(&server.url()).await;
        server.shutdown().await;
        let mock = mock("healthy", 0.0).await;
        let replayed = healthy_session(&mock.url()).await;
        assert_eq!(replayed, live);
        // The mock is a repeatable test: a second client run gets the same answers.
        let again = healthy_session(&mock.url()).await;
        assert_eq!(again, live);
        assert!(mock.mismatches().is_empty(), "{:?}", mock.mismatches());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_matches_nothing_gets_a_jsonrpc_error() {
    bounded(async {
        let mock = mock("healthy", 0.0).await;
        let mut c = McpClient::new(&mock.url()).expect("client");
        c.handshake().await.expect("initialize");
        let o = c
            .call("echo", json!({"text": "never recorded"}), false)
            .await
            .expect("echo");
        let Outcome::Response(v) = &o.outcome else {
            panic!("{o:?}")
        };
        assert_eq!(v.pointer("/error/code"), Some(&json!(-32601)));
        assert_eq!(
            v.pointer("/error/message").and_then(Value::as_str),
            Some(
                "mcpscope replay: no recorded exchange matches POST tools/call \
                 {\"name\":\"echo\",\"arguments\":{\"text\":\"never recorded\"}}"
            )
        );
        let mismatches = mock.mismatches();
        assert_eq!(mismatches.len(), 1);
        assert!(
            mismatches[0].ends_with(&format!(" on /mcp session={}", c.session().unwrap_or("-"))),
            "{mismatches:?}"
        );
        // A recorded exchange answers again once every match was used: the second echo "hello"
        // gets the recorded answer too.
        for _ in 0..2 {
            let echo = c
                .call("echo", json!({"text": "hello"}), false)
                .await
                .expect("echo");
            assert_eq!(text(&echo), "hello");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_deaths_are_re_enacted() {
    bounded(async {
        let mock_eof = mock("sse-eof", 0.0).await;
        let mut c = McpClient::new(&mock_eof.url()).expect("client");
        c.handshake().await.expect("initialize");
        let poke = c.call("poke", json!({}), false).await.expect("poke");
        assert_eq!(poke.died(), Some(EndHow::Eof), "{poke:?}");

        let mock_json = mock("json-reset", 0.0).await;
        let mut c = McpClient::new(&mock_json.url()).expect("client");
        c.handshake().await.expect("initialize");
        let echo = c
            .call("echo", json!({"text": "hello"}), false)
            .await
            .expect("echo");
        assert_eq!(text(&echo), "hello");
        let poke = c.call("poke", json!({}), false).await.expect("poke");
        assert!(
            matches!(
                poke.outcome,
                Outcome::Died {
                    how: EndHow::Reset,
                    head: true,
                    ..
                }
            ),
            "head and half a body, then a reset: {poke:?}"
        );

        let mock_503 = mock("status-503", 0.0).await;
        let mut c = McpClient::new(&mock_503.url()).expect("client");
        c.handshake().await.expect("initialize");
        let poke = c.call("poke", json!({}), false).await.expect("poke");
        assert!(matches!(poke.outcome, Outcome::Status(503, _)), "{poke:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_stream_is_cut_and_resumed_as_recorded() {
    bounded(async {
        let mock = mock("resumed", 1.0).await;
        let mut c = McpClient::new(&mock.url()).expect("client");
        c.handshake().await.expect("initialize");
        let id = json!(c.next_id());
        let cut = c
            .call("slow", json!({"steps": 4, "interval_ms": 100}), true)
            .await
            .expect("slow");
        let Outcome::Died {
            how: EndHow::Reset,
            last_event_id: Some(last),
            ..
        } = &cut.outcome
        else {
            panic!("expected a reset after an event id: {cut:?}")
        };
        // The recording resumed from the id its client had seen; the mock matches on it.
        let recording = record::read_file(&shipped("resumed")).expect("read");
        let recorded_last = recording
            .events
            .iter()
            .find_map(|e| match &e.kind {
                mcpscope_engine::event::EventKind::StreamOpened { headers, .. } => {
                    mcpscope_engine::event::header(headers, "last-event-id").map(str::to_string)
                }
                _ => None,
            })
            .expect("a resumption in the recording");
        assert!(last.starts_with(recorded_last.split('-').next().unwrap_or("")));
        let resumed = c.resume(&recorded_last, id.clone()).await.expect("resume");
        let Outcome::Response(v) = &resumed.outcome else {
            panic!("{resumed:?}")
        };
        assert_eq!(v.get("id"), Some(&id));
        assert_eq!(text(&resumed), "slow: done after 4 steps");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_a_recording() {
    bounded(async {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpscope"))
            .args([
                "replay",
                "--serve",
                "--listen",
                "127.0.0.1:0",
                "--speed",
                "0",
            ])
            .arg(shipped("healthy"))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn mcpscope");
        let stderr = child.stderr.take().expect("stderr");
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let line = lines
            .next_line()
            .await
            .expect("read")
            .expect("a first line");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        let mut c = McpClient::new(&url).expect("client");
        let init = c.handshake().await.expect("initialize");
        assert!(init.result().is_some(), "{init:?}");
        let echo = c
            .call("echo", json!({"text": "hello"}), false)
            .await
            .expect("echo");
        assert_eq!(text(&echo), "hello");
        let _ = child.start_kill();
        let _ = child.wait().await;
    })
    .await;
}

// ---- the official Python SDK client, installed by scripts/setup-peers.sh ----

fn venv_python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/setup-peers.sh first (it installs the official Python MCP SDK)",
        py.display()
    );
    py
}

async fn py_poke(python: &Path, url: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/py_client.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(url)
        .args(["--style", "legacy", "--scenario", "poke", "--timeout", "10"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("run py_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "py_client.py failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("one JSON object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
async fn python_sdk_client_sees_the_same_failure_live_and_from_the_mock() {
    let python = venv_python();
    tokio::time::timeout(Duration::from_secs(90), async {
        // Live: the test server behind the proxy, the server dying on the first poke.
        let server = mcpscope_testserver::start(mcpscope_testserver::Options {
            event_ids: false,
            ..Default::default()
        })
        .await
        .expect("test server");
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let proxy = mcpscope_proxy::start(
            mcpscope_proxy::Config {
                listen: "127.0.0.1:0".parse().expect("addr"),
                upstream: server.url().parse().expect("url"),
                insecure: false,
                allow_remote: false,
                ..Default::default()
            },
            mcpscope_session::sink::EventSink::new(tx),
        )
        .await
        .expect("proxy");
        proxy.shared.set_planner(std::sync::Arc::new(DiesOnPoke(
            std::sync::atomic::AtomicBool::new(false),
        )));
        let live = py_poke(&python, &format!("http://{}/mcp", proxy.addr)).await;
        proxy.shutdown();
        server.shutdown().await;

        let mock = mock("server-dies", 1.0).await;
        let replayed = py_poke(&python, &mock.url()).await;
        eprintln!("live: {live}\nreplayed: {replayed}");
        assert_eq!(live["outcome"], "error", "{live}");
        assert_eq!(replayed["outcome"], live["outcome"], "{replayed}");
        assert_eq!(
            replayed["error"], live["error"],
            "the same failure, in the client's words"
        );
    })
    .await
    .expect("bounded");
}

struct DiesOnPoke(std::sync::atomic::AtomicBool);

impl mcpscope_engine::fault::Planner for DiesOnPoke {
    fn plan(
        &self,
        request: &mcpscope_engine::fault::RequestInfo<'_>,
    ) -> Option<mcpscope_engine::fault::Plan> {
        let body = request.body?;
        if body.pointer("/params/name").and_then(Value::as_str) != Some("poke")
            || self.0.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return None;
        }
        Some(mcpscope_engine::fault::Plan {
            fault: mcpscope_engine::fault::Fault::ServerDies {
                down: Duration::from_millis(400),
            },
            trigger: mcpscope_engine::fault::Trigger::After(Duration::from_millis(100)),
            origin: "server-dies after 100ms when tool=poke".into(),
        })
    }
}

/// Whether the server closed the connection (FIN or reset) within `within`.
async fn closed_within(sock: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, sock.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_closes_slow_and_idle_connections_and_caps_how_many_it_holds() {
    use tokio::io::AsyncWriteExt;
    bounded(async {
        let recording = record::read_file(&shipped("server-dies")).expect("recording");
        let timeouts = mcpscope_proxy::Timeouts {
            request_head: Duration::from_millis(300),
            idle: Duration::from_millis(500),
            ..Default::default()
        };
        let listen = "127.0.0.1:0".parse().expect("addr");
        let mock = mcpscope_proxy::mock::serve_with(recording, listen, 0.0, timeouts)
            .await
            .expect("serve");
        // More idle connections than it holds, and a slowloris that never finishes its head.
        let mut idle = Vec::new();
        for _ in 0..mcpscope_proxy::mock::MAX_CONNECTIONS + 72 {
            idle.push(
                tokio::net::TcpStream::connect(mock.addr)
                    .await
                    .expect("connect"),
            );
        }
        let mut slow = tokio::net::TcpStream::connect(mock.addr)
            .await
            .expect("connect");
        slow.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            .await
            .expect("write");
        let started = Instant::now();
        // A legitimate client still gets its answer once the idle ones are cut.
        let mut c = McpClient::new(&mock.url()).expect("client");
        let init = c.handshake().await.expect("initialize");
        assert!(init.result().is_some(), "{init:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            closed_within(&mut slow, Duration::from_secs(3)).await,
            "a request head that never ends is cut"
        );
        for sock in idle.iter_mut().take(8) {
            assert!(
                closed_within(sock, Duration::from_secs(3)).await,
                "an idle connection is closed"
            );
        }
    })
    .await;
}
