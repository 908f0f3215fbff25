//! A real agent host through forward-proxy mode: Claude Code (the newest and the older release
//! installed in tests/peers/hosts) with nothing changed but its environment — `HTTPS_PROXY`/`HTTP_PROXY` at
//! `mcpscope --forward` and `NODE_EXTRA_CA_CERTS` at mcpscope's CA — reaches an HTTPS MCP server
//! configured with its real URL (the built-in test server behind TLS on 127.0.0.2) and its model
//! API (the scripted stub). The MCP calls are observed (tools/list, the tools/call, which a
//! fault resets mid-stream: the death is seen); the model-API traffic is only counted
//! (`unobserved`), its headers and bodies never recorded.
//!
//! The host runs only in a loopback-only network namespace: the test runs itself again inside
//! `unshare -n` (entered before any runtime starts), and that inner run checks the namespace
//! with `mcpscope_hosts::sandbox` before it starts anything.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::forward::{Forward, tls_front};
use common::peers::{Lines, Proc, ServeTest, of_kind, root, wait_line};
use serde_json::Value;

/// Set in the run inside the namespace, to the host package the run starts.
const INSIDE: &str = "MCPSCOPE_TEST_INSIDE_LOOPBACK_NAMESPACE";
/// How long the host may take to reach the stream death (it takes about a second).
const LIMIT: Duration = Duration::from_secs(120);

/// The Claude Code binary of `package` (an npm alias in tests/peers/hosts).
fn claude(package: &str) -> PathBuf {
    let bin = root().join(format!(
        "tests/peers/hosts/node_modules/{package}/bin/claude.exe"
    ));
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup-peers.sh (npm ci in tests/peers/hosts)",
        bin.display()
    );
    bin
}

#[test]
#[ignore = "runs the real Claude Code in a loopback-only namespace: run scripts/test.sh"]
fn claude_code_through_the_forward_proxy_is_observed_and_its_model_traffic_only_counted() {
    through_the_namespace(
        "claude_code_through_the_forward_proxy_is_observed_and_its_model_traffic_only_counted",
        "claude-code-newest",
    );
}

#[test]
#[ignore = "runs the real Claude Code in a loopback-only namespace: run scripts/test.sh"]
fn the_older_claude_code_through_the_forward_proxy_is_observed_the_same() {
    through_the_namespace(
        "the_older_claude_code_through_the_forward_proxy_is_observed_the_same",
        "claude-code-older",
    );
}

