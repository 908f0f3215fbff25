//! One client, two MCP servers, one `mcpscope --forward`: every `--json` line names its server,
//! a fault rule with `server=` takes only that server's requests, and the stream it kills
//! orphans only that server's call. Plain HTTP through the proxy (absolute-form requests), the
//! servers two `mcpscope serve-test`; loopback only.

mod common;

use std::process::Command;
use std::time::Duration;

use common::forward::{Forward, initialize, post};
use common::peers::{ServeTest, of_kind, root, run_json, venv_python};
use serde_json::{Value, json};

/// The `host:port` of a serve-test URL.
fn authority(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string()
}

fn slow(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
           "params":{"name":"slow","arguments":{"steps":3,"interval_ms":200}}})
}

#[test]
fn a_fault_on_one_server_orphans_only_its_call_and_every_line_names_its_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = ServeTest::start(&["--json-responses"]);
    let b = ServeTest::start(&["--json-responses"]);
    let (a_host, b_host) = (authority(&a.url), authority(&b.url));
    let (a_origin, b_origin) = (format!("http://{a_host}"), format!("http://{b_host}"));
    let rule = format!("reset when server={a_host} tool=slow");
    let forward = Forward::start(dir.path(), &["--fault", &rule, "--no-record"]);
    let proxy = forward.addr;
    let a_session = initialize(proxy, &a_host);
    let b_session = initialize(proxy, &b_host);
    // Both calls are id 1, each in its own server's session, at once.
    let calls = [(a_host.clone(), a_session), (b_host.clone(), b_session)]
        .map(|(host, sid)| std::thread::spawn(move || post(proxy, &host, Some(&sid), &slow(1))));
    let [a_reply, b_reply] = calls.map(|c| c.join().expect("client thread"));
    assert!(
        b_reply.1.contains("slow: done"),
        "B's call was answered: {b_reply:?}\n{}",
        forward.dump()
    );
    assert!(
        !a_reply.1.contains("slow: done"),
        "A's call was cut: {a_reply:?}"
    );
    let notices = forward.wait(|n| {
        !of_kind(n, "call_orphaned").is_empty()
            && of_kind(n, "call_answered")
                .iter()
                .any(|c| c["tool"] == "slow")
    });
    let orphaned = of_kind(&notices, "call_orphaned");
    let servers: Vec<&Value> = orphaned.iter().map(|n| &n["server"]).collect();
    assert_eq!(servers, [&json!(a_origin)], "{}", forward.dump());
    let answered: Vec<&Value> = of_kind(&notices, "call_answered")
        .into_iter()
        .filter(|n| n["tool"] == "slow")
        .map(|n| &n["server"])
        .collect();
    assert_eq!(answered, [&json!(b_origin)], "{}", forward.dump());
    let faults: Vec<&Value> = of_kind(&notices, "fault_injected")
        .iter()
        .map(|n| &n["server"])
        .collect();
    assert_eq!(faults, [&json!(a_origin)], "{}", forward.dump());
    // Every line about a call, a stream or a session says which server it was.
    for notice in &notices {
        let server = notice["server"].as_str();
        assert!(
            server == Some(a_origin.as_str()) || server == Some(b_origin.as_str()),
            "a line without its server: {notice}"
        );
    }
    drop((a, b));
}

