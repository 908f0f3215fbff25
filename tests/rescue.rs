//! `--rescue` with real clients that hang when a call's stream dies without an event id (the
//! TypeScript SDK and the Python SDK 1.x): with it the call fails within a second with the
//! rescue's error; without it the same client still waits (so the rescue is what ended it).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::peers::{Proxy, root, ts};
use mcpscope_engine::redact::Redactor;
use mcpscope_testkit::live::Proxied;
use mcpscope_testserver as testserver;

/// The fault: the first tools/call's stream is reset after its first event (no event ids).
const FAULT: &str = "reset after 1 events when method=tools/call";

/// How long a client that hangs is watched after the death before it is killed.
const HANG_WATCH: Duration = Duration::from_secs(4);

/// A built-in test server without event ids, on its own runtime.
struct Upstream {
    server: Option<testserver::TestServer>,
    runtime: tokio::runtime::Runtime,
}

impl Upstream {
    fn start() -> Upstream {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let server = runtime
            .block_on(testserver::start(testserver::Options {
                event_ids: false,
                ..testserver::Options::default()
            }))
            .expect("test server");
        Upstream {
            server: Some(server),
            runtime,
        }
    }

    fn url(&self) -> String {
        self.server.as_ref().map(|s| s.url()).unwrap_or_default()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }
}

/// A client's output lines, each with when it arrived; killed on drop.
struct Client {
    child: std::process::Child,
    lines: Receiver<(DateTime<Utc>, String)>,
    seen: Vec<(DateTime<Utc>, String)>,
}

