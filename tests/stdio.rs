//! `mcpscope stdio`: the real binary in front of real child processes. Bytes pass unchanged
//! both ways, stderr passes and is captured, the exit code and signals pass, and a server
//! killed mid-call orphans the call with the signal as its cause (in the recording, in the
//! `--json` notices, and in `replay` and `check` of the recording). The SDK tests launch the
//! shim from the official Python SDK's stdio client.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::peers::{root, temp_dir, venv_python};
use mcpscope_engine::event::{Direction, EventKind};
use mcpscope_engine::model::{Model, OrphanCause, Verdict};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpscope");

/// The shim with a recording and a notice file in `dir`, running `command`.
fn shim(dir: &Path, command: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("stdio")
        .arg("--record")
        .arg(dir.join("rec.jsonl"))
        .arg("--json-file")
        .arg(dir.join("notices.jsonl"))
        .arg("--")
        .args(command)
        .env("MCPSCOPE_LOG", dir.join("mcpscope.log"));
    cmd
}

/// Waits for the child's exit, at most `limit` (then kills it and fails).
fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the shim did not exit within {limit:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Reads a pipe to its end on a thread.
fn drain(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// The shim running a command, stdout and (when piped) stderr read to their ends on threads,
/// stdin kept for the test when piped.
struct Shim {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    out: Option<thread::JoinHandle<Vec<u8>>>,
    err: Option<thread::JoinHandle<Vec<u8>>>,
}

/// How a [`Shim`] ended: its status and what it wrote.
struct Ended {
    status: std::process::ExitStatus,
    out: Vec<u8>,
    err: Vec<u8>,
}

impl Shim {
    /// Starts [`shim`] in `dir` on `command`, stdout piped and drained, stdin and stderr as
    /// given (a piped stderr is drained too).
    fn start(dir: &Path, command: &[&str], stdin: Stdio, stderr: Stdio) -> Self {
        let mut child = shim(dir, command)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take();
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Self {
            child,
            stdin,
            out,
            err,
        }
    }

    /// The shim's pid, as text for `kill`.
    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Sends the shim a signal (`TERM`, `INT`, …).
    fn signal(&self, name: &str) {
        kill(name, &self.pid());
    }

    /// Waits for the shim's exit (at most `limit`) and for what it wrote.
    fn ended(mut self, limit: Duration) -> Ended {
        drop(self.stdin.take());
        let status = wait_exit(&mut self.child, limit);
        let read = |pipe: Option<thread::JoinHandle<Vec<u8>>>| {
            pipe.map(|p| p.join().expect("pipe")).unwrap_or_default()
        };
        Ended {
            status,
            out: read(self.out.take()),
            err: read(self.err.take()),
        }
    }
}

/// The server process the model folded.
fn process_of(model: &Model) -> &mcpscope_engine::model::Process {
    model
        .streams
        .iter()
        .find_map(|s| s.process.as_ref())
        .expect("process")
}

/// Whether the server said hello on stderr (the SDK peers' echo tool logs it).
fn said_hello(process: &mcpscope_engine::model::Process) -> bool {
    process
        .stderr
        .iter()
        .any(|(_, l)| l == "echo: hello mcpscope")
}

/// Sends signal `name` (`TERM`, `KILL`, …) to process `pid`.
fn kill(name: &str, pid: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), pid])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{name} {pid}");
}

/// The methods of the messages recorded in direction `dir`, in order.
fn methods(events: &[EventKind], dir: Direction) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            EventKind::Message { dir: d, body, .. } if *d == dir => body["method"].as_str(),
            _ => None,
        })
        .collect()
}

