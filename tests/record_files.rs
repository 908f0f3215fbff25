//! Recording and log files as the real binary creates them: owner-only, never through a
//! symbolic link, never over an existing file unless asked, unique default names; and a
//! password in the upstream URL never printed or recorded.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary, headless, in front of an upstream nobody listens on.
fn mcpscope(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpscope"));
    cmd.current_dir(dir)
        .env("MCPSCOPE_LOG", dir.join("mcpscope.log"))
        .args(["--listen", "127.0.0.1:0", "--headless"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Reads stderr until the `recording to` line; returns it and every line before it.
fn wait_for_recording(child: &mut Child) -> (PathBuf, String) {
    let stderr = child.stderr.take().expect("stderr");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("stderr line");
        seen.push_str(&line);
        seen.push('\n');
        if let Some(path) = line.strip_prefix("mcpscope: recording to ") {
            return (PathBuf::from(path.trim()), seen);
        }
        assert!(Instant::now() < deadline, "no recording line in {seen}");
    }
    panic!("mcpscope exited before recording: {seen}");
}

/// The binary recording `run.jsonl` in `dir` in front of `upstream`, once it listens: the
/// child, its URL, and its whole stderr when it exits.
fn record_in_front_of(
    dir: &Path,
    upstream: &str,
) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut child = mcpscope(dir, &["--upstream", upstream, "--record", "run.jsonl"])
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line
                .split("listening on ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
            {
                let _ = tx.send(url.to_string());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let listen = rx.recv_timeout(Duration::from_secs(20)).expect("listening");
    (child, listen, lines)
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_symlink_is_refused_and_its_target_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, "keep me").expect("write");
    let link = dir.path().join("run.jsonl");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    for extra in [&[][..], &["--overwrite"][..]] {
        let mut args = vec![
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--record",
            "run.jsonl",
        ];
        args.extend_from_slice(extra);
        let out = mcpscope(dir.path(), &args).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(stderr.contains("symbolic link"), "{extra:?}: {stderr}");
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "keep me");
    }
}

#[test]
fn an_existing_file_needs_overwrite_and_ends_up_owner_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, "old").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = mcpscope(
        dir.path(),
        &[
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--record",
            "run.jsonl",
        ],
    )
    .output()
    .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--overwrite"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&path).expect("file"), "old");

    let mut child = mcpscope(
        dir.path(),
        &[
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--record",
            "run.jsonl",
            "--overwrite",
        ],
    )
    .spawn()
    .expect("spawn");
    let (recorded, _) = wait_for_recording(&mut child);
    assert_eq!(recorded, PathBuf::from("run.jsonl"));
    assert_eq!(mode(&path), 0o600);
    stop(child);
    let text = std::fs::read_to_string(&path).expect("recording");
    assert!(
        text.starts_with("{\"format\":\"mcpscope-recording\""),
        "{text}"
    );
    assert_eq!(mode(&dir.path().join("mcpscope.log")), 0o600);
}

#[test]
fn two_proxies_started_together_get_two_files_in_a_private_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = || {
        mcpscope(dir.path(), &["--upstream", "http://127.0.0.1:1/mcp"])
            .spawn()
            .expect("spawn")
    };
    let (mut a, mut b) = (start(), start());
    let (path_a, _) = wait_for_recording(&mut a);
    let (path_b, _) = wait_for_recording(&mut b);
    assert_ne!(path_a, path_b);
    for path in [&path_a, &path_b] {
        let full = dir.path().join(path);
        assert_eq!(mode(&full), 0o600, "{}", full.display());
        assert!(path.starts_with("recordings"), "{}", path.display());
    }
    assert_eq!(mode(&dir.path().join("recordings")), 0o700);
    stop(a);
    stop(b);
}

#[test]
fn a_password_in_the_upstream_url_is_never_printed_or_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    for redact in [&[][..], &["--no-redact"][..]] {
        let path = dir.path().join(format!("run{}.jsonl", redact.len()));
        let record = path.to_string_lossy().into_owned();
        let mut args = vec![
            "--upstream",
            "http://user:PW-LEAK@127.0.0.1:1/mcp",
            "--record",
            &record,
        ];
        args.extend_from_slice(redact);
        let mut child = mcpscope(dir.path(), &args).spawn().expect("spawn");
        let (_, stderr) = wait_for_recording(&mut child);
        assert!(stderr.contains("[redacted]@127.0.0.1:1"), "{stderr}");
        stop(child);
        assert!(!stderr.contains("PW-LEAK"), "{stderr}");
        let text = std::fs::read_to_string(&path).expect("recording");
        assert!(!text.contains("PW-LEAK"), "{redact:?}: {text}");
        assert!(text.contains("proxy_started"), "{text}");
    }
    let out = mcpscope(dir.path(), &["--upstream", "ftp://user:PW-LEAK@host/mcp"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("PW-LEAK"), "{stderr}");
}

