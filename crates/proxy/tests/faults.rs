//! Every fault kind on real sockets: the built-in test server (or a raw TCP upstream) behind the
//! proxy, rules armed through `fault::install`, the MCP test client to open the session and the
//! raw HTTP/1.1 observer (`mcpscope_testkit::raw`) that tells a reset from a clean end. For each fault: what the client observes is exactly the fault, the
//! `FaultInjected` event is recorded, and the verdict of the affected call is right.

use mcpscope_testkit::raw::{Close, VERSION, exchange, read_reply, send};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind};
use mcpscope_engine::fault::RuleEngine;
use mcpscope_engine::fixtures::last_call;
use mcpscope_engine::model::{Model, OrphanCause, Verdict};
use mcpscope_proxy::controller as fault;
use mcpscope_proxy::{self as proxy, Config, Proxy};
use mcpscope_session::sink::EventSink;
use mcpscope_testserver::client::McpClient;
use mcpscope_testserver::{self as testserver, TestServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Bound on any one exchange.
const WAIT: Duration = Duration::from_secs(5);

/// The proxy with rules, in front of an upstream; collects every event.
struct Rig {
    proxy: Proxy,
    rx: mpsc::UnboundedReceiver<Event>,
    events: Vec<Event>,
    engine: Arc<RuleEngine>,
    _server: Option<TestServer>,
}

async fn rig_with(url: &str, rules: &[&str], server: Option<TestServer>) -> Rig {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: url.parse().expect("uri"),
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let proxy = proxy::start(config, EventSink::new(tx))
        .await
        .expect("proxy");
    let specs: Vec<String> = rules.iter().map(|s| s.to_string()).collect();
    let engine = fault::install(&proxy, &specs, None).expect("rules");
    Rig {
        proxy,
        rx,
        events: Vec::new(),
        engine,
        _server: server,
    }
}

/// The test server (no event ids, so that a dead stream orphans its call at once).
async fn rig(json_responses: bool, rules: &[&str]) -> Rig {
    let server = testserver::start(testserver::Options {
        json_responses,
        event_ids: false,
        ..Default::default()
    })
    .await
    .expect("test server");
    let url = server.url();
    rig_with(&url, rules, Some(server)).await
}

impl Rig {
    fn addr(&self) -> SocketAddr {
        self.proxy.addr
    }

    /// Every event so far (waits a moment for the taps to report).
    async fn events(&mut self) -> &[Event] {
        tokio::time::sleep(Duration::from_millis(100)).await;
        while let Ok(event) = self.rx.try_recv() {
            self.events.push(event);
        }
        &self.events
    }

    async fn model(&mut self) -> Model {
        Model::from_events(self.events().await).0
    }

    /// The verdict of the last call of `tool`.
    async fn verdict(&mut self, tool: &str) -> Verdict {
        let model = self.model().await;
        last_call(&model, tool)
            .map(|c| c.verdict.clone())
            .unwrap_or_else(|| panic!("no call of {tool}"))
    }

    /// `(stream, fault, rule)` of every injected fault.
    async fn faults(&mut self) -> Vec<(u64, String, String)> {
        self.events()
            .await
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::FaultInjected {
                    stream,
                    fault,
                    rule,
                } => Some((*stream, fault.clone(), rule.clone().unwrap_or_default())),
                _ => None,
            })
            .collect()
    }

    /// Initializes a session through the proxy; returns its id.
    async fn session(&self) -> String {
        let url = format!("http://{}/mcp", self.addr());
        let mut c = McpClient::new(&url)
            .expect("client")
            .named("faults-test")
            .speaking(VERSION);
        let init = c.initialize().await.expect("initialize");
        assert!(init.result().is_some(), "{init:?}");
        assert_eq!(c.initialized().await.expect("initialized"), 202);
        c.session().expect("session id").to_string()
    }
}

/// Whatever the fault did, every exchange ends exactly once: at the end of each test the proxy
/// shuts down (ending what is still open) and each `stream_opened` has one response end.
impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        self.proxy.shutdown();
        while let Ok(event) = self.rx.try_recv() {
            self.events.push(event);
        }
        for event in &self.events {
            let EventKind::StreamOpened { stream, .. } = event.kind else {
                continue;
            };
            let ends = self
                .events
                .iter()
                .filter(|e| {
                    matches!(e.kind, EventKind::StreamEnded { stream: s, dir: Direction::ServerToClient, .. } if s == stream)
                })
                .count();
            assert_eq!(ends, 1, "stream #{stream} has {ends} response ends");
        }
    }
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// Three `notifications/message` events 100 ms apart, then the result.
fn slow(id: u64) -> Value {
    call(id, "slow", json!({"steps": 3, "interval_ms": 100}))
}