/// The JSON notices written so far.
fn notices(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("notices.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits (bounded) for a notice.
fn wait_notice(dir: &Path, limit: Duration, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(n) = notices(dir).into_iter().find(&what) {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "notice not seen within {limit:?}: {:?}",
            notices(dir)
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn recording(dir: &Path) -> Vec<EventKind> {
    mcpscope_engine::record::read_file(&dir.join("rec.jsonl"))
        .expect("recording")
        .events
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

fn fold(dir: &Path) -> Model {
    let rec = mcpscope_engine::record::read_file(&dir.join("rec.jsonl")).expect("recording");
    Model::from_events(&rec.events).0
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn stdout_passes_byte_for_byte_and_a_split_line_is_one_message() {
    let dir = temp_dir();
    // A line split across writes, CRLF, blank and whitespace-only lines, a non-JSON line,
    // bytes that are not UTF-8, and a last line without a newline.
    let script = r#"printf '{"jsonrpc":"2.0","method":"notifications/a",'; sleep 0.2;
printf '"params":{}}\r\n\n  \t\nnot json\n\377\376 raw\n'; sleep 0.1;
printf '{"jsonrpc":"2.0","method":"notifications/b"}'"#;
    let expected: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\",\"params\":{}}\r\n\n  \t\nnot json\n\xff\xfe raw\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/b\"}";
    let command = sh(script);
    let Ended { status, out, err } =
        Shim::start(dir.path(), &args(&command), Stdio::null(), Stdio::piped())
            .ended(Duration::from_secs(20));
    assert!(
        status.success(),
        "{status:?} {}",
        String::from_utf8_lossy(&err)
    );
    assert_eq!(out, expected, "stdout is not byte-exact");
    assert!(
        err.is_empty(),
        "the shim wrote to stderr: {}",
        String::from_utf8_lossy(&err)
    );

    let events = recording(dir.path());
    assert_eq!(
        methods(&events, Direction::ServerToClient),
        ["notifications/a", "notifications/b"],
        "{events:#?}"
    );
    let invalid = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                EventKind::InvalidMessage {
                    dir: Direction::ServerToClient,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        invalid, 2,
        "`not json` and the raw bytes are invalid: {events:#?}"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        EventKind::StreamEnded { dir: Direction::ServerToClient, bytes, .. } if *bytes == expected.len() as u64
    )), "{events:#?}");
}

#[test]
fn stdin_passes_byte_for_byte_and_its_closing_is_recorded() {
    let dir = temp_dir();
    let copy = dir.path().join("stdin.bin");
    let command = sh(&format!("cat > '{}'", copy.display()));
    let mut shim = Shim::start(dir.path(), &args(&command), Stdio::piped(), Stdio::piped());
    let mut stdin = shim.stdin.take().expect("stdin");
    let pieces: [&[u8]; 4] = [
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth",
        b"od\":\"tools/call\",\"params\":{\"name\":\"x\"}}\r\n  \n",
        b"garbage \x00\xff\n",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
    ];
    for piece in pieces {
        stdin.write_all(piece).expect("write");
        stdin.flush().expect("flush");
        thread::sleep(Duration::from_millis(50));
    }
    drop(stdin);
    let ended = shim.ended(Duration::from_secs(20));
    assert!(ended.status.success(), "{:?}", ended.status);
    assert!(ended.out.is_empty());
    assert_eq!(std::fs::read(&copy).expect("copy"), pieces.concat());

    let events = recording(dir.path());
    assert_eq!(
        methods(&events, Direction::ClientToServer),
        ["tools/call", "notifications/initialized"]
    );
    assert!(events.iter().any(|e| matches!(
        e,
        EventKind::StreamEnded { dir: Direction::ClientToServer, leg: mcpscope_engine::event::Leg::Client, bytes, .. }
            if *bytes == pieces.concat().len() as u64
    )), "{events:#?}");
    assert!(
        notices(dir.path())
            .iter()
            .any(|n| n["kind"] == "stdin_closed")
    );
    // The server exited 0 with the call unanswered: the call is orphaned by that exit.
    let orphan = wait_notice(dir.path(), Duration::from_secs(5), |n| {
        n["kind"] == "call_orphaned"
    });
    assert_eq!(orphan["cause"], "server exited with code 0", "{orphan}");
}

#[test]
fn exit_code_and_stderr_pass_and_stderr_is_captured_per_line() {
    let dir = temp_dir();
    let long = "x".repeat(10_000);
    let command = sh(&format!(
        "echo first >&2; printf 'sec' >&2; sleep 0.1; printf 'ond\\n{long}\\nlast\\nAuthorization: Bearer s3cr3t' >&2; exit 3"
    ));
    let output = shim(dir.path(), &args(&command))
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!("first\nsecond\n{long}\nlast\nAuthorization: Bearer s3cr3t"),
        "stderr passes unchanged"
    );
    let lines: Vec<String> = recording(dir.path())
        .into_iter()
        .filter_map(|e| match e {
            EventKind::StderrLine { line, .. } => Some(line),
            _ => None,
        })
        .collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(
        lines[4], "Authorization: [redacted]",
        "recorded without the secret"
    );
    assert_eq!(lines[..2], ["first", "second"]);
    assert!(
        lines[2].ends_with('…') && lines[2].len() < 9_000,
        "a long line is cut"
    );
    assert_eq!(lines[3], "last");
    let model = fold(dir.path());
    let process = process_of(&model);
    assert_eq!(process.exit.map(|e| e.code), Some(Some(3)));
    assert_eq!(process.stderr.len(), 5);
    // The TUI's notifications and logs view (`L`) lists them as the session's log.
    let session = model
        .sessions
        .iter()
        .position(|s| {
            s.id.as_deref()
                .is_some_and(|id| id.starts_with("stdio:sh:"))
        })
        .expect("session");
    let logs = mcpscope_tui::view::notifications::entries(&model, session);
    let texts: Vec<&str> = logs.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts[..2], ["first", "second"], "{logs:?}");
    assert!(logs.iter().all(|e| e.method == "← stderr"));
}

#[test]
fn json_notices_go_to_stderr_never_stdout() {
    let command =
        sh("echo '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}'; echo oops >&2; exit 5");
    let output = Command::new(BIN)
        .args(["stdio", "--no-record", "--json", "--"])
        .args(&command)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(5));
    assert_eq!(
        output.stdout,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let notices: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds: Vec<&str> = notices.iter().filter_map(|n| n["kind"].as_str()).collect();
    assert!(kinds.contains(&"process_started"), "{stderr}");
    let exited = notices
        .iter()
        .find(|n| n["kind"] == "process_exited")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(exited["code"], 5);
    assert!(stderr.lines().any(|l| l == "oops"), "{stderr}");
}

#[test]
fn a_command_that_does_not_exist_exits_127() {
    let dir = temp_dir();
    let output = shim(dir.path(), &["/nonexistent/mcp-server"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(127));
    assert!(output.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot start /nonexistent/mcp-server")
    );
}

#[test]
fn sigterm_to_the_shim_reaches_the_server() {
    let dir = temp_dir();
    let command = sh("trap 'echo got-term >&2; exit 42' TERM; while :; do sleep 0.05; done");
    let shim = Shim::start(dir.path(), &args(&command), Stdio::piped(), Stdio::piped());
    wait_notice(dir.path(), Duration::from_secs(10), |n| {
        n["kind"] == "process_started"
    });
    thread::sleep(Duration::from_millis(200));
    shim.signal("TERM");
    let ended = shim.ended(Duration::from_secs(10));
    assert_eq!(ended.status.code(), Some(42), "{:?}", ended.status);
    assert!(String::from_utf8_lossy(&ended.err).contains("got-term"));
}

/// Sends a tools/call to a server that never answers, kills the server with SIGKILL, and
/// checks everything that says so.
#[test]
fn a_server_killed_mid_call_orphans_it_with_the_signal_as_cause() {
    let dir = temp_dir();
    let command = sh("while read line; do echo \"got $line\" >&2; done");
    let mut shim = Shim::start(dir.path(), &args(&command), Stdio::piped(), Stdio::piped());
    let mut stdin = shim.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"hang\"}}\n")
        .expect("write");
    stdin.flush().expect("flush");
    let started = wait_notice(dir.path(), Duration::from_secs(10), |n| {
        n["kind"] == "process_started"
    });
    wait_notice(dir.path(), Duration::from_secs(10), |n| {
        n["kind"] == "call_started"
    });
    kill("KILL", &started["pid"].as_u64().expect("pid").to_string());
    let ended = shim.ended(Duration::from_secs(10));
    assert_eq!(ended.status.code(), Some(128 + 9));
    // The client gets EOF on the shim's stdout.
    assert!(ended.out.is_empty());
    drop(stdin);

    let orphan = wait_notice(dir.path(), Duration::from_secs(5), |n| {
        n["kind"] == "call_orphaned"
    });
    assert_eq!(
        orphan["cause"], "server process killed by SIGKILL",
        "{orphan}"
    );
    assert_eq!(orphan["request_id"], 7);
    assert_eq!(orphan["tool"], "hang");
    let exited = wait_notice(dir.path(), Duration::from_secs(5), |n| {
        n["kind"] == "process_exited"
    });
    assert_eq!(exited["signal"], 9);
    assert_eq!(exited["pending"], 1);

    let model = fold(dir.path());
    let call = model
        .calls
        .iter()
        .find(|c| c.method == "tools/call")
        .expect("call");
    assert!(
        matches!(
            call.verdict,
            Verdict::Orphaned {
                cause: OrphanCause::ProcessKilled { signal: 9 },
                ..
            }
        ),
        "{:?}",
        call.verdict
    );
    let events = recording(dir.path());
    assert!(events.iter().any(|e| matches!(
        e,
        EventKind::ProcessExited {
            signal: Some(9),
            ..
        }
    )));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EventKind::StderrLine { line, .. } if line.starts_with("got {")))
    );

    // The recording replays and checks like any other.
    let rec = dir.path().join("rec.jsonl");
    let replay = Command::new(BIN)
        .args(["replay", "--json"])
        .arg(&rec)
        .output()
        .expect("replay");
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let replayed = String::from_utf8_lossy(&replay.stdout);
    assert!(
        replayed
            .lines()
            .any(|l| l.contains("\"call_orphaned\"")
                && l.contains("server process killed by SIGKILL")),
        "{replayed}"
    );
    let headless = Command::new(BIN)
        .args(["replay", "--headless"])
        .arg(&rec)
        .output()
        .expect("replay");
    assert!(String::from_utf8_lossy(&headless.stdout).contains("KILLED by SIGKILL"));
    let check = Command::new(BIN)
        .arg("check")
        .arg(&rec)
        .output()
        .expect("check");
    assert_eq!(
        check.status.code(),
        Some(1),
        "check fails on an orphaned call"
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("server process killed by SIGKILL"));
    // The TUI shows the process's stream, the orphaned call and why.
    let now = model.last_t.expect("events");
    let mut app = mcpscope_tui::screen::proxy_view(None);
    let screen = mcpscope_tui::screen::text(&mcpscope_tui::render_to_buffer(
        &mut app, &model, now, 200, 40,
    ));
    assert!(screen.contains("STDIO#1"), "{screen}");
    assert!(screen.contains("orphaned"), "{screen}");
    let export = Command::new(BIN)
        .args(["export", "--format", "markdown"])
        .arg(&rec)
        .output()
        .expect("export");
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
}

