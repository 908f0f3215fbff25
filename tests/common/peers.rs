//! Helpers for the interop tests: real MCP peers (the official SDKs, installed by
//! `scripts/setup-peers.sh`) and the mcpscope proxy, as child processes on 127.0.0.1 with
//! ephemeral ports. Every child is killed when its guard drops, and every wait is bounded.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's Python, or a failing test that says how to get it.
pub fn venv_python() -> PathBuf {
    let py = root().join(".venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/setup-peers.sh first (it installs the official MCP SDKs the \
         interop tests drive)",
        py.display()
    );
    py
}

/// `node` plus the TypeScript SDK under tests/peers/node, or a failing test that says how.
pub fn node_client_script() -> PathBuf {
    let sdk = root().join("tests/peers/node/node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.exists(),
        "{} is missing: run scripts/setup-peers.sh first (npm ci in tests/peers/node)",
        sdk.display()
    );
    root().join("tests/peers/node/client.mjs")
}

/// A child process killed (and reaped) on drop.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    /// Sends SIGTERM and waits up to `grace` for the exit; kills it after that.
    pub fn terminate(&mut self, grace: Duration) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lines read from a child's pipe by a background thread, kept for inspection.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    /// Reads `pipe` line by line on a background thread; the receiver gets each line too.
    pub fn spawn<R: Read + Send + 'static>(pipe: R) -> (Self, Receiver<String>) {
        let lines = Lines::default();
        let keep = lines.clone();
        let (tx, rx) = channel();
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut v) = keep.0.lock() {
                    v.push(line.clone());
                }
                let _ = tx.send(line);
            }
        });
        (lines, rx)
    }

    /// A copy of the lines so far.
    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// All lines so far, joined.
    pub fn text(&self) -> String {
        self.snapshot().join("\n")
    }
}

/// The first line from `rx` that `pick` accepts within `timeout`.
pub fn wait_line(
    rx: &Receiver<String>,
    timeout: Duration,
    mut pick: impl FnMut(&str) -> bool,
) -> Option<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if pick(&line) => return Some(line),
            Ok(_) => continue,
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// Which tool behaviour tests/peers/py_server.py runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerMode {
    Healthy,
    /// The first `poke` kills the server process mid-call.
    Dies,
}

/// A running tests/peers/py_server.py.
pub struct PyServer {
    pub proc: Proc,
    pub port: u16,
    pub stdout: Lines,
    pub stderr: Lines,
}

/// Waits (30 s at most) for a server child started with piped stdout and stderr to print
/// `READY <port>`; fails the test with both outputs when it does not.
pub fn wait_ready(mut child: Child, name: String) -> (Proc, u16, Lines, Lines) {
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let (stdout, rx) = Lines::spawn(out);
    let (stderr, _erx) = Lines::spawn(err);
    let ready = wait_line(&rx, Duration::from_secs(30), |l| l.starts_with("READY "));
    let Some(ready) = ready else {
        panic!(
            "{name} did not print READY within 30 s\nstdout:\n{}\nstderr:\n{}",
            stdout.text(),
            stderr.text()
        );
    };
    let port = ready
        .trim_start_matches("READY ")
        .trim()
        .parse()
        .expect("READY <port>");
    (Proc { child, name }, port, stdout, stderr)
}