/// After `kill -9`, the recording holds every event of the exchanges the client had finished
/// once the proxy has been idle for a moment (the hub flushes after every burst of 0.5 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_nothing_the_client_had_seen_once_idle() {
    use mcpscope_testserver as testserver;
    use mcpscope_testserver::client::McpClient;

    let dir = tempfile::tempdir().expect("tempdir");
    let server = testserver::start(testserver::Options::default())
        .await
        .expect("test server");
    let upstream = server.url();
    let (mut child, listen, _stderr) = record_in_front_of(dir.path(), &upstream);
    let mut client = McpClient::new(&format!("{listen}/mcp")).expect("client");
    client.handshake().await.expect("handshake");
    const CALLS: usize = 30;
    for i in 0..CALLS {
        let answer = client
            .call("echo", serde_json::json!({"text": format!("n{i}")}), false)
            .await
            .expect("call");
        assert!(answer.result().is_some(), "call {i}: {:?}", answer.outcome);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    child.kill().expect("kill -9");
    let _ = child.wait();
    let text = std::fs::read_to_string(dir.path().join("run.jsonl")).expect("recording");
    let events: Vec<serde_json::Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("whole lines only"))
        .collect();
    // Answers came as SSE: their messages refer to the events' data, so read them through the
    // reader.
    let recording =
        mcpscope_engine::record::read_file(&dir.path().join("run.jsonl")).expect("readable");
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    let answered = recording
        .events
        .iter()
        .filter(|e| match &e.kind {
            mcpscope_engine::event::EventKind::Message { dir, body, .. } => {
                *dir == mcpscope_engine::event::Direction::ServerToClient
                    && body["result"]["content"][0]["text"]
                        .as_str()
                        .is_some_and(|t| t.starts_with('n'))
            }
            _ => false,
        })
        .count();
    assert_eq!(answered, CALLS, "every answer the client saw is recorded");
    let opened = events
        .iter()
        .filter(|e| e["kind"] == "stream_opened")
        .count();
    let ended = events
        .iter()
        .filter(|e| e["kind"] == "stream_ended" && e["dir"] == "server_to_client")
        .count();
    assert_eq!(
        opened, ended,
        "every finished exchange is recorded as ended"
    );
    server.shutdown().await;
}

/// On SIGTERM with an SSE stream open (and a request whose response never came), the proxy
/// ends every open exchange (`cancelled`, client leg, detail `shutdown`), the file holds every
/// event it saw, and the binary says so on stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_every_open_exchange_and_completes_the_recording() {
    use mcpscope_testserver as testserver;
    use mcpscope_testserver::client::McpClient;
    use tokio::io::AsyncWriteExt;

    let dir = tempfile::tempdir().expect("tempdir");
    let server = testserver::start(testserver::Options::default())
        .await
        .expect("test server");
    let upstream = server.url();
    let (child, listen, lines) = record_in_front_of(dir.path(), &upstream);
    let mut client = McpClient::new(&format!("{listen}/mcp")).expect("client");
    client.handshake().await.expect("handshake");
    let session = client.session().expect("session").to_string();
    let answer = client
        .call("echo", serde_json::json!({"text": "before"}), false)
        .await
        .expect("call");
    assert!(answer.result().is_some());
    // A standalone SSE stream, open when the signal comes.
    let addr = listen.trim_start_matches("http://").to_string();
    let mut get = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let request = format!(
        "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n\r\n"
    );
    get.write_all(request.as_bytes()).await.expect("write");
    // A request whose body never finishes.
    let mut post = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nmcp-session-id: {session}\r\ncontent-length: 100\r\n\r\n{{\"jsonrpc\""
    );
    post.write_all(head.as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(500)).await;

    stop(child);
    let said = lines.join().expect("stderr reader");
    let text = std::fs::read_to_string(dir.path().join("run.jsonl")).expect("recording");
    let events: Vec<serde_json::Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("whole lines only"))
        .collect();
    let path = dir.path().join("run.jsonl");
    let expected = format!("mcpscope: recorded {n} of {n} events to", n = events.len());
    assert!(said.contains(&expected), "{expected:?} in {said}");
    assert!(said.contains(&path.file_name().unwrap().to_string_lossy().to_string()));
    let opened: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "stream_opened")
        .filter_map(|e| e["stream"].as_u64())
        .collect();
    for stream in &opened {
        let ends: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| {
                e["kind"] == "stream_ended"
                    && e["dir"] == "server_to_client"
                    && e["stream"].as_u64() == Some(*stream)
            })
            .collect();
        assert_eq!(ends.len(), 1, "stream #{stream}: {ends:?}");
    }
    let at_shutdown: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "stream_ended" && e["detail"] == "shutdown")
        .collect();
    assert_eq!(
        at_shutdown.len(),
        2,
        "the GET and the unfinished POST: {at_shutdown:?}"
    );
    for end in at_shutdown {
        assert_eq!(end["how"], "cancelled");
        assert_eq!(end["leg"], "client");
    }
    drop((get, post));
    server.shutdown().await;
}