/// The Python SDK's stdio client and server, directly and through the shim.
fn py_stdio(style: &str, scenario: &str, command: &[String]) -> Value {
    let mut cmd = Command::new(venv_python());
    cmd.arg(root().join("tests/peers/py_stdio_client.py"))
        .args([
            "--style",
            style,
            "--scenario",
            scenario,
            "--timeout",
            "20",
            "--",
        ])
        .args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("python client");
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let out = out.join().expect("stdout");
    let err = String::from_utf8_lossy(&err.join().expect("stderr")).into_owned();
    assert!(status.success(), "the client failed: {err}");
    serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}\n{err}", String::from_utf8_lossy(&out)))
}

fn py_server() -> Vec<String> {
    vec![
        venv_python().display().to_string(),
        root()
            .join("tests/peers/py_stdio_server.py")
            .display()
            .to_string(),
    ]
}

fn through_shim(dir: &Path, server: &[String]) -> Vec<String> {
    let mut command: Vec<String> = vec![
        BIN.into(),
        "stdio".into(),
        "--record".into(),
        dir.join("rec.jsonl").display().to_string(),
        "--json-file".into(),
        dir.join("notices.jsonl").display().to_string(),
        "--".into(),
    ];
    command.extend(server.iter().cloned());
    command
}