impl PyServer {
    /// Starts it on an ephemeral port and waits for `READY <port>`.
    pub fn start(mode: ServerMode) -> PyServer {
        let py = venv_python();
        let script = root().join("tests/peers/py_server.py");
        let mode = match mode {
            ServerMode::Healthy => "healthy",
            ServerMode::Dies => "dies",
        };
        let child = Command::new(py)
            .arg(script)
            .arg("0")
            .args(["--mode", mode])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn py_server.py");
        let (proc, port, stdout, stderr) = wait_ready(child, format!("py_server --mode {mode}"));
        PyServer {
            proc,
            port,
            stdout,
            stderr,
        }
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// A running mcpscope proxy with `--json`.
pub struct Proxy {
    pub proc: Proc,
    /// `http://127.0.0.1:NNNNN` as printed on stderr.
    pub base: String,
    /// The JSON notices on stdout.
    pub stdout: Lines,
    pub stderr: Lines,
    rx: Receiver<String>,
}

impl Proxy {
    /// Starts `mcpscope --listen 127.0.0.1:0 --upstream UPSTREAM --json` plus `extra` arguments
    /// (`--no-record` unless `extra` names a recording).
    pub fn start(upstream: &str, extra: &[&str]) -> Proxy {
        let mut args: Vec<String> = vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--upstream".into(),
            upstream.into(),
            "--json".into(),
        ];
        if !extra
            .iter()
            .any(|a| *a == "--record" || *a == "--no-record")
        {
            args.push("--no-record".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
            .args(&args)
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcpscope");
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let proc = Proc {
            child,
            name: "mcpscope".into(),
        };
        let (stdout, rx) = Lines::spawn(out);
        let (stderr, erx) = Lines::spawn(err);
        const PREFIX: &str = "mcpscope: listening on ";
        let line = wait_line(&erx, Duration::from_secs(20), |l| l.contains(PREFIX));
        let Some(line) = line else {
            panic!(
                "mcpscope did not print `{PREFIX}…` on stderr within 20 s (args {args:?})\nstderr:\n{}\nstdout:\n{}",
                stderr.text(),
                stdout.text()
            );
        };
        // `mcpscope: listening on http://127.0.0.1:NNNNN (upstream …)`
        let base = line[line.find(PREFIX).map(|i| i + PREFIX.len()).unwrap_or(0)..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches('/')
            .to_string();
        Proxy {
            proc,
            base,
            stdout,
            stderr,
            rx,
        }
    }

    /// The proxy URL for a path (`/mcp`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Every notice so far, parsed (lines that are not JSON objects make the test fail).
    pub fn notices(&self) -> Vec<Value> {
        self.stdout
            .snapshot()
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap_or_else(|e| {
                    panic!("mcpscope --json printed a non-JSON line ({e}): {l}")
                })
            })
            .collect()
    }

    /// Waits until a notice satisfies `pick` (returns it), or `timeout` passes (returns None).
    pub fn wait_notice(
        &self,
        timeout: Duration,
        mut pick: impl FnMut(&Value) -> bool,
    ) -> Option<Value> {
        if let Some(v) = self.notices().into_iter().find(|v| pick(v)) {
            return Some(v);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    if let Ok(v) = serde_json::from_str::<Value>(&line)
                        && pick(&v)
                    {
                        return Some(v);
                    }
                }
                Err(_) => return self.notices().into_iter().find(|v| pick(v)),
            }
        }
    }

    /// Everything it printed, for a failure message.
    pub fn dump(&self) -> String {
        format!(
            "--- mcpscope stdout ---\n{}\n--- mcpscope stderr ---\n{}",
            self.stdout.text(),
            self.stderr.text()
        )
    }
}

/// What a peer client printed.
#[derive(Debug)]
pub struct ClientRun {
    pub json: Value,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs a command to completion within `timeout` (killed after it) and parses the last stdout line
/// as JSON.
pub fn run_json(mut cmd: Command, what: &str, timeout: Duration) -> ClientRun {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let mut proc = Proc {
        child,
        name: what.to_string(),
    };
    let (stdout, _rx) = Lines::spawn(out);
    let (stderr, _erx) = Lines::spawn(err);
    let status = loop {
        if let Ok(Some(status)) = proc.child.try_wait() {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = proc.child.kill();
            let _ = proc.child.wait();
            panic!(
                "{what} did not finish within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                stdout.text(),
                stderr.text()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    // Let the reader threads drain the pipes.
    let drain = Instant::now() + Duration::from_secs(2);
    while Instant::now() < drain && stdout.snapshot().iter().all(|l| l.trim().is_empty()) {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(20));
    assert!(
        status.success(),
        "{what} failed ({status})\nstdout:\n{}\nstderr:\n{}",
        stdout.text(),
        stderr.text()
    );
    let last = stdout
        .snapshot()
        .into_iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("{what} printed nothing\nstderr:\n{}", stderr.text()));
    let json = serde_json::from_str(&last)
        .unwrap_or_else(|e| panic!("{what} printed non-JSON ({e}): {last}"));
    ClientRun {
        json,
        stderr: stderr.text(),
        elapsed,
    }
}

/// Runs tests/peers/py_client.py.
pub fn py_client(url: &str, style: &str, scenario: &str) -> ClientRun {
    let mut cmd = Command::new(venv_python());
    cmd.arg(root().join("tests/peers/py_client.py"))
        .arg(url)
        .args(["--style", style, "--scenario", scenario, "--timeout", "20"]);
    run_json(
        cmd,
        &format!("py_client {style} {scenario} {url}"),
        Duration::from_secs(60),
    )
}

/// Runs tests/peers/node/client.mjs with the SDK request timeout set to `timeout_s`.
pub fn node_client(url: &str, scenario: &str, timeout_s: u32) -> ClientRun {
    let script = node_client_script();
    let mut cmd = Command::new("node");
    cmd.arg(script)
        .arg(url)
        .args(["--scenario", scenario, "--timeout", &timeout_s.to_string()])
        .current_dir(root().join("tests/peers/node"));
    run_json(
        cmd,
        &format!("node client {scenario} {url}"),
        Duration::from_secs(u64::from(timeout_s) + 40),
    )
}

/// Parses an RFC 3339 `t`.
pub fn ts(v: &Value) -> chrono::DateTime<chrono::Utc> {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("bad timestamp {s}: {e}"))
        .with_timezone(&chrono::Utc)
}

/// Notices of one kind.
pub fn of_kind<'a>(notices: &'a [Value], kind: &str) -> Vec<&'a Value> {
    notices.iter().filter(|n| n["kind"] == kind).collect()
}