fn assert_orphaned(verdict: &Verdict, how: EndHow) {
    match verdict {
        Verdict::Orphaned {
            cause: OrphanCause::StreamEnded,
            death,
        } => assert_eq!(death.how, Some(how), "{verdict:?}"),
        other => panic!("expected orphaned by a {how:?} end, got {other:?}"),
    }
}

fn assert_fault(faults: &[(u64, String, String)], fault: &str, rule: &str) {
    assert!(
        faults
            .iter()
            .any(|(_, f, r)| f == fault && r.contains(rule)),
        "no {fault} by {rule:?} in {faults:?}"
    );
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[tokio::test]
async fn eof_ends_the_sse_stream_cleanly_before_the_result() {
    let mut rig = rig(false, &["eof after 1 events when tool=slow"]).await;
    let s = rig.session().await;
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&slow(1)), WAIT).await;
    assert_eq!(reply.status, 200);
    assert!(reply.complete, "the framing completes: {reply:?}");
    assert_eq!(reply.end, Close::Fin);
    let text = reply.text();
    assert_eq!(count(&text, "notifications/message"), 1, "{text}");
    assert!(!text.contains("\"result\""), "{text}");
    assert_fault(&rig.faults().await, "eof", "rule #1");
    assert_orphaned(&rig.verdict("slow").await, EndHow::Eof);
}

#[tokio::test]
async fn reset_resets_the_client_connection() {
    let mut rig = rig(false, &["reset after 1 events when tool=slow"]).await;
    let s = rig.session().await;
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&slow(1)), WAIT).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.end, Close::Reset, "{reply:?}");
    assert!(!reply.complete);
    assert!(!reply.text().contains("\"result\""));
    assert_fault(&rig.faults().await, "reset", "rule #1");
    assert_orphaned(&rig.verdict("slow").await, EndHow::Reset);
}

#[tokio::test]
async fn reset_after_a_time_fires_mid_call() {
    // The seed's rule: the first tools/call of each tool is reset after a while (here 150 ms,
    // before `slow` answers at 300 ms); later calls are answered.
    let mut rig = rig(
        false,
        &["reset after 150ms when method=tools/call per-tool"],
    )
    .await;
    let s = rig.session().await;
    let started = Instant::now();
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&slow(1)), WAIT).await;
    assert_eq!(reply.end, Close::Reset);
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_orphaned(&rig.verdict("slow").await, EndHow::Reset);
    let again = exchange(rig.addr(), "POST", Some(&s), Some(&slow(2)), WAIT).await;
    assert!(
        again.complete && again.text().contains("\"result\""),
        "{again:?}"
    );
    assert_eq!(rig.verdict("slow").await, Verdict::Answered);
    let echo = call(3, "echo", json!({"text": "x"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    // echo answers at once, before the 150 ms: the rule fired (per tool) but was too late.
    assert!(reply.text().contains("\"result\""), "{reply:?}");
    assert_eq!(rig.engine.armed().len(), 1);
}

#[tokio::test]
async fn server_dies_resets_the_post_and_get_streams_and_refuses_for_a_while() {
    let mut rig = rig(false, &["server-dies:1s after 1 events when tool=slow"]).await;
    let s = rig.session().await;
    let get_sent = Instant::now();
    let get = send(rig.addr(), "GET", Some(&s), None).await;
    let get_task = tokio::spawn(read_reply(get, get_sent, WAIT));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&slow(1)), WAIT).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.end, Close::Reset, "{reply:?}");
    let get = get_task.await.expect("GET reader");
    assert_eq!(get.status, 200, "{get:?}");
    assert_eq!(get.end, Close::Reset, "the GET stream dies too: {get:?}");
    assert!(get_sent.elapsed() < Duration::from_secs(2));

    // During the down window, a new request is reset.
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let refused = exchange(rig.addr(), "POST", Some(&s), Some(&ping), WAIT).await;
    assert_eq!(refused.end, Close::Reset, "{refused:?}");
    assert_eq!(refused.status, 0);

    // After it, requests pass again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    let back = exchange(rig.addr(), "POST", Some(&s), Some(&ping), WAIT).await;
    assert_eq!(back.status, 200, "{back:?}");
    assert!(back.text().contains("\"result\""));

    let faults = rig.faults().await;
    assert_fault(&faults, "server-dies:1000ms", "rule #1");
    assert_fault(&faults, "reset", "server-dies on #");
    assert_fault(&faults, "refused", "server-dies");
    assert_orphaned(&rig.verdict("slow").await, EndHow::Reset);
}