fn python_sdk_through_the_shim(style: &str) {
    let dir = temp_dir();
    let direct = py_stdio(style, "healthy", &py_server());
    let via = py_stdio(style, "healthy", &through_shim(dir.path(), &py_server()));
    assert_eq!(
        direct, via,
        "the {style} client's view differs through the shim"
    );
    assert_eq!(via["echo"], "hello mcpscope");
    assert_eq!(via["progress"], 5);
    for tool in ["echo", "slow"] {
        wait_notice(dir.path(), Duration::from_secs(10), |n| {
            n["kind"] == "call_answered" && n["tool"] == tool
        });
    }
    let exited = wait_notice(dir.path(), Duration::from_secs(10), |n| {
        n["kind"] == "process_exited"
    });
    assert_eq!(exited["code"], 0, "{exited}");
    let all = notices(dir.path());
    assert!(
        !all.iter()
            .any(|n| n["kind"] == "call_orphaned" || n["kind"] == "invalid_message"),
        "{all:#?}"
    );
    let model = fold(dir.path());
    assert!(
        model.calls.iter().all(|c| c.verdict == Verdict::Answered),
        "{:#?}",
        model
            .calls
            .iter()
            .map(|c| (&c.method, &c.verdict))
            .collect::<Vec<_>>()
    );
    let session = model
        .sessions
        .iter()
        .find(|s| {
            s.id.as_deref()
                .is_some_and(|id| id.starts_with("stdio:python:"))
        })
        .expect("session");
    assert_eq!(session.revision.as_deref(), via["protocol"].as_str());
    let process = process_of(&model);
    assert!(said_hello(process), "{:?}", process.stderr);
    assert!(process.stdin_closed.is_some());
}