/// With `--json`, what the shutdown itself ends is printed before the run exits: the call
/// pending on its SSE stream is reported orphaned (its stream cancelled at shutdown), as the
/// recording says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_notices_of_the_shutdown_are_printed_before_exit() {
    use mcpscope_testserver as testserver;
    use mcpscope_testserver::client::McpClient;
    use serde_json::json;

    let dir = tempfile::tempdir().expect("tempdir");
    let server = testserver::start(testserver::Options::default())
        .await
        .expect("test server");
    let mut child = mcpscope(
        dir.path(),
        &[
            "--json",
            "--upstream",
            &server.url(),
            "--record",
            "run.jsonl",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let printed = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let (_, said) = wait_for_recording(&mut child);
    let listen = said
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no listen address in {said}"))
        .trim_start_matches("http://")
        .to_string();
    let url = format!("http://{listen}/mcp");
    let mut client = McpClient::new(&url).expect("client");
    client.handshake().await.expect("handshake");
    // A call the server answers only after a minute, on an SSE stream (progress asked for).
    let call = tokio::spawn(async move {
        client
            .call("slow", json!({"steps": 1, "interval_ms": 60_000}), true)
            .await
    });
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap_or_default();
        if text.contains("\"slow\"") && text.contains("\"stream_opened\"") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no call: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    stop(child);
    let lines = printed.join().expect("stdout reader");
    let notices: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let slow = notices
        .iter()
        .find(|n| n["kind"] == "call_started" && n["tool"] == "slow")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    // Its stream, cancelled by the shutdown on the client's leg, with the call pending.
    let ended = notices
        .iter()
        .find(|n| n["kind"] == "stream_ended" && n["stream"] == slow["stream"])
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        (&ended["how"], &ended["leg"], &ended["pending"]),
        (&json!("cancelled"), &json!("client"), &json!(1)),
        "{lines:#?}"
    );
    // And what became of the call (the test server names event ids: resumable).
    let fate: Vec<&serde_json::Value> = notices
        .iter()
        .filter(|n| n["request_id"] == slow["request_id"] && n["stream"] == slow["stream"])
        .filter(|n| n["kind"] == "call_resumable" || n["kind"] == "call_orphaned")
        .collect();
    assert_eq!(fate.len(), 1, "{lines:#?}");
    // The recording says the same.
    let recorded = std::fs::read_to_string(dir.path().join("run.jsonl")).expect("recording");
    assert!(
        recorded
            .lines()
            .any(|l| l.contains("\"detail\":\"shutdown\"")),
        "{recorded}"
    );
    call.abort();
    server.shutdown().await;
}

#[test]
fn a_closed_stderr_ends_nothing_the_proxy_answers_and_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = mcpscope(
        dir.path(),
        &[
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--record",
            "run.jsonl",
        ],
    )
    .spawn()
    .expect("spawn");
    // Read up to the address, then close our end of its stderr: every later diagnostic line
    // (the attach hint, the unreachable-upstream warning, the shutdown summary) meets a closed
    // pipe.
    let stderr = child.stderr.take().expect("stderr");
    let mut listen = None;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if let Some(addr) = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
        {
            listen = Some(addr.trim_start_matches("http://").to_string());
            break;
        }
    }
    let addr = listen.expect("listening");
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let mut sock = std::net::TcpStream::connect(&addr).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        std::io::Write::write_all(&mut sock, request.as_bytes()).expect("send");
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut sock, &mut answer);
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    }
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    stop(child);
    let text = std::fs::read_to_string(dir.path().join("run.jsonl")).expect("recording");
    assert!(text.contains("proxy_started"), "{text}");
    assert_eq!(text.matches("\"stream_opened\"").count(), 3, "{text}");
}
