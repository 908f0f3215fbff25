//! Interop tests of the legacy HTTP+SSE transport (revision 2024-11-05) with the official Python
//! MCP SDK (`mcp.server.sse`, `mcp.client.sse`): tests/peers/py_sse_server.py and
//! tests/peers/py_client.py `--transport sse`, directly and through the mcpscope proxy.
//!
//! Needs `.venv` from `scripts/setup-peers.sh`, so the tests are ignored by a plain `cargo test`;
//! `scripts/test.sh` installs it and runs them.

mod common;

use std::path::Path;
use std::time::Duration;

use common::peers::{Proxy, PyServer, ServerMode, of_kind, py_sse_client, temp_dir};
use mcpscope_engine::event::{Direction, Event};
use mcpscope_engine::model::{Model, Verdict};
use serde_json::Value;

const LEGACY: &str = "2024-11-05";

/// The verdict notices (kind, method, tool, request id, stream, cause, session revision), in
/// order.
fn verdicts(notices: &[Value]) -> Vec<String> {
    const KINDS: &[&str] = &[
        "session_started",
        "call_started",
        "call_answered",
        "call_orphaned",
        "call_failed",
        "call_resumable",
        "server_request_answered",
    ];
    let fields = [
        "kind",
        "method",
        "tool",
        "request_id",
        "stream",
        "cause",
        "revision",
    ];
    notices
        .iter()
        .filter(|n| n["kind"].as_str().is_some_and(|k| KINDS.contains(&k)))
        .map(|n| fields.map(|k| n[k].to_string()).join(" "))
        .collect()
}

/// `mcpscope replay --json FILE`: the replayed notices.
fn replayed(file: &Path) -> Vec<Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["replay", "--json"])
        .arg(file)
        .output()
        .expect("run mcpscope replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn read_recording(path: &Path) -> Vec<Event> {
    let rec = mcpscope_engine::record::read_file(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(rec.warnings.is_empty(), "warnings: {:?}", rec.warnings);
    rec.events
}

/// The `stream` of the SSE GET (its `stream_ended` label is `GET#n sse`).
fn sse_stream(notices: &[Value]) -> Option<u64> {
    of_kind(notices, "stream_ended")
        .into_iter()
        .find(|n| n["label"].as_str().is_some_and(|l| l.starts_with("GET#")))
        .and_then(|n| n["stream"].as_u64())
}

/// How many POSTs passed through the proxy (their `stream_ended` labels).
fn posts_seen(notices: &[Value]) -> usize {
    of_kind(notices, "stream_ended")
        .into_iter()
        .filter(|n| n["label"].as_str().is_some_and(|l| l.starts_with("POST#")))
        .count()
}

fn tool_notices<'a>(notices: &'a [Value], kind: &str, tool: &str) -> Vec<&'a Value> {
    of_kind(notices, kind)
        .into_iter()
        .filter(|n| n["method"] == "tools/call" && n["tool"] == tool)
        .collect()
}