#[tokio::test]
async fn json_reset_cuts_a_json_body_and_resets() {
    let mut rig = rig(true, &["json-reset when tool=echo"]).await;
    let s = rig.session().await;
    let echo = call(
        1,
        "echo",
        json!({"text": "a fairly long text so that half of it is visible"}),
    );
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.end, Close::Reset, "{reply:?}");
    assert!(!reply.complete);
    let length: usize = reply
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .expect("content-length");
    assert!(reply.body.len() <= length / 2, "{reply:?}");
    assert_fault(&rig.faults().await, "json-reset", "rule #1");
    assert_orphaned(&rig.verdict("echo").await, EndHow::Reset);
}

#[tokio::test]
async fn status_faults_answer_without_the_upstream() {
    let mut rig = rig(false, &["503 when tool=poke", "status:500 when tool=peek"]).await;
    let s = rig.session().await;
    let reply = exchange(
        rig.addr(),
        "POST",
        Some(&s),
        Some(&call(1, "poke", json!({}))),
        WAIT,
    )
    .await;
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_fault(&rig.faults().await, "status:503", "rule #1");
    assert!(matches!(rig.verdict("poke").await, Verdict::Error { .. }));

    let reply = exchange(
        rig.addr(),
        "POST",
        Some(&s),
        Some(&call(2, "peek", json!({}))),
        WAIT,
    )
    .await;
    assert_eq!(reply.status, 500, "{reply:?}");
    assert!(matches!(rig.verdict("peek").await, Verdict::Error { .. }));

    // The upstream never saw the poke: its counter is still 0.
    let reply = exchange(
        rig.addr(),
        "POST",
        Some(&s),
        Some(&call(3, "peek", json!({}))),
        WAIT,
    )
    .await;
    assert!(reply.text().contains("\"text\":\"0\""), "{}", reply.text());
}