#[test]
#[ignore = "needs .venv (official Python MCP SDK): run scripts/test.sh"]
fn python_sdk_stdio_client_default_through_the_shim() {
    python_sdk_through_the_shim("default");
}

#[test]
#[ignore = "needs .venv (official Python MCP SDK): run scripts/test.sh"]
fn python_sdk_stdio_client_legacy_through_the_shim() {
    python_sdk_through_the_shim("legacy");
}

#[test]
#[ignore = "needs .venv (official Python MCP SDK): run scripts/test.sh"]
fn python_sdk_server_killed_mid_call_through_the_shim() {
    let dir = temp_dir();
    let path: PathBuf = dir.path().to_path_buf();
    let killer = thread::spawn(move || {
        let started = wait_notice(&path, Duration::from_secs(30), |n| {
            n["kind"] == "process_started"
        });
        wait_notice(&path, Duration::from_secs(30), |n| {
            n["kind"] == "call_started" && n["tool"] == "hang"
        });
        let pid = started["pid"].as_u64().expect("pid").to_string();
        Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .expect("kill")
    });
    let via = py_stdio("default", "hang", &through_shim(dir.path(), &py_server()));
    assert!(killer.join().expect("killer").success());
    assert_eq!(
        via["outcome"], "error",
        "the client is told, not left hanging: {via}"
    );
    assert!(
        via["elapsed_ms"].as_u64().is_some_and(|ms| ms < 15_000),
        "{via}"
    );
    let orphan = wait_notice(dir.path(), Duration::from_secs(10), |n| {
        n["kind"] == "call_orphaned"
    });
    assert_eq!(orphan["tool"], "hang");
    assert_eq!(orphan["cause"], "server process killed by SIGKILL");
    let model = fold(dir.path());
    let call = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("hang"))
        .expect("call");
    assert!(matches!(
        call.verdict,
        Verdict::Orphaned {
            cause: OrphanCause::ProcessKilled { signal: 9 },
            ..
        }
    ));
}

/// One stdio client of the SDK matrix: the command that runs it against `server`.
fn sdk_client(client: &str, server: &[String]) -> Command {
    let mut cmd = match client {
        "node" => {
            let mut cmd = Command::new("node");
            cmd.arg(root().join("tests/peers/node/stdio_client.mjs"));
            cmd
        }
        style => {
            let mut cmd = Command::new(venv_python());
            cmd.arg(root().join("tests/peers/py_stdio_client.py"))
                .args(["--style", style, "--scenario", "healthy"]);
            cmd
        }
    };
    cmd.arg("--").args(server);
    cmd
}