impl Client {
    fn start(argv: &[String]) -> Client {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the client");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((Utc::now(), line));
            }
        });
        Client {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line starting with `prefix` within `timeout`.
    fn line(&mut self, prefix: &str, timeout: Duration) -> Option<(DateTime<Utc>, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(hit) = self.seen.iter().find(|(_, l)| l.starts_with(prefix)) {
                return Some(hit.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client run through a proxy with the fault: what the test looks at.
struct Provoked {
    /// When the call's stream died (its `call_orphaned` notice).
    died: DateTime<Utc>,
    client: Client,
    proxy: Proxy,
    /// Kept until the end of the test (dropped last).
    _upstream: Upstream,
}

/// Runs the client through a proxy with the fault (and `--rescue` if asked).
fn provoke(argv: &[String], rescue: bool) -> Provoked {
    let upstream = Upstream::start();
    let mut extra = vec!["--fault", FAULT];
    if rescue {
        extra.push("--rescue");
    }
    let proxy = Proxy::start(&upstream.url(), &extra);
    let url = proxy.url("/mcp");
    let argv: Vec<String> = argv.iter().map(|a| a.replace("{url}", &url)).collect();
    let client = Client::start(&argv);
    let orphaned = proxy
        .wait_notice(Duration::from_secs(30), |n| n["kind"] == "call_orphaned")
        .unwrap_or_else(|| panic!("the fault did not orphan the call\n{}", proxy.dump()));
    Provoked {
        died: ts(&orphaned["t"]),
        client,
        proxy,
        _upstream: upstream,
    }
}

fn rescued_within_a_second(argv: &[String]) {
    let Provoked {
        died,
        mut client,
        proxy,
        _upstream,
    } = provoke(argv, true);
    let (at, line) = client
        .line("error:", Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the rescued client printed no error\n{}", proxy.dump()));
    assert!(line.contains("mcpscope --rescue"), "{line}");
    let took = (at - died).num_milliseconds();
    assert!(
        took < 1000,
        "the client failed {took} ms after the death: {line}"
    );
    let rescued = proxy.wait_notice(Duration::from_secs(5), |n| n["kind"] == "call_rescued");
    let rescued = rescued.unwrap_or_else(|| panic!("no call_rescued\n{}", proxy.dump()));
    assert_eq!(rescued["method"], "tools/call", "{rescued}");
    assert!(
        rescued["message"]
            .as_str()
            .is_some_and(|m| m.contains("reset")),
        "{rescued}"
    );
    let status = client.child.wait().expect("wait");
    assert_eq!(status.code(), Some(1), "the client's exit after the rescue");
}

fn still_hangs_without_rescue(argv: &[String]) {
    let Provoked {
        mut client,
        proxy,
        _upstream,
        ..
    } = provoke(argv, false);
    let error = client.line("error:", HANG_WATCH);
    assert!(
        error.is_none(),
        "the client gave up without --rescue: {error:?}"
    );
    assert!(
        client.child.try_wait().expect("try_wait").is_none(),
        "the client exited without --rescue"
    );
    let notices = proxy.notices();
    assert!(
        !notices.iter().any(|n| n["kind"] == "call_rescued"),
        "a rescue without --rescue"
    );
}

fn node() -> Vec<String> {
    let sdk = root().join("tests/peers/node/node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.exists(),
        "{} is missing: run scripts/setup-peers.sh",
        sdk.display()
    );
    let script = root().join("tests/peers/node/matrix_client.mjs");
    vec!["node".into(), script.display().to_string(), "{url}".into()]
}

fn python_1() -> Vec<String> {
    let py = root().join(".venv-mcp1/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/setup-peers.sh",
        py.display()
    );
    let script = root().join("tests/peers/py_matrix_client.py");
    vec![
        py.display().to_string(),
        script.display().to_string(),
        "{url}".into(),
    ]
}

#[test]
#[ignore = "needs the TypeScript SDK in tests/peers/node/node_modules: run scripts/test.sh (installs it)"]
fn typescript_sdk_call_is_rescued() {
    rescued_within_a_second(&node());
}

#[test]
#[ignore = "needs the TypeScript SDK in tests/peers/node/node_modules: run scripts/test.sh (installs it)"]
fn typescript_sdk_call_hangs_without_rescue() {
    still_hangs_without_rescue(&node());
}

#[test]
#[ignore = "needs the Python MCP SDK 1.x in .venv-mcp1: run scripts/test.sh (installs it)"]
fn python_sdk_1_call_is_rescued() {
    rescued_within_a_second(&python_1());
}

#[test]
#[ignore = "needs the Python MCP SDK 1.x in .venv-mcp1: run scripts/test.sh (installs it)"]
fn python_sdk_1_call_hangs_without_rescue() {
    still_hangs_without_rescue(&python_1());
}

/// An upstream that answers one request with a chunked JSON head, then resets before any byte
/// of the body.
async fn json_head_then_reset() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let _ = mcpscope_testkit::raw::read_head(&mut sock).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        let _ = sock.write_all(head.as_bytes()).await;
        let _ = sock.flush().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        mcpscope_testkit::raw::reset(sock);
    });
    addr
}

/// A JSON response that dies before its first byte (no length promised) becomes the rescue's
/// error as the body; the same death without `--rescue` reaches the client as a failed body.
#[tokio::test]
async fn a_json_body_that_dies_before_its_first_byte_is_the_rescue() {
    for rescue in [true, false] {
        let upstream = json_head_then_reset().await;
        let config = mcpscope_proxy::Config {
            upstream: format!("http://{upstream}/mcp").parse().expect("uri"),
            rescue,
            ..Default::default()
        };
        let mut running = Proxied::start(config, None, Redactor::new()).await;
        let mut feed = running.session.feed().expect("feed");
        let url = running.url();
        let mut client = mcpscope_testserver::client::McpClient::new(&url).expect("client");
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "poke", "arguments": {}}});
        let answer = tokio::time::timeout(Duration::from_secs(10), async {
            client.post(&call).await.expect("post").answer(None).await
        })
        .await
        .expect("bounded");
        let rescued_error = answer.messages.iter().find(|m| m["id"] == 5).cloned();
        drop(client);
        running.stop(Duration::from_secs(5)).await;
        let mut rescued_events = 0;
        while let Some(event) = feed.recv().await {
            if matches!(
                event.kind,
                mcpscope_engine::event::EventKind::CallRescued { .. }
            ) {
                rescued_events += 1;
            }
        }
        if rescue {
            let error = rescued_error.unwrap_or_else(|| panic!("no rescue: {answer:?}"));
            assert_eq!(error["error"]["code"], -32000, "{error}");
            let message = error["error"]["message"].as_str().unwrap_or("");
            assert!(
                message.contains("before any byte of its JSON body"),
                "{message}"
            );
            assert_eq!(rescued_events, 1);
        } else {
            assert!(rescued_error.is_none(), "{answer:?}");
            assert_eq!(rescued_events, 0);
        }
    }
}

/// An id beyond i64/u64 comes back in the rescue digit for digit, not as a float.
#[tokio::test]
async fn a_rescue_echoes_a_huge_integer_id_as_the_client_wrote_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = json_head_then_reset().await;
    let config = mcpscope_proxy::Config {
        upstream: format!("http://{upstream}/mcp").parse().expect("uri"),
        rescue: true,
        ..Default::default()
    };
    let running = Proxied::start(config, None, Redactor::new()).await;
    let addr = running.proxy.addr;
    let id = "123456789012345678901234567890";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"poke","arguments":{{}}}}}}"#
    );
    let mut sock = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(request.as_bytes()).await.expect("write");
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.contains(&format!("\"id\":{id},")), "{reply}");
    assert!(!reply.contains("e+29"), "{reply}");
}