/// A temporary file path under the target dir (removed by the caller's TempDir).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Whether a path exists and is non-empty.
pub fn non_empty(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false)
}

/// A running `mcpscope serve-test` (the binary) on an ephemeral loopback port.
pub struct ServeTest {
    pub proc: Proc,
    /// `http://127.0.0.1:NNNNN/mcp` as printed on stderr.
    pub url: String,
    pub stderr: Lines,
}

impl ServeTest {
    /// The server's socket address (from its URL).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or("")
            .parse()
            .expect("serve-test address")
    }

    /// Starts `mcpscope serve-test --listen 127.0.0.1:0` plus `extra` arguments.
    pub fn start(extra: &[&str]) -> ServeTest {
        Self::start_with(extra, |_| {})
    }

    /// [`ServeTest::start`], the command first set up by `setup` (its environment).
    pub fn start_with(extra: &[&str], setup: impl FnOnce(&mut Command)) -> ServeTest {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpscope"));
        command
            .args(["serve-test", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        setup(&mut command);
        let mut child = command.spawn().expect("spawn mcpscope serve-test");
        let err = child.stderr.take().expect("stderr");
        let proc = Proc {
            child,
            name: "serve-test".into(),
        };
        let (stderr, rx) = Lines::spawn(err);
        const PREFIX: &str = "listening on ";
        let line = wait_line(&rx, Duration::from_secs(20), |l| l.contains(PREFIX))
            .unwrap_or_else(|| panic!("serve-test printed no address\n{}", stderr.text()));
        let url = line[line.find(PREFIX).map(|i| i + PREFIX.len()).unwrap_or(0)..]
            .trim()
            .to_string();
        ServeTest { proc, url, stderr }
    }
}
impl PyServer {
    /// Starts tests/peers/py_sse_server.py (the legacy HTTP+SSE transport, 2024-11-05) on an
    /// ephemeral port with `extra` arguments and waits for `READY <port>`.
    pub fn start_sse(mode: ServerMode, extra: &[&str]) -> PyServer {
        let mode = match mode {
            ServerMode::Healthy => "healthy",
            ServerMode::Dies => "dies",
        };
        let child = Command::new(venv_python())
            .arg(root().join("tests/peers/py_sse_server.py"))
            .arg("0")
            .args(["--mode", mode])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn py_sse_server.py");
        let (proc, port, stdout, stderr) =
            wait_ready(child, format!("py_sse_server --mode {mode}"));
        PyServer {
            proc,
            port,
            stdout,
            stderr,
        }
    }

    /// `http://127.0.0.1:PORT/sse`, the legacy transport's SSE endpoint.
    pub fn sse_url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }
}

/// Runs tests/peers/py_client.py on the legacy HTTP+SSE transport (`--transport sse`).
pub fn py_sse_client(url: &str, scenario: &str) -> ClientRun {
    let mut cmd = Command::new(venv_python());
    cmd.arg(root().join("tests/peers/py_client.py"))
        .arg(url)
        .args([
            "--transport",
            "sse",
            "--scenario",
            scenario,
            "--timeout",
            "20",
        ]);
    run_json(
        cmd,
        &format!("py_client --transport sse {scenario} {url}"),
        Duration::from_secs(60),
    )
}

/// Reads one HTTP/1.1 request from a raw connection: its head (lower-cased) and as many body
/// bytes as its `Content-Length` announces; `None` when the peer closes first.
pub fn read_request(conn: &mut std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    use std::io::Read as _;
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    let body_at = loop {
        let Ok(n @ 1..) = conn.read(&mut buf) else {
            return None;
        };
        seen.extend_from_slice(&buf[..n]);
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&seen[..body_at]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while seen.len() < body_at + length {
        let Ok(n @ 1..) = conn.read(&mut buf) else {
            return None;
        };
        seen.extend_from_slice(&buf[..n]);
    }
    Some((head, seen[body_at..].to_vec()))
}