fn sdk_run(client: &str, server: &[String]) -> Value {
    let mut child = sdk_client(client, server)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client");
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let out = out.join().expect("stdout");
    let err = String::from_utf8_lossy(&err.join().expect("stderr")).into_owned();
    assert!(status.success(), "the {client} client failed: {err}");
    serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}\n{err}", String::from_utf8_lossy(&out)))
}

/// The official SDKs' stdio clients and servers, Python and TypeScript, paired every way, each
/// pair directly and through the shim: the same results, every call answered, nothing invalid.
#[test]
#[ignore = "needs .venv and tests/peers/node (official MCP SDKs): run scripts/test.sh"]
fn sdk_matrix_over_stdio() {
    assert!(
        root()
            .join("tests/peers/node/node_modules/@modelcontextprotocol/sdk")
            .exists(),
        "run scripts/setup-peers.sh first"
    );
    let node_server = vec![
        "node".to_string(),
        root()
            .join("tests/peers/node/stdio_server.mjs")
            .display()
            .to_string(),
    ];
    let pairs: [(&str, &str, &[String]); 4] = [
        ("node", "python", &py_server()),
        ("node", "node", &node_server),
        ("default", "node", &node_server),
        ("legacy", "node", &node_server),
    ];
    for (client, server_name, server) in pairs {
        let dir = temp_dir();
        let direct = sdk_run(client, server);
        let via = sdk_run(client, &through_shim(dir.path(), server));
        let pair = format!("{client} client × {server_name} server");
        assert_eq!(direct, via, "{pair}: differs through the shim");
        assert_eq!(via["echo"], "hello mcpscope", "{pair}: {via}");
        assert_eq!(via["progress"], 5, "{pair}: {via}");
        wait_notice(dir.path(), Duration::from_secs(10), |n| {
            n["kind"] == "process_exited"
        });
        let all = notices(dir.path());
        assert!(
            !all.iter()
                .any(|n| ["call_orphaned", "invalid_message", "call_failed"]
                    .contains(&n["kind"].as_str().unwrap_or(""))),
            "{pair}: {all:#?}"
        );
        let model = fold(dir.path());
        let calls: Vec<_> = model
            .calls
            .iter()
            .filter(|c| c.method == "tools/call")
            .collect();
        assert_eq!(calls.len(), 2, "{pair}");
        assert!(
            calls.iter().all(|c| c.verdict == Verdict::Answered),
            "{pair}"
        );
        let process = process_of(&model);
        assert!(said_hello(process), "{pair}: {:?}", process.stderr);
    }
}

/// The size of the recording in `dir`.
fn recording_size(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("rec.jsonl"))
        .expect("recording")
        .len()
}

