//! `mcpscope attach` against the real binary: proxies publish on a socket in the runtime
//! directory (here a private temporary one), viewers attach with `attach --json`, calls are
//! driven through the proxy by the test client against the built-in test server.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use mcpscope_testkit::tmux::Tmux;
use mcpscope_testserver::client::McpClient;
use mcpscope_testserver::{self as testserver, TestServer};
use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(20);

/// A private runtime directory, the test server and a proxy publishing into it.
struct Setup {
    dir: tempfile::TempDir,
    server: TestServer,
}

impl Setup {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("xdg")).expect("xdg");
        std::fs::set_permissions(
            dir.path().join("xdg"),
            std::fs::Permissions::from_mode(0o700),
        )
        .expect("chmod");
        let server = testserver::start(testserver::Options::default())
            .await
            .expect("test server");
        Self { dir, server }
    }

    fn xdg(&self) -> PathBuf {
        self.dir.path().join("xdg")
    }

    /// The directory sessions publish in.
    fn sockets(&self) -> PathBuf {
        self.xdg().join("mcpscope")
    }

    fn mcpscope(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpscope"));
        cmd.current_dir(self.dir.path())
            .env("XDG_RUNTIME_DIR", self.xdg())
            .env("MCPSCOPE_LOG", self.dir.path().join("mcpscope.log"))
            .stdin(Stdio::null());
        cmd
    }

    /// Starts a proxy (`--json`) in front of the test server; returns it with its MCP URL, its
    /// notices and its stderr lines.
    fn proxy(&self, extra: &[&str]) -> Proxy {
        self.proxy_to(&self.server.url(), extra)
    }

    /// Starts a proxy (`--json`) in front of `upstream`.
    fn proxy_to(&self, upstream: &str, extra: &[&str]) -> Proxy {
        let mut child = self
            .mcpscope()
            .args(["--listen", "127.0.0.1:0", "--json", "--upstream"])
            .arg(upstream)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn proxy");
        let out = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        let mut said = String::new();
        let deadline = Instant::now() + PATIENCE;
        let url = loop {
            let line = stderr
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("proxy not listening: {said}"));
            said.push_str(&line);
            said.push('\n');
            if let Some(addr) = line
                .split("listening on ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
            {
                break format!("{addr}/mcp");
            }
        };
        Proxy {
            child,
            url,
            out,
            stderr,
            said,
        }
    }

    /// `mcpscope attach ARGS` with its stdout as a channel of lines.
    fn viewer(&self, args: &[&str]) -> Viewer {
        let mut child = self
            .mcpscope()
            .arg("attach")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn attach");
        let out = lines(child.stdout.take().expect("stdout"));
        Viewer { child, out }
    }

    fn run(&self, args: &[&str]) -> Output {
        let child = self
            .mcpscope()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        wait_output(child)
    }
}

struct Proxy {
    child: Child,
    url: String,
    /// The proxy's own `--json` lines.
    out: Receiver<String>,
    stderr: Receiver<String>,
    said: String,
}

impl Proxy {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the proxy (SIGTERM) and waits for it; returns its stderr and its `--json` lines.
    fn stop(mut self) -> (String, Vec<String>) {
        signal(self.child.id(), "-TERM");
        wait_exit(&mut self.child);
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(1)) {
            self.said.push_str(&line);
            self.said.push('\n');
        }
        let notices = std::iter::from_fn(|| self.out.recv_timeout(Duration::from_secs(1)).ok());
        let notices = notices.collect();
        (std::mem::take(&mut self.said), notices)
    }
}