/// The Python SDK client's `poke` through `--forward` (its `HTTP_PROXY`), the server serve-test
/// without event ids: a rule for that server resets the call's SSE stream, `--rescue` answers
/// the client with its error, the recording replays to the same lines (each naming the server)
/// and `mcpscope check` reads it.
#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn the_python_sdk_through_forward_gets_faults_rescue_recording_replay_and_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ServeTest::start(&["--no-event-ids"]);
    let host = authority(&server.url);
    let origin = format!("http://{host}");
    let record = dir.path().join("forward.jsonl");
    let record_arg = record.display().to_string();
    let rule = format!("reset when server={host} tool=poke");
    let mut forward = Forward::start(
        dir.path(),
        &["--fault", &rule, "--rescue", "--record", &record_arg],
    );
    let mut cmd = Command::new(venv_python());
    cmd.arg(root().join("tests/peers/py_client.py"))
        .arg(&server.url)
        .args(["--style", "legacy", "--scenario", "poke", "--timeout", "20"])
        .env("HTTP_PROXY", format!("http://{}", forward.addr))
        .env("http_proxy", format!("http://{}", forward.addr))
        .env("NO_PROXY", "")
        .env("no_proxy", "")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
    let run = run_json(
        cmd,
        "py_client poke through --forward",
        Duration::from_secs(60),
    );
    assert_eq!(
        run.json["outcome"],
        "error",
        "{}\n{}",
        run.json,
        forward.dump()
    );
    let error = run.json["error"].as_str().unwrap_or("");
    assert!(
        error.contains("mcpscope --rescue"),
        "the client's error is the rescue's: {error}\n{}",
        forward.dump()
    );
    let live = forward.wait(|n| !of_kind(n, "call_rescued").is_empty());
    let rescued = of_kind(&live, "call_rescued");
    assert_eq!(rescued.len(), 1, "{}", forward.dump());
    assert_eq!(rescued[0]["tool"], "poke", "{}", rescued[0]);
    assert_eq!(rescued[0]["server"], origin.as_str(), "{}", rescued[0]);
    let faults = of_kind(&live, "fault_injected");
    assert_eq!(faults.len(), 1, "{}", forward.dump());
    assert_eq!(faults[0]["server"], origin.as_str(), "{}", faults[0]);
    forward.proc.terminate(Duration::from_secs(5));

    // The recording names the server of every exchange, and replays to the same verdicts.
    let text = std::fs::read_to_string(&record).expect("the recording");
    let opened: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "stream_opened")
        .collect();
    assert!(!opened.is_empty(), "{text}");
    for event in &opened {
        assert_eq!(event["origin"], origin.as_str(), "{event}");
    }
    let mcpscope = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mcpscope"))
            .args(args)
            .current_dir(root())
            .output()
            .expect("run mcpscope")
    };
    let replay = mcpscope(&["replay", "--json", &record_arg]);
    assert!(replay.status.success(), "{replay:?}");
    let replayed: Vec<Value> = String::from_utf8_lossy(&replay.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds = |notices: &[Value], kind: &str| -> Vec<(Value, Value)> {
        of_kind(notices, kind)
            .iter()
            .map(|n| (n["tool"].clone(), n["server"].clone()))
            .collect()
    };
    for kind in [
        "call_rescued",
        "call_orphaned",
        "fault_injected",
        "call_answered",
    ] {
        assert_eq!(
            kinds(&replayed, kind),
            kinds(&live, kind),
            "{kind} in the replay"
        );
    }
    assert!(
        !kinds(&replayed, "call_orphaned").is_empty(),
        "{replayed:?}"
    );
    let check = mcpscope(&["check", "--json", &record_arg]);
    let report: Value = serde_json::from_slice(&check.stdout)
        .unwrap_or_else(|e| panic!("check --json: {e}: {check:?}"));
    assert!(
        report.to_string().contains("poke"),
        "check names the orphaned poke: {report}"
    );
    assert!(
        matches!(check.status.code(), Some(0 | 1)),
        "check ran (findings or none): {check:?}"
    );
    drop(server);
}