#[tokio::test]
async fn status_404_expires_the_session() {
    let mut rig = rig(false, &["404 when tool=echo"]).await;
    let s = rig.session().await;
    let echo = call(1, "echo", json!({"text": "x"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert_eq!(reply.status, 404);
    assert!(
        reply.text().contains("Session not found"),
        "{}",
        reply.text()
    );
    assert_fault(&rig.faults().await, "status:404", "rule #1");
    match rig.verdict("echo").await {
        Verdict::Orphaned {
            cause: OrphanCause::SessionExpired,
            ..
        } => {}
        other => panic!("expected orphaned by session expiry, got {other:?}"),
    }
}

#[tokio::test]
async fn stall_swallows_the_result_and_keeps_the_stream_open() {
    let mut rig = rig(false, &["stall when tool=slow"]).await;
    let s = rig.session().await;
    let sent = Instant::now();
    let sock = send(rig.addr(), "POST", Some(&s), Some(&slow(1))).await;
    let client = tokio::spawn(read_reply(sock, sent, Duration::from_millis(1500)));
    // Well after `slow` answered upstream (300 ms), while the client still waits: pending.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_fault(&rig.faults().await, "stall", "rule #1");
    assert_eq!(rig.verdict("slow").await, Verdict::Pending);
    let reply = client.await.expect("client");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.end, Close::Open, "{reply:?}");
    let text = reply.text();
    assert_eq!(count(&text, "notifications/message"), 3, "{text}");
    assert!(!text.contains("\"result\""), "{text}");
}

#[tokio::test]
async fn delay_holds_the_event_back() {
    let mut rig = rig(false, &["delay:400ms when tool=echo"]).await;
    let s = rig.session().await;
    let echo = call(1, "echo", json!({"text": "late"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert!(reply.complete, "{reply:?}");
    let (at, _) = reply.body_reads.first().copied().expect("a body read");
    assert!(at >= Duration::from_millis(400), "result after {at:?}");
    assert!(reply.text().contains("late"));
    assert_fault(&rig.faults().await, "delay:400ms", "rule #1");
    assert_eq!(rig.verdict("echo").await, Verdict::Answered);
}

#[tokio::test]
async fn drip_trickles_the_bytes() {
    let mut rig = rig(false, &["drip:200 when tool=echo"]).await;
    let s = rig.session().await;
    let echo = call(1, "echo", json!({"text": "drip drip drip"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert!(reply.complete, "{reply:?}");
    assert!(reply.text().contains("drip drip drip"));
    let reads = &reply.body_reads;
    assert!(reads.len() >= 4, "{} reads: {reads:?}", reads.len());
    let span = reads[reads.len() - 1].0 - reads[0].0;
    // ~100+ bytes at 200 B/s.
    assert!(span >= Duration::from_millis(300), "{span:?}: {reads:?}");
    assert_fault(&rig.faults().await, "drip:200", "rule #1");
    assert_eq!(rig.verdict("echo").await, Verdict::Answered);
}

#[tokio::test]
async fn truncate_sends_half_an_event_then_ends_cleanly() {
    let mut rig = rig(false, &["truncate when tool=echo"]).await;
    let s = rig.session().await;
    let echo = call(1, "echo", json!({"text": "cut me"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert_eq!(reply.status, 200);
    assert!(reply.complete, "{reply:?}");
    assert_eq!(reply.end, Close::Fin);
    let text = reply.text();
    assert!(text.starts_with("event: message\ndata: {"), "{text}");
    assert!(!text.contains("\n\n"), "half an event: {text:?}");
    assert!(!text.contains("cut me"), "{text:?}");
    assert_fault(&rig.faults().await, "truncate", "rule #1");
    assert_orphaned(&rig.verdict("echo").await, EndHow::Eof);
}

#[tokio::test]
async fn duplicate_sends_the_event_twice() {
    let mut rig = rig(false, &["duplicate when tool=echo"]).await;
    let s = rig.session().await;
    let echo = call(1, "echo", json!({"text": "twice"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert!(reply.complete && reply.end == Close::Fin, "{reply:?}");
    assert_eq!(count(&reply.text(), "\"result\""), 2, "{}", reply.text());
    assert_fault(&rig.faults().await, "duplicate", "rule #1");
    assert_eq!(rig.verdict("echo").await, Verdict::Answered);
}

/// A raw upstream that answers a POST with an SSE head and then waits; reports when the proxy
/// drops the upstream connection.
async fn waiting_upstream() -> (SocketAddr, mpsc::UnboundedReceiver<Duration>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
                let mut raw = Vec::new();
                while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => raw.extend_from_slice(&buf[..n]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\ntransfer-encoding: chunked\r\n\r\n";
                let _ = sock.write_all(head.as_bytes()).await;
                let started = Instant::now();
                // Wait for the proxy to go away (FIN or RST), at most 5 s.
                loop {
                    match tokio::time::timeout(WAIT, sock.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => {
                            let _ = tx.send(started.elapsed());
                            return;
                        }
                        Ok(Ok(_)) => {}
                        Err(_) => return,
                    }
                }
            });
        }
    });
    (addr, rx)
}

#[tokio::test]
async fn vanish_drops_the_upstream_request_and_keeps_the_client_waiting() {
    let (upstream, mut dropped) = waiting_upstream().await;
    let mut rig = rig_with(
        &format!("http://{upstream}/mcp"),
        &["vanish when method=tools/call"],
        None,
    )
    .await;
    let poke = call(1, "poke", json!({}));
    let sent = Instant::now();
    let sock = send(rig.addr(), "POST", Some("s1"), Some(&poke)).await;
    let client = tokio::spawn(read_reply(sock, sent, Duration::from_millis(1500)));
    let gone = tokio::time::timeout(WAIT, dropped.recv())
        .await
        .expect("the upstream sees its request dropped within 5 s")
        .expect("upstream report");
    assert!(gone < Duration::from_secs(1), "{gone:?}");
    // While the client still waits, the call is pending.
    assert_fault(&rig.faults().await, "vanish", "rule #1");
    assert_eq!(rig.verdict("poke").await, Verdict::Pending);
    let reply = client.await.expect("client");
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.end,
        Close::Open,
        "the client is still waiting: {reply:?}"
    );
}

#[tokio::test]
async fn a_live_fault_applies_to_a_running_stream() {
    let mut rig = rig(false, &[]).await;
    let control = fault::controller(&rig.proxy, rig.engine.clone());
    assert!(control.stream_faults().iter().any(|c| c.spec == "reset"));
    let s = rig.session().await;
    let sent = Instant::now();
    let sock = send(
        rig.addr(),
        "POST",
        Some(&s),
        Some(&call(1, "slow", json!({"steps": 20, "interval_ms": 100}))),
    )
    .await;
    let client = tokio::spawn(read_reply(sock, sent, WAIT));
    tokio::time::sleep(Duration::from_millis(250)).await;
    let live = rig.proxy.shared.live_streams();
    let (stream, _, _) = live
        .iter()
        .find(|(_, m, _)| m == "POST")
        .cloned()
        .expect("a live POST");
    assert!(control.apply_to_stream(stream, "503").is_err());
    assert!(control.apply_to_stream(stream, "reset nth=2").is_err());
    control
        .apply_to_stream(stream, "reset")
        .expect("apply reset");
    let reply = client.await.expect("client");
    assert_eq!(reply.end, Close::Reset, "{reply:?}");
    assert!(sent.elapsed() < Duration::from_secs(1));
    assert_fault(&rig.faults().await, "reset", "live: reset");
    assert_orphaned(&rig.verdict("slow").await, EndHow::Reset);
    assert!(control.apply_to_stream(stream, "reset").is_err(), "ended");

    // Rules armed from the view fire on the next match.
    let label = control.arm("eof when tool=echo").expect("arm");
    let armed: Vec<String> = control.armed().into_iter().map(|(_, l)| l).collect();
    assert_eq!(armed, vec![label]);
    let echo = call(2, "echo", json!({"text": "x"}));
    let reply = exchange(rig.addr(), "POST", Some(&s), Some(&echo), WAIT).await;
    assert!(
        reply.complete && !reply.text().contains("\"result\""),
        "{reply:?}"
    );
    assert!(control.armed().is_empty());
    assert!(control.arm("explode").is_err());
}

/// A rule `method=tasks/result` fires on a task's result wait, not on the task-augmented
/// `tools/call` that created it: the wait's stream is reset, the task lives (the model says the
/// wait died, nothing is orphaned), and the next `tasks/result` brings the result.
#[tokio::test]
async fn a_tasks_result_rule_resets_the_result_wait_and_the_task_lives() {
    let mut rig = rig(false, &["reset when method=tasks/result"]).await;
    let url = format!("http://{}/mcp", rig.addr());
    let mut c = McpClient::new(&url)
        .expect("client")
        .named("faults-test")
        .speaking("2025-11-25");
    assert!(c.initialize().await.expect("initialize").result().is_some());
    assert_eq!(c.initialized().await.expect("initialized"), 202);
    let created = c
        .request(
            "tools/call",
            json!({"name": "slow_task", "arguments": {"ms": 300}, "task": {"ttl": 30000}}),
        )
        .await
        .expect("tools/call");
    let task_id = created.result().expect("CreateTaskResult")["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let about = json!({"taskId": task_id});
    let died = c
        .request("tasks/result", about.clone())
        .await
        .expect("tasks/result");
    assert_eq!(died.died(), Some(EndHow::Reset), "{died:?}");
    let faults = rig.faults().await;
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_fault(&faults, "reset", "method=tasks/result");
    let again = c
        .request("tasks/result", about)
        .await
        .expect("tasks/result again");
    assert_eq!(again.text(), Some("done after 300 ms"), "{again:?}");

    let model = rig.model().await;
    let op = last_call(&model, "slow_task").expect("the task operation");
    assert_eq!(op.verdict, Verdict::Answered, "{:?}", op.verdict);
    let task = op.task().expect("a task");
    assert_eq!(
        (task.id.as_str(), task.waits_lost, task.reasked),
        (task_id.as_str(), 1, 1)
    );
    assert_eq!(model.counts().orphaned, 0, "{:?}", model.counts());
}