/// A test that fails leaves no proxy behind.
impl Drop for Proxy {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

struct Viewer {
    child: Child,
    out: Receiver<String>,
}

impl Viewer {
    /// Reads JSON lines until `want` of them match `pred`; panics after [`PATIENCE`].
    fn until(&self, what: &str, want: usize, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        let mut matched = 0;
        while matched < want {
            let line = self
                .out
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("{what}: {matched} of {want} seen in {seen:#?}"));
            let value: Value = serde_json::from_str(&line).expect("a JSON line");
            if pred(&value) {
                matched += 1;
            }
            seen.push(value);
        }
        seen
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines(source: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(source).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

fn signal(pid: u32, which: &str) {
    let _ = Command::new("kill")
        .args([which, &pid.to_string()])
        .status();
}

fn wait_exit(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Waits (bounded) for a short-lived command and collects its output.
fn wait_output(mut child: Child) -> Output {
    let status = wait_exit(&mut child).expect("exits in time");
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_end(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_end(&mut stderr);
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// A `call_answered` notice of `tools/call` (any call when `text` is None).
fn answered_call(value: &Value) -> bool {
    value["kind"] == "call_answered" && value["method"] == "tools/call"
}

async fn echo(client: &mut McpClient, text: &str) {
    let answer = client
        .call("echo", json!({"text": text}), false)
        .await
        .expect("call");
    assert_eq!(answer.text(), Some(text), "the proxy answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_viewers_one_killed_the_other_and_the_session_go_on() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--record", "run.jsonl", "--name", "work"]);
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    echo(&mut client, "before anyone attached").await;

    // The runtime directory and the socket are the user's only.
    let socket = setup.sockets().join(format!("{}.sock", proxy.pid()));
    assert_eq!(mode(&setup.sockets()), 0o700);
    assert_eq!(mode(&socket), 0o600);

    // Both join late: the call made before comes from the recording.
    let first = setup.viewer(&["--json"]);
    let second = setup.viewer(&["work", "--json"]);
    let mut second_lines = Vec::new();
    for (n, viewer) in [&first, &second].into_iter().enumerate() {
        let seen = viewer.until("the call made before joining", 1, answered_call);
        assert!(
            seen.iter().any(|v| v["kind"] == "session_started"),
            "{seen:#?}"
        );
        if n == 1 {
            second_lines.extend(seen);
        }
    }
    let listed = setup.run(&["attach", "--list"]);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        listing.contains(&proxy.pid().to_string())
            && listing.contains("http")
            && listing.contains("[work]"),
        "{listing}"
    );

    echo(&mut client, "both watching").await;
    for (n, viewer) in [&first, &second].into_iter().enumerate() {
        let seen = viewer.until("the call made while watching", 1, answered_call);
        if n == 1 {
            second_lines.extend(seen);
        }
    }

    // One viewer dies; the session and the other viewer go on.
    let mut first = first;
    let _ = first.child.kill();
    let _ = first.child.wait();
    for n in 0..3 {
        echo(&mut client, &format!("after the first viewer left {n}")).await;
    }
    second_lines.extend(second.until("the calls after the first viewer left", 3, answered_call));

    // The session ends: the viewer says so and exits 0; the socket is gone.
    let (said, own) = proxy.stop();
    let mut second = second;
    second_lines.extend(std::iter::from_fn(|| {
        second
            .out
            .recv_timeout(Duration::from_secs(1))
            .ok()
            .map(|l| serde_json::from_str::<Value>(&l).expect("a JSON line"))
    }));
    // Joined late, the viewer printed exactly what the proxy's own --json printed.
    let own: Vec<Value> = own
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(own.len(), second_lines.len(), "{own:#?}\n{second_lines:#?}");
    assert_eq!(own, second_lines);
    let status = wait_exit(&mut second.child).expect("the viewer exits when the session ends");
    assert!(status.success(), "{status:?}");
    let mut last_words = String::new();
    if let Some(mut err) = second.child.stderr.take() {
        let _ = err.read_to_string(&mut last_words);
    }
    assert!(last_words.contains("session"), "{last_words}");
    assert!(!socket.exists(), "the socket is removed at exit: {said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrecorded_a_late_viewer_starts_from_when_it_joined() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--no-record"]);
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    echo(&mut client, "unseen").await;
    let viewer = setup.viewer(&["--json"]);
    // Attached once the hello is read: wait until the listing counts the viewer.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = setup.run(&["attach", "--list"]);
        let listing = String::from_utf8_lossy(&listed.stdout).to_string();
        let viewers = listing
            .lines()
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|n| n.parse::<usize>().ok());
        if viewers == Some(1) {
            break;
        }
        assert!(Instant::now() < deadline, "never attached: {listing}");
        std::thread::sleep(Duration::from_millis(50));
    }
    echo(&mut client, "seen").await;
    let seen = viewer.until("the call after joining", 1, answered_call);
    // initialize was request 1, the unseen echo request 2.
    assert!(
        seen.iter()
            .all(|v| v["request_id"] != 1 && v["request_id"] != 2),
        "nothing from before joining: {seen:#?}"
    );
    proxy.stop();
    let mut viewer = viewer;
    wait_exit(&mut viewer.child).expect("the viewer exits with the session");
    let mut said = String::new();
    if let Some(mut err) = viewer.child.stderr.take() {
        let _ = err.read_to_string(&mut said);
    }
    assert!(said.contains("is not recorded"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_directory_open_to_others_or_not_ours_is_refused() {
    let setup = Setup::new().await;
    std::fs::create_dir(setup.sockets()).expect("mkdir");
    std::fs::set_permissions(setup.sockets(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod");
    let proxy = setup.proxy(&["--no-record"]);
    // The proxy says why it does not publish, and works on.
    let mut said = proxy.said.clone();
    let deadline = Instant::now() + PATIENCE;
    while !said.contains("not published") && Instant::now() < deadline {
        if let Ok(line) = proxy.stderr.recv_timeout(Duration::from_millis(100)) {
            said.push_str(&line);
            said.push('\n');
        }
    }
    assert!(
        said.contains("not published") && said.contains("group or others"),
        "{said}"
    );
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    echo(&mut client, "still proxied").await;
    assert_eq!(
        std::fs::read_dir(setup.sockets()).expect("ls").count(),
        0,
        "no socket in an open directory"
    );
    let listed = setup.run(&["attach", "--list"]);
    let why = String::from_utf8_lossy(&listed.stderr);
    assert!(
        !listed.status.success() && why.contains("group or others"),
        "{listed:?}"
    );
    proxy.stop();

    // A closed directory of another user (settable only as root) is refused as well.
    std::fs::set_permissions(setup.sockets(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    if std::os::unix::fs::chown(setup.sockets(), Some(4242), None).is_ok() {
        let listed = setup.run(&["attach", "--list"]);
        let why = String::from_utf8_lossy(&listed.stderr);
        assert!(
            !listed.status.success() && why.contains("belongs to uid 4242"),
            "{listed:?}"
        );
    }
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_never_reads_is_cut_off_and_costs_the_session_nothing() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--record", "run.jsonl"]);
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    let socket = setup.sockets().join(format!("{}.sock", proxy.pid()));
    // Connects and never reads.
    let stuck = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    let watching = setup.viewer(&["--json"]);
    watching.until("the handshake", 1, |v| v["kind"] == "session_started");

    // 200 calls of 64 KiB: each carries the text three times (request, SSE data, response),
    // about 40 MiB of lines, five times what a viewer may have waiting.
    let text = "x".repeat(64 << 10);
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let before = rss_kib(proxy.pid());
    let mut peak = before;
    for n in 1..=200 {
        let call = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), echo(&mut client, &text))
            .await
            .expect("the proxy keeps answering");
        slowest = slowest.max(call.elapsed());
        peak = peak.max(rss_kib(proxy.pid()));
        // The reading viewer is never far behind (on a busy machine too): it sees every call.
        if n % 20 == 0 {
            watching.until("the last 20 calls", 20, answered_call);
        }
    }
    eprintln!(
        "200 calls of 64 KiB with a stuck viewer: {:?} in all, slowest {slowest:?}, proxy RSS {before} → peak {peak} KiB",
        started.elapsed()
    );

    // The stuck one was disconnected: what it can still read ends, and is bounded.
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut received = Vec::new();
    (&stuck)
        .read_to_end(&mut received)
        .expect("the connection ends");
    assert!(
        received.len() < 16 << 20,
        "{} bytes reached the stuck viewer",
        received.len()
    );
    let hello = received.split(|&b| b == b'\n').next().unwrap_or_default();
    let hello: Value = serde_json::from_slice(hello).expect("a hello first");
    assert_eq!(hello["mcpscope_attach"], 1);
    assert_eq!(hello["kind"], "http");
    proxy.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
async fn attach_shows_the_tui_with_the_calls_and_stays_open_when_the_session_ends() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--record", "run.jsonl"]);
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    client
        .call("slow", json!({"steps": 1, "interval_ms": 1}), false)
        .await
        .expect("call");

    let tmux = Tmux::start(200, 40);
    let command = format!(
        "XDG_RUNTIME_DIR={} MCPSCOPE_LOG={} {} attach; echo EXIT=$?",
        setup.xdg().display(),
        setup.dir.path().join("viewer.log").display(),
        env!("CARGO_BIN_EXE_mcpscope")
    );
    tmux.keys(&[&command, "Enter"]);
    let attached = format!("attached to {}, read-only", proxy.pid());
    tmux.wait_for(
        "the call made before attaching, in the TUI",
        PATIENCE,
        |s| s.contains("slow") && s.contains(&attached),
    );
    echo(&mut client, "live").await;
    tmux.wait_for("the call made while attached", PATIENCE, |s| {
        s.contains("echo")
    });
    // The proxy's commands need the proxy itself: a viewer neither offers nor takes them.
    tmux.keys(&["a"]);
    tmux.keys(&["?"]);
    let help = tmux
        .wait_for("the help", PATIENCE, |s| s.contains("mcpscope keys"))
        .screen;
    assert!(!help.contains("arm a fault rule"), "{help}");
    assert!(!help.contains("re-send"), "{help}");
    assert!(!help.contains("arm fault rule:"), "a took a rule: {help}");
    tmux.keys(&["Escape"]);

    proxy.stop();
    tmux.wait_for(
        "the end of the session, the view still open",
        PATIENCE,
        |s| s.contains("feed closed") && s.contains("slow"),
    );
    tmux.keys(&["q"]);
    tmux.wait_for("a clean exit", PATIENCE, |s| s.contains("EXIT=0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_session_is_opened_several_are_listed_and_stale_sockets_removed() {
    let setup = Setup::new().await;
    let none = setup.run(&["attach", "--json"]);
    assert_eq!(none.status.code(), Some(1), "{none:?}");
    assert!(String::from_utf8_lossy(&none.stderr).contains("no live sessions"));

    // A socket whose process is gone, and one on which nobody listens (its pid is alive).
    std::fs::create_dir(setup.sockets()).expect("mkdir");
    std::fs::set_permissions(setup.sockets(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let gone = setup.sockets().join(format!("{}.sock", i32::MAX));
    std::fs::write(&gone, "").expect("stale file");
    let deaf = setup.sockets().join(format!("{}.sock", std::process::id()));
    drop(std::os::unix::net::UnixListener::bind(&deaf).expect("bind"));

    // Recorded: the viewer sees the call whenever it joins.
    let one = setup.proxy(&["--record", "one.jsonl"]);
    let two = setup.proxy(&["--no-record"]);
    let several = setup.run(&["attach", "--json"]);
    let said = String::from_utf8_lossy(&several.stderr);
    assert_eq!(several.status.code(), Some(2), "{several:?}");
    for pid in [one.pid(), two.pid()] {
        assert!(said.contains(&pid.to_string()), "{said}");
    }
    assert!(
        !gone.exists() && !deaf.exists(),
        "stale sockets are removed"
    );

    two.stop();
    let only = setup.viewer(&["--json"]);
    let mut client = McpClient::new(&one.url).expect("client");
    client.handshake().await.expect("handshake");
    echo(&mut client, "to the only one").await;
    only.until("the only session's call", 1, answered_call);
    one.stop();
}

fn hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_viewer_that_does_not_keep_up_holds_a_bounded_feed_and_misses_nothing() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--record", "run.jsonl"]);
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    // 400 calls of 192 KiB: each carries the text twice in the recording (the request, the
    // SSE data; the response refers to the data), about 155 MiB, ten times what the feed may
    // hold for its view.
    let text = "x".repeat(192 << 10);
    let calls = 400;
    for _ in 0..calls {
        tokio::time::timeout(Duration::from_secs(10), echo(&mut client, &text))
            .await
            .expect("the proxy answers");
    }
    // The hub writes the recording behind the traffic: wait (bounded) for the last calls' lines.
    let size = || {
        std::fs::metadata(setup.dir.path().join("run.jsonl"))
            .expect("the recording")
            .len()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while size() <= 140 << 20 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recorded = size();
    assert!(recorded > 140 << 20, "{recorded} bytes recorded");

    // A late viewer whose stdout nobody reads yet: its view stops taking events once the pipe
    // is full, and the past read from the recording waits for it.
    let mut child = setup
        .mcpscope()
        .args(["attach", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn attach");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut peak = 0;
    while Instant::now() < deadline {
        peak = peak.max(hwm_kib(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("a late viewer not read from, over {recorded} bytes of past: VmHWM {peak} KiB");
    assert!(
        peak < 120 << 10,
        "the stalled viewer's peak RSS is {peak} KiB over a {recorded}-byte past"
    );
    assert_eq!(child.try_wait().expect("try_wait"), None, "it waits, alive");

    // Read now: every call of the past reaches the view.
    let viewer = Viewer {
        out: lines(child.stdout.take().expect("stdout")),
        child,
    };
    viewer.until("every call of the past", calls, answered_call);
    let peak = hwm_kib(pid);
    assert!(peak < 120 << 10, "the viewer's peak RSS is {peak} KiB");
    drop(viewer);
    proxy.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_joining_mid_traffic_sees_every_event_exactly_once() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--record", "run.jsonl"]);
    let url = proxy.url.clone();
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(0usize);
    let traffic = tokio::spawn(async move {
        let mut client = McpClient::new(&url).expect("client");
        client.handshake().await.expect("handshake");
        for n in 0..300 {
            echo(&mut client, &format!("call {n}")).await;
            let _ = done_tx.send(n + 1);
        }
    });
    done_rx.wait_for(|n| *n >= 100).await.expect("traffic");
    let viewer = setup.viewer(&["--json"]);
    tokio::time::timeout(PATIENCE, traffic)
        .await
        .expect("traffic in time")
        .expect("traffic task");
    let mut seen = viewer.until("all 300 calls", 300, answered_call);
    let (_, own) = proxy.stop();
    seen.extend(std::iter::from_fn(|| {
        viewer
            .out
            .recv_timeout(Duration::from_secs(1))
            .ok()
            .map(|l| serde_json::from_str::<Value>(&l).expect("a JSON line"))
    }));
    let own: Vec<Value> = own
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(own.len() > 600, "{} notices", own.len());
    assert_eq!(own, seen, "the viewer's notices are the proxy's own");
}

/// A stdio server in `sh`: answers every request line with an empty result for its id, except
/// a call of `hang`, which it never answers.
const STDIO_SERVER: &str = r#"while read -r line; do case "$line" in *hang*) exec sleep 1000;; esac; id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p'); printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id"; done"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_viewers_on_a_stdio_session_one_leaves_the_other_goes_on_and_sees_the_kill() {
    use std::io::Write as _;
    let setup = Setup::new().await;
    let mut shim = setup
        .mcpscope()
        .args(["stdio", "--record", "stdio.jsonl", "--name", "tools", "--"])
        .args(["sh", "-c", STDIO_SERVER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the shim");
    let mut stdin = shim.stdin.take().expect("stdin");
    let out = lines(shim.stdout.take().expect("stdout"));
    let mut call = |id: u32| {
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"t{id}\"}}}}\n"
        );
        stdin.write_all(request.as_bytes()).expect("write");
        stdin.flush().expect("flush");
        let answer = out.recv_timeout(PATIENCE).expect("the server answers");
        assert_eq!(
            answer,
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}")
        );
    };
    call(1);

    // Both join late (the call made before comes from the recording), by name.
    let socket = setup.sockets().join(format!("{}.sock", shim.id()));
    let deadline = Instant::now() + PATIENCE;
    while !socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(mode(&socket), 0o600);
    let listed = setup.run(&["attach", "--list"]);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listing.contains("stdio") && listing.contains("[tools]"),
        "{listing}"
    );
    let first = setup.viewer(&["tools", "--json"]);
    let second = setup.viewer(&["tools", "--json"]);
    let mut server_pid = 0;
    for viewer in [&first, &second] {
        let seen = viewer.until("the call made before joining", 1, answered_call);
        let started = seen.iter().find(|v| v["kind"] == "process_started");
        server_pid = started
            .and_then(|v| v["pid"].as_u64())
            .expect("process_started");
    }

    // One viewer leaves; the session and the other viewer go on.
    let mut first = first;
    let _ = first.child.kill();
    let _ = first.child.wait();
    call(2);
    call(3);
    second.until("the calls after the first viewer left", 2, answered_call);

    // A call the server never answers, then the server is killed: the viewer sees the call
    // orphaned by the signal, the shim exits as the server did, the viewer exits 0.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"hang\"}}\n")
        .expect("write");
    stdin.flush().expect("flush");
    second.until("the unanswered call", 1, |v| v["kind"] == "call_started");
    signal(server_pid as u32, "-KILL");
    let orphaned = second.until("the orphan", 1, |v| v["kind"] == "call_orphaned");
    let orphan = orphaned.last().expect("seen");
    assert_eq!(
        orphan["cause"], "server process killed by SIGKILL",
        "{orphan}"
    );
    assert_eq!(orphan["tool"], "hang");
    let status = wait_exit(&mut shim).expect("the shim exits");
    assert_eq!(status.code(), Some(128 + 9));
    drop(stdin);
    let mut second = second;
    let tail: Vec<Value> = std::iter::from_fn(|| {
        second
            .out
            .recv_timeout(Duration::from_secs(2))
            .ok()
            .map(|l| serde_json::from_str::<Value>(&l).expect("a JSON line"))
    })
    .collect();
    assert!(
        orphaned
            .iter()
            .chain(&tail)
            .any(|v| v["kind"] == "process_exited" && v["signal"] == 9),
        "{orphaned:#?} {tail:#?}"
    );
    let status = wait_exit(&mut second.child).expect("the viewer exits when the session ends");
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the socket is removed at exit");
    // Nothing of mcpscope's own reached the client: stdout held the three answers only.
    assert!(out.recv_timeout(Duration::from_millis(200)).is_err());
}

/// An upstream that answers every POST with the `Host` and `Authorization` it was sent, in a
/// tool result and in a header; returns its address and the request heads it saw.
fn echoing_upstream() -> (std::net::SocketAddr, Receiver<String>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for sock in listener.incoming().take(8) {
            let Ok(mut sock) = sock else { return };
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            let head = loop {
                let Ok(n) = sock.read(&mut buf) else {
                    break None;
                };
                if n == 0 {
                    break None;
                }
                raw.extend_from_slice(&buf[..n]);
                if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(String::from_utf8_lossy(&raw[..end]).to_string());
                }
            };
            let Some(head) = head else { continue };
            let header = |name: &str| {
                head.lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                    })
                    .unwrap_or_default()
            };
            let said = format!(
                "Host {:?} is not this machine; Authorization was {:?}",
                header("host"),
                header("authorization")
            );
            let body =
                json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":said}]}})
                    .to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-echo: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                header("host"),
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes());
            let _ = tx.send(head);
        }
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_password_is_sent_as_basic_auth_and_never_recorded_or_shown() {
    use std::io::Write;
    const PASSWORD: &str = "Hunter2-Passw0rd";
    let setup = Setup::new().await;
    let (upstream, heads) = echoing_upstream();
    let recording = setup.dir.path().join("echo.jsonl");
    let proxy = setup.proxy_to(
        &format!("http://alice:{PASSWORD}@{upstream}/mcp"),
        &["--record", recording.to_str().expect("path")],
    );
    let viewer = setup.viewer(&["--json"]);
    let addr = proxy
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
    // Attached once the listing counts the viewer.
    let deadline = Instant::now() + PATIENCE;
    while String::from_utf8_lossy(&setup.run(&["attach", "--list"]).stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3))
        .is_none_or(|n| n != "1")
    {
        assert!(Instant::now() < deadline, "the viewer never attached");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut sock = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        sock,
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut reply = String::new();
    sock.read_to_string(&mut reply).expect("reply");
    let head = heads
        .recv_timeout(PATIENCE)
        .expect("the upstream saw the request");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains(&format!("host: {upstream}\r\n")), "{head}");
    assert!(
        !head.contains(PASSWORD),
        "the Host holds no userinfo: {head}"
    );
    // base64("alice:Hunter2-Passw0rd")
    let basic = "Basic YWxpY2U6SHVudGVyMi1QYXNzdzByZA==";
    assert!(head.contains(&format!("authorization: {basic}")), "{head}");
    // The client gets the upstream's answer as it was.
    assert!(reply.contains(basic), "{reply}");
    let seen = viewer.until("the answered call", 1, answered_call);
    let (said, notices) = proxy.stop();
    let recorded = std::fs::read_to_string(&recording).expect("recording");
    let har = setup.run(&[
        "export",
        "--format",
        "har",
        recording.to_str().expect("path"),
    ]);
    assert!(
        har.status.success(),
        "{}",
        String::from_utf8_lossy(&har.stderr)
    );
    let har = String::from_utf8_lossy(&har.stdout).to_string();
    assert!(recorded.contains("[redacted]"), "{recorded}");
    for (what, text) in [
        ("recording", recorded),
        ("HAR", har),
        ("attach stream", format!("{seen:?}")),
        ("proxy output", format!("{said}{notices:?}")),
    ] {
        for secret in [PASSWORD, "YWxpY2U6SHVudGVyMi1QYXNzdzByZA"] {
            assert!(!text.contains(secret), "{what} holds {secret}: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_keys_in_a_body_that_does_not_parse_are_recorded_redacted() {
    use std::io::Write;
    let setup = Setup::new().await;
    let recording = setup.dir.path().join("invalid.jsonl");
    let proxy = setup.proxy(&["--record", recording.to_str().expect("path")]);
    let addr = proxy
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    // A brace missing: not JSON.
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"login","arguments":{"password":"PW-9f8e7d","access_token":"AT-1a2b3c", "user":"ann"}"#;
    let mut sock = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        sock,
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut reply = String::new();
    let _ = sock.read_to_string(&mut reply);
    proxy.stop();
    let recorded = std::fs::read_to_string(&recording).expect("recording");
    assert!(recorded.contains("invalid_message"), "{recorded}");
    assert!(recorded.contains(r#"\"user\":\"ann\""#), "{recorded}");
    for secret in ["PW-9f8e7d", "AT-1a2b3c"] {
        assert!(!recorded.contains(secret), "{secret} recorded: {recorded}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_command_line_secrets_are_redacted_for_viewers() {
    let setup = Setup::new().await;
    let mut shim = setup
        .mcpscope()
        .args(["stdio", "--no-record", "--"])
        .args([
            "sh",
            "-c",
            STDIO_SERVER,
            "--api-key=KEY-5566778899",
            "--token",
            "TOK-1122334455",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the shim");
    let socket = setup.sockets().join(format!("{}.sock", shim.id()));
    let deadline = Instant::now() + PATIENCE;
    while !socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let listed = setup.run(&["attach", "--list"]);
    let listing = String::from_utf8_lossy(&listed.stdout).to_string();
    let viewer = setup.viewer(&["--json"]);
    let mut hello = String::new();
    while let Ok(line) = viewer.out.recv_timeout(Duration::from_secs(2)) {
        hello.push_str(&line);
        hello.push('\n');
    }
    let _ = shim.kill();
    let _ = shim.wait();
    assert!(listing.contains("--api-key=[redacted]"), "{listing}");
    assert!(listing.contains("--token [redacted]"), "{listing}");
    for text in [&listing, &hello] {
        assert!(
            !text.contains("KEY-5566778899") && !text.contains("TOK-1122334455"),
            "{text}"
        );
    }
}

/// Reads one line from a raw viewer connection (bounded).
fn first_line(stream: &std::os::unix::net::UnixStream) -> Value {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).expect("a line");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// At most 32 viewers are connected at once: the 33rd is told why and disconnected (raw and
/// through `mcpscope attach`), the session goes on, and a viewer that leaves frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_past_the_cap_are_refused_and_a_place_frees_when_one_leaves() {
    let setup = Setup::new().await;
    let proxy = setup.proxy(&["--record", "run.jsonl"]);
    let socket = setup.sockets().join(format!("{}.sock", proxy.pid()));
    // The proxy publishes its session a moment after it listens: the first viewer waits for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let first = loop {
        match std::os::unix::net::UnixStream::connect(&socket) {
            Ok(stream) => break stream,
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{} never took a viewer: {e}",
                    socket.display()
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    };
    let mut attached = vec![first];
    attached.extend(
        (1..32).map(|_| std::os::unix::net::UnixStream::connect(&socket).expect("connect")),
    );
    for (n, stream) in attached.iter().enumerate() {
        let hello = first_line(stream);
        assert_eq!(hello["mcpscope_attach"], 1, "viewer {n}: {hello}");
    }

    let extra = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    let refused = first_line(&extra);
    let why = refused["end"]
        .as_str()
        .unwrap_or_else(|| panic!("{refused}"));
    assert!(
        why.contains("too many viewers") && why.contains("32"),
        "{why}"
    );
    let mut rest = Vec::new();
    (&extra).read_to_end(&mut rest).expect("closed");
    assert!(rest.is_empty(), "nothing after the refusal");

    let viewer = setup.run(&["attach", "--json"]);
    assert_eq!(viewer.status.code(), Some(1), "{viewer:?}");
    let said = String::from_utf8_lossy(&viewer.stderr);
    assert!(said.contains("too many viewers"), "{said}");

    // The session goes on.
    let mut client = McpClient::new(&proxy.url).expect("client");
    client.handshake().await.expect("handshake");
    echo(&mut client, "still served").await;

    // One leaves: a new viewer is taken.
    drop(attached.pop());
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stream = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
        let line = first_line(&stream);
        if line["mcpscope_attach"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no place freed: {line}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(attached);
    proxy.stop();
}