/// The healthy scenario directly and through a proxy (with `extra` arguments): identical
/// results, every tool call answered on the SSE stream, no false verdicts, the client's POSTs
/// through the proxy. Returns the proxy (still running) and the direct run's output.
fn healthy(server: &PyServer, extra: &[&str]) -> (Proxy, Value) {
    let direct = py_sse_client(&server.sse_url(), "healthy");
    let proxy = Proxy::start(&server.sse_url(), extra);
    let via = py_sse_client(&proxy.url("/sse"), "healthy");
    assert_eq!(
        direct.json,
        via.json,
        "the SSE client's view differs through the proxy\n{}",
        proxy.dump()
    );
    assert_eq!(direct.json["progress"], 5, "{}", direct.json);
    assert_eq!(direct.json["ask"], "answer=42", "{}", direct.json);
    assert_eq!(direct.json["echo"], "hello mcpscope", "{}", direct.json);
    for tool in ["echo", "slow", "ask"] {
        let answered = proxy.wait_notice(Duration::from_secs(5), |n| {
            n["kind"] == "call_answered" && n["method"] == "tools/call" && n["tool"] == tool
        });
        assert!(
            answered.is_some(),
            "no call_answered for {tool}\n{}",
            proxy.dump()
        );
    }
    proxy.wait_notice(Duration::from_secs(5), |n| {
        n["kind"] == "stream_ended" && n["label"].as_str().is_some_and(|l| l.starts_with("GET#"))
    });
    let notices = proxy.notices();
    for kind in [
        "call_orphaned",
        "call_failed",
        "client_retry",
        "invalid_message",
    ] {
        let found = of_kind(&notices, kind);
        assert!(
            found.is_empty(),
            "a healthy legacy session had {kind}: {found:?}\n{}",
            proxy.dump()
        );
    }
    let sessions = of_kind(&notices, "session_started");
    assert_eq!(sessions.len(), 1, "{}", proxy.dump());
    assert_eq!(sessions[0]["revision"], LEGACY, "{}", proxy.dump());
    let sse = sse_stream(&notices).unwrap_or_else(|| panic!("no GET stream\n{}", proxy.dump()));
    for tool in ["echo", "slow", "ask"] {
        let started = tool_notices(&notices, "call_started", tool);
        assert_eq!(started.len(), 1, "{tool}\n{}", proxy.dump());
        assert_eq!(
            started[0]["stream"],
            sse,
            "{tool} is owned by the SSE stream\n{}",
            proxy.dump()
        );
        let answered = tool_notices(&notices, "call_answered", tool);
        assert_eq!(
            answered[0]["stream"],
            sse,
            "{tool} is answered on it\n{}",
            proxy.dump()
        );
    }
    // initialize, initialized, tools/list, three calls, the elicitation's answer.
    assert!(
        posts_seen(&notices) >= 7,
        "the client posted past the proxy\n{}",
        proxy.dump()
    );
    assert_eq!(
        of_kind(&notices, "server_request_answered").len(),
        1,
        "{}",
        proxy.dump()
    );
    (proxy, direct.json)
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn legacy_sse_calls_pass_unchanged_and_fold_alike_from_the_recording() {
    let server = PyServer::start_sse(ServerMode::Healthy, &[]);
    let dir = temp_dir();
    let file = dir.path().join("legacy.jsonl");
    let file_arg = file.to_string_lossy().to_string();
    let (mut proxy, _) = healthy(&server, &["--record", &file_arg]);
    // The SDK's endpoint is relative (`/messages/?session_id=…`): it needs no rewrite.
    let notices = proxy.notices();
    assert!(
        of_kind(&notices, "rewritten").is_empty(),
        "{}",
        proxy.dump()
    );
    proxy.proc.terminate(Duration::from_secs(5));
    assert_eq!(
        verdicts(&proxy.notices()),
        verdicts(&replayed(&file)),
        "live vs replay"
    );

    let (model, _) = Model::from_events(&read_recording(&file));
    let calls: Vec<_> = model
        .calls
        .iter()
        .filter(|c| c.dir == Direction::ClientToServer)
        .collect();
    assert_eq!(
        calls.len(),
        5,
        "initialize, tools/list, echo, slow, ask: {calls:#?}"
    );
    for call in calls {
        assert_eq!(
            call.verdict,
            Verdict::Answered,
            "{} in the recording",
            call.method
        );
        assert_eq!(
            model.sessions[call.session].revision.as_deref(),
            Some(LEGACY)
        );
    }
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn an_absolute_endpoint_is_rewritten_to_the_proxy() {
    let server = PyServer::start_sse(ServerMode::Healthy, &["--absolute-endpoint"]);
    let (proxy, _) = healthy(&server, &[]);
    let notices = proxy.notices();
    let rewritten = of_kind(&notices, "rewritten");
    assert_eq!(rewritten.len(), 1, "{}", proxy.dump());
    let (from, to) = (
        rewritten[0]["from"].as_str().unwrap_or(""),
        rewritten[0]["to"].as_str().unwrap_or(""),
    );
    let upstream = format!("http://127.0.0.1:{}/messages/?session_id=", server.port);
    assert!(from.starts_with(&upstream), "from {from}");
    assert_eq!(rewritten[0]["what"], "endpoint");
    assert_eq!(
        to,
        format!(
            "{}{}",
            proxy.base,
            &from["http://127.0.0.1:".len() + server.port.to_string().len()..]
        )
    );
    assert_eq!(rewritten[0]["stream"].as_u64(), sse_stream(&notices));
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn the_server_dying_mid_call_orphans_every_pending_call() {
    let lone = PyServer::start_sse(ServerMode::Dies, &[]);
    let direct = py_sse_client(&lone.sse_url(), "poke_slow");
    drop(lone);
    assert_eq!(direct.json["outcome"], "error", "{}", direct.json);
    assert_eq!(direct.json["slow_outcome"], "error", "{}", direct.json);

    let server = PyServer::start_sse(ServerMode::Dies, &[]);
    let dir = temp_dir();
    let file = dir.path().join("legacy-dies.jsonl");
    let file_arg = file.to_string_lossy().to_string();
    let mut proxy = Proxy::start(&server.sse_url(), &["--record", &file_arg]);
    let via = py_sse_client(&proxy.url("/sse"), "poke_slow");
    for key in ["outcome", "slow_outcome"] {
        assert_eq!(
            direct.json[key],
            via.json[key],
            "{key}\n{}\n{}",
            via.json,
            proxy.dump()
        );
    }
    for tool in ["poke", "slow"] {
        let orphan = proxy.wait_notice(Duration::from_secs(5), |n| {
            n["kind"] == "call_orphaned" && n["tool"] == tool
        });
        assert!(
            orphan.is_some(),
            "no call_orphaned for {tool}\n{}",
            proxy.dump()
        );
    }
    let notices = proxy.notices();
    let sse = sse_stream(&notices).unwrap_or_else(|| panic!("no GET stream\n{}", proxy.dump()));
    let ended = of_kind(&notices, "stream_ended")
        .into_iter()
        .find(|n| n["stream"] == sse)
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(ended["leg"], "upstream", "{}", proxy.dump());
    assert_eq!(ended["pending"], 2, "{}", proxy.dump());
    for tool in ["poke", "slow"] {
        let orphaned = tool_notices(&notices, "call_orphaned", tool);
        assert_eq!(orphaned.len(), 1, "{tool}\n{}", proxy.dump());
        assert_eq!(
            orphaned[0]["stream"], sse,
            "{tool} died with the SSE stream"
        );
        assert_eq!(orphaned[0]["how"], ended["how"], "{}", proxy.dump());
        assert!(tool_notices(&notices, "call_answered", tool).is_empty());
        assert!(tool_notices(&notices, "call_failed", tool).is_empty());
    }
    assert!(
        of_kind(&notices, "call_resumable").is_empty(),
        "{}",
        proxy.dump()
    );
    proxy.proc.terminate(Duration::from_secs(5));
    assert_eq!(
        verdicts(&proxy.notices()),
        verdicts(&replayed(&file)),
        "live vs replay"
    );

    let (model, _) = Model::from_events(&read_recording(&file));
    for tool in ["poke", "slow"] {
        let call = model
            .calls
            .iter()
            .find(|c| c.tool.as_deref() == Some(tool))
            .unwrap_or_else(|| panic!("no {tool} call in the recording"));
        match &call.verdict {
            Verdict::Orphaned { death, .. } => assert_eq!(death.stream, sse),
            other => panic!("{tool} in the recording: {other:?}"),
        }
    }
}