/// Runs the test `name` again inside a loopback-only namespace, where it starts `package`.
fn through_the_namespace(name: &str, package: &str) {
    if let Some(inner) = std::env::var_os(INSIDE) {
        return inside(&claude(&inner.to_string_lossy()));
    }
    claude(package);
    let me = std::env::current_exe().expect("the test binary");
    let status = Command::new("unshare")
        .args(["-n", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(me)
        .args(["--exact", name, "--include-ignored", "--nocapture"])
        .env(INSIDE, package)
        .stdin(Stdio::null())
        .status()
        .expect("unshare runs (util-linux)");
    assert!(
        status.success(),
        "the run inside the namespace failed: {status:?}"
    );
}

/// The model stub on an ephemeral port, calling `tool` once.
fn model_stub(tool: &str, args: &str) -> (Proc, SocketAddr, Lines) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args([
            "model-stub",
            "--listen",
            "127.0.0.1:0",
            "--api",
            "anthropic",
        ])
        .args(["--tool", tool, "--tool-args", args])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn model-stub");
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let (stdout, orx) = Lines::spawn(out);
    let (stderr, erx) = Lines::spawn(err);
    const PREFIX: &str = "model-stub: http://";
    let seen = |l: &str| l.contains(PREFIX);
    let line = wait_line(&orx, Duration::from_secs(20), seen)
        .or_else(|| wait_line(&erx, Duration::from_secs(1), seen))
        .unwrap_or_else(|| {
            panic!(
                "the stub printed no address\n{}\n{}",
                stdout.text(),
                stderr.text()
            )
        });
    let rest = &line[line.find(PREFIX).map_or(0, |i| i + PREFIX.len())..];
    let addr = rest
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(',')
        .parse()
        .unwrap_or_else(|e| panic!("bad stub address in {line:?}: {e}"));
    let proc = Proc {
        child,
        name: "model-stub".into(),
    };
    (proc, addr, stdout)
}

fn inside(claude_bin: &std::path::Path) {
    mcpscope_hosts::sandbox::verify_current()
        .unwrap_or_else(|refused| panic!("not in a loopback-only namespace: {refused}"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    // No event ids: the reset call cannot be resumed, so its death is final.
    let server = ServeTest::start(&["--no-event-ids"]);
    let backend = server.addr();
    let (front, test_ca, _) = runtime.block_on(tls_front(dir.path(), backend));
    let record = dir.path().join("rec.jsonl");
    let forward = Forward::start(
        dir.path(),
        &[
            "--ca-file",
            &test_ca.display().to_string(),
            "--record",
            &record.display().to_string(),
            "--fault",
            "reset after 2 events when method=tools/call once",
        ],
    );
    let (_stub, stub, stub_out) =
        model_stub("mcp__scope__slow", r#"{"steps": 3, "interval_ms": 200}"#);

    // The host: its MCP server at its real URL; only the environment points at mcpscope.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("tmp")).expect("home");
    let mcp_url = format!("https://127.0.0.2:{}/mcp", front.port());
    let config = serde_json::json!({"mcpServers": {"scope": {"type": "http", "url": mcp_url}}});
    let proxy = format!("http://{}", forward.addr);
    let mut host = Command::new(claude_bin);
    host.env_clear()
        .args(["-p", "Call the MCP tool once, then report its result."])
        .args(["--strict-mcp-config", "--mcp-config", &config.to_string()])
        .args(["--allowedTools", "mcp__scope__slow"])
        .env("HOME", &home)
        .env("TMPDIR", home.join("tmp"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TERM", "dumb")
        .env("CI", "1")
        .env("NO_COLOR", "1")
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("ANTHROPIC_BASE_URL", format!("http://{stub}"))
        .env("ANTHROPIC_API_KEY", "mcpscope-model-stub-key")
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("NODE_EXTRA_CA_CERTS", forward.ca_pem());
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        host.env(name, &proxy);
    }
    let mut child = host
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Claude Code starts");
    let (host_out, _) = Lines::spawn(child.stdout.take().expect("stdout"));
    let (host_err, _) = Lines::spawn(child.stderr.take().expect("stderr"));
    let mut host = Proc {
        child,
        name: "claude".into(),
    };
    let dump = || {
        format!(
            "{}\nstub:\n{}\nclaude stdout:\n{}\nclaude stderr:\n{}",
            forward.dump(),
            stub_out.text(),
            host_out.text(),
            host_err.text()
        )
    };

    // The tools/call is observed, and its stream's death seen.
    let started = Instant::now();
    let notices = loop {
        let notices = forward.notices();
        let died = of_kind(&notices, "call_orphaned")
            .iter()
            .any(|n| n["method"] == "tools/call" && n["tool"] == "slow");
        if died {
            break notices;
        }
        if started.elapsed() > LIMIT || host.exited() {
            panic!("no death of the tools/call was seen\n{}", dump());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    host.terminate(Duration::from_secs(2));
    let answered = of_kind(&notices, "call_answered");
    assert!(
        answered.iter().any(|n| n["method"] == "tools/list"),
        "tools/list was not observed\n{}",
        dump()
    );
    let called: Vec<&Value> = of_kind(&notices, "call_started")
        .into_iter()
        .filter(|n| n["method"] == "tools/call")
        .collect();
    assert!(
        called.iter().any(|n| n["tool"] == "slow"),
        "the tools/call was not observed\n{}",
        dump()
    );
    let injected = of_kind(&notices, "fault_injected");
    assert_eq!(injected.len(), 1, "{}", dump());

    // The model API went through the proxy and was only counted.
    let text = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&record).unwrap_or_default();
            if text.contains(r#""kind":"unobserved""#) || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let stub_host = stub.to_string();
    let counted: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "unobserved" && v["host"] == stub_host.as_str())
        .collect();
    assert!(
        !counted.is_empty(),
        "the model API traffic was not counted (did it go around the proxy?)\n{text}\n{}",
        dump()
    );
    for line in &counted {
        assert_eq!(line["method"], "POST", "{line}");
        assert_eq!(line["path"], "/v1/messages", "{line}");
        assert!(line["bytes_up"].as_u64().unwrap_or(0) > 0, "{line}");
        assert!(line.get("detail").is_none(), "{line}");
    }
    for secret in [
        "mcpscope-model-stub-key",
        "Call the MCP tool once",
        "x-api-key",
        "anthropic-version",
        "beta=true",
    ] {
        assert!(!text.contains(secret), "{secret:?} was recorded:\n{text}");
    }
    let elsewhere: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&stub_host) && !l.contains(r#""kind":"unobserved""#))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "the model API appears outside its unobserved lines: {elsewhere:?}"
    );
}