/// A readable line through `--forward` names its server after the time (`[host:port]`), live
/// and when the recording is replayed, since the proxy observes many servers.
#[test]
fn readable_lines_through_forward_name_their_server_live_and_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = ServeTest::start(&["--json-responses"]);
    let b = ServeTest::start(&["--json-responses"]);
    let (a_host, b_host) = (authority(&a.url), authority(&b.url));
    let record = dir.path().join("two.jsonl");
    let record_arg = record.display().to_string();
    let mut forward = Forward::start_readable(dir.path(), &["--record", &record_arg]);
    let proxy = forward.addr;
    let sessions = [
        (&a_host, initialize(proxy, &a_host)),
        (&b_host, initialize(proxy, &b_host)),
    ];
    for (host, session) in &sessions {
        let echo = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                          "params":{"name":"echo","arguments":{"text":"hi"}}});
        let (head, body) = post(proxy, host, Some(session), &echo);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    }
    let answered = |lines: &[String]| {
        sessions.iter().all(|(_, session)| {
            lines.iter().any(|l| {
                l.contains("call answered     tools/call echo")
                    && l.contains(&format!("session={session}"))
            })
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !answered(&forward.stdout.snapshot()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    forward.proc.terminate(Duration::from_secs(5));
    let replay = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["replay", "--headless", &record_arg])
        .current_dir(root())
        .output()
        .expect("run mcpscope replay");
    assert!(replay.status.success(), "{replay:?}");
    let replayed: Vec<String> = String::from_utf8_lossy(&replay.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    // The recording's lines are the live ones, but for the time of day (the live ones read to
    // the end of the terminated proxy's output).
    let untimed = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.to_string()))
            .filter(|l| l.starts_with('['))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut live = forward.stdout.snapshot();
    while untimed(&live) != untimed(&replayed) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        live = forward.stdout.snapshot();
    }
    assert_eq!(untimed(&replayed), untimed(&live));
    for (what, lines) in [("live", &live), ("replayed", &replayed)] {
        assert!(
            answered(lines),
            "{what}: both calls answered:\n{}",
            lines.join("\n")
        );
        // Every line about one of the sessions names that session's server, after the time.
        for (host, session) in &sessions {
            let about: Vec<&String> = lines
                .iter()
                .filter(|l| l.contains(session.as_str()))
                .collect();
            assert!(about.len() >= 2, "{what}: {about:?}");
            for line in about {
                let (_, rest) = line.split_once(' ').unwrap_or_default();
                assert!(
                    rest.starts_with(&format!("[{host}] ")),
                    "{what}: a line without its server {host}: {line}"
                );
            }
        }
    }
    drop((a, b));
}

/// `mcpscope attach --json` on a forward proxy's published session sees both servers' calls
/// (made before it joined, from the recording), each line naming its server.
#[test]
fn attach_sees_a_forward_proxys_calls_each_naming_its_server() {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;

    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = dir.path().join("xdg");
    std::fs::create_dir(&runtime).expect("runtime dir");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let a = ServeTest::start(&["--json-responses"]);
    let b = ServeTest::start(&["--json-responses"]);
    let hosts = [authority(&a.url), authority(&b.url)];
    let record = dir.path().join("attached.jsonl");
    let record_arg = record.display().to_string();
    let mut forward = Forward::start_published(dir.path(), &runtime, &["--record", &record_arg]);
    let proxy = forward.addr;
    for host in &hosts {
        let session = initialize(proxy, host);
        let echo = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
                          "params":{"name":"echo","arguments":{"text":"seen by attach"}}});
        let (head, body) = post(proxy, host, Some(&session), &echo);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    }
    let socket = runtime
        .join("mcpscope")
        .join(format!("{}.sock", forward.proc.child.id()));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !socket.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(socket.exists(), "no published socket\n{}", forward.dump());
    let mut viewer = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["attach", "--json"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("MCPSCOPE_LOG", dir.path().join("attach.log"))
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn attach");
    let (seen, _rx) = common::peers::Lines::spawn(viewer.stdout.take().expect("stdout"));
    let answered = |lines: &[String]| -> Vec<Value> {
        lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|n| n["kind"] == "call_answered" && n["tool"] == "echo")
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while answered(&seen.snapshot()).len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = viewer.kill();
    let _ = viewer.wait();
    let lines = seen.snapshot();
    let mut servers: Vec<String> = answered(&lines)
        .iter()
        .map(|n| n["server"].as_str().unwrap_or("").to_string())
        .collect();
    servers.sort();
    let mut wanted: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
    wanted.sort();
    assert_eq!(
        servers,
        wanted,
        "attach saw:\n{}\n{}",
        lines.join("\n"),
        forward.dump()
    );
    forward.proc.terminate(Duration::from_secs(5));
    drop((a, b));
}