#[test]
fn a_client_that_closes_its_stdout_ends_the_server_by_sigpipe() {
    let dir = temp_dir();
    let mut child = shim(dir.path(), &["yes"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = child.stdout.take().expect("stdout");
    let mut first = [0u8; 10];
    out.read_exact(&mut first)
        .expect("the server's first bytes");
    assert_eq!(&first, b"y\ny\ny\ny\ny\n");
    drop(out);
    let status = wait_exit(&mut child, Duration::from_secs(5));
    assert_eq!(
        status.code(),
        Some(128 + 13),
        "the server dies of SIGPIPE: {status:?}"
    );
    let size = recording_size(dir.path());
    assert!(size < 256 * 1024, "the recording is {size} bytes");
}

#[test]
fn repeated_invalid_lines_are_counted_and_sampled_not_recorded_one_by_one() {
    let dir = temp_dir();
    let ended = Shim::start(
        dir.path(),
        &["seq", "1", "1000000"],
        Stdio::piped(),
        Stdio::null(),
    )
    .ended(Duration::from_secs(60));
    assert_eq!(ended.status.code(), Some(0));
    assert_eq!(ended.out.len(), 6_888_896, "every byte passes");
    let size = recording_size(dir.path());
    assert!(size < 256 * 1024, "the recording is {size} bytes");
    let events = recording(dir.path());
    let invalid = events
        .iter()
        .filter(|e| matches!(e, EventKind::InvalidMessage { .. }))
        .count();
    assert!(
        (16..=64).contains(&invalid),
        "{invalid} invalid lines recorded"
    );
    let counted = events.iter().any(|e| {
        matches!(e, EventKind::Note { text, .. } if text.contains("1000000 invalid lines in a row"))
    });
    assert!(counted, "the count is recorded");
}

/// Whether a process is gone (or a zombie, only waiting to be reaped).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (bounded) until the process is gone.
fn wait_gone(pid: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

/// Waits (bounded) for a file to hold a pid.
fn read_pid(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.ends_with('\n') {
            return text.trim().to_string();
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_reaches_every_process_of_a_server_started_through_a_wrapper() {
    let dir = temp_dir();
    let pidfile = dir.path().join("server.pid");
    // bash waits for its foreground child before acting on SIGINT: only a signal to the whole
    // group ends the server it started.
    let inner = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let command = vec![
        "bash".to_string(),
        "-c".to_string(),
        format!("bash -c '{inner}'; true"),
    ];
    let shim = Shim::start(dir.path(), &args(&command), Stdio::piped(), Stdio::null());
    let server = read_pid(&pidfile);
    shim.signal("INT");
    let gone = wait_gone(&server, Duration::from_secs(3));
    let ended = shim.ended(Duration::from_secs(5));
    assert!(gone, "the server the wrapper started outlived Ctrl-C");
    assert!(!ended.status.success(), "{:?}", ended.status);
}

#[test]
fn a_server_that_ignores_signals_dies_with_a_killed_shim() {
    let dir = temp_dir();
    let pidfile = dir.path().join("server.pid");
    let command = sh(&format!(
        "trap '' TERM INT HUP; echo $$ > {}; while :; do sleep 0.05; done",
        pidfile.display()
    ));
    let mut shim = Shim::start(dir.path(), &args(&command), Stdio::piped(), Stdio::null());
    let server = read_pid(&pidfile);
    shim.child.kill().expect("SIGKILL the shim");
    let _ = shim.child.wait();
    let ended = wait_gone(&server, Duration::from_secs(3));
    if !ended {
        let _ = Command::new("kill").args(["-KILL", &server]).status();
    }
    assert!(ended, "the server outlived the shim");
}

/// `mcpscope stdio -- echo hi` with `env`, bounded: its exit status and stdout.
fn echo_hi_with(env: &[(&str, &Path)], unset_log: bool) -> (std::process::ExitStatus, Vec<u8>) {
    let mut cmd = Command::new(BIN);
    cmd.args(["stdio", "--no-record", "--no-publish", "--", "echo", "hi"]);
    if unset_log {
        cmd.env_remove("MCPSCOPE_LOG");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = drain(child.stdout.take().expect("stdout"));
    let status = wait_exit(&mut child, Duration::from_secs(5));
    (status, out.join().expect("stdout"))
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success());
}

#[test]
fn a_fifo_planted_at_the_log_path_does_not_hang_start() {
    // At the old shared default ($TMPDIR/mcpscope.log), with the log's default left to us.
    let dir = temp_dir();
    let tmp = dir.path().join("tmp");
    let run = dir.path().join("run");
    std::fs::create_dir(&tmp).expect("tmp");
    std::fs::create_dir(&run).expect("run");
    mkfifo(&tmp.join("mcpscope.log"));
    let (status, out) = echo_hi_with(&[("TMPDIR", &tmp), ("XDG_RUNTIME_DIR", &run)], true);
    assert!(status.success(), "{status:?}");
    assert_eq!(out, b"hi\n");
    assert!(
        run.join("mcpscope/mcpscope.log").is_file(),
        "the default log is the user's own"
    );
    // At the path MCPSCOPE_LOG names: not logged to, and start does not wait for a reader.
    let fifo = dir.path().join("named.log");
    mkfifo(&fifo);
    let (status, out) = echo_hi_with(&[("MCPSCOPE_LOG", &fifo)], false);
    assert!(status.success(), "{status:?}");
    assert_eq!(out, b"hi\n");
}
