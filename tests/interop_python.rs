//! Interop tests with the official Python MCP SDK (PyPI `mcp` 2.x): tests/peers/py_server.py and
//! tests/peers/py_client.py, run directly and then through the mcpscope proxy.
//!
//! Needs `.venv` from `scripts/setup-peers.sh`, so the tests are ignored by a plain `cargo test`;
//! `scripts/test.sh` installs it and runs them.
//! Styles: `default` = the SDK's `mode="auto"`, which negotiates 2026-07-28 (server/discover,
//! no session, MRTR elicitation); `legacy` = `mode="legacy"`, the initialize handshake at
//! 2025-11-25 with `Mcp-Session-Id` and a server-to-client elicitation request.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::peers::{Proxy, PyServer, ServerMode, of_kind, py_client, temp_dir, ts};
use mcpscope_engine::event::{Direction, Event};
use mcpscope_engine::model::{Model, Verdict};
use serde_json::Value;

const HEALTHY_TOOLS: [&str; 3] = ["echo", "slow", "ask"];

/// The tools/call notices of one kind for one tool.
fn tool_notices<'a>(notices: &'a [Value], kind: &str, tool: &str) -> Vec<&'a Value> {
    of_kind(notices, kind)
        .into_iter()
        .filter(|n| n["method"] == "tools/call" && n["tool"] == tool)
        .collect()
}

/// Runs the healthy scenario directly and through a proxy (started with `proxy_extra`); checks the
/// outputs are equal and the proxy saw every call answered and none orphaned. Returns the proxy
/// (still running) for further checks.
fn healthy_through_proxy(style: &str, proxy_extra: &[&str]) -> (Proxy, Value) {
    let server = PyServer::start(ServerMode::Healthy);
    let direct = py_client(&server.url(), style, "healthy");
    let proxy = Proxy::start(&server.url(), proxy_extra);
    let via = py_client(&proxy.url("/mcp"), style, "healthy");

    assert_eq!(
        direct.json,
        via.json,
        "the {style} client's view differs through the proxy\ndirect: {}\nproxied: {}\n{}",
        direct.json,
        via.json,
        proxy.dump()
    );
    assert_eq!(direct.json["progress"], 5, "direct run: {}", direct.json);
    assert_eq!(
        direct.json["ask"], "answer=42",
        "direct run: {}",
        direct.json
    );

    // The notices may trail the client's exit a little.
    for tool in HEALTHY_TOOLS {
        let answered = proxy.wait_notice(Duration::from_secs(5), |n| {
            n["kind"] == "call_answered" && n["method"] == "tools/call" && n["tool"] == tool
        });
        assert!(
            answered.is_some(),
            "no call_answered for tools/call {tool}\n{}",
            proxy.dump()
        );
    }
    let notices = proxy.notices();
    for tool in HEALTHY_TOOLS {
        assert!(
            !tool_notices(&notices, "call_started", tool).is_empty(),
            "no call_started for tools/call {tool}\n{}",
            proxy.dump()
        );
    }
    let orphaned = of_kind(&notices, "call_orphaned");
    assert!(
        orphaned.is_empty(),
        "a healthy {style} session had orphaned calls: {orphaned:?}\n{}",
        proxy.dump()
    );
    for n in &notices {
        assert!(
            n["kind"].is_string() && n["t"].is_string(),
            "a notice without kind/t: {n}"
        );
    }
    (proxy, via.json)
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn healthy_default_style_is_transparent() {
    let (_proxy, out) = healthy_through_proxy("default", &[]);
    assert_eq!(out["protocol"], "2026-07-28", "{out}");
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn healthy_legacy_style_is_transparent() {
    let (proxy, out) = healthy_through_proxy("legacy", &[]);
    assert_eq!(out["protocol"], "2025-11-25", "{out}");
    let notices = proxy.notices();
    assert!(
        !of_kind(&notices, "session_started").is_empty(),
        "the legacy style assigns Mcp-Session-Id, but no session_started\n{}",
        proxy.dump()
    );
}

/// The seed's scenario: the server process dies mid-`poke`, after its SSE response began.
fn poke_dies(style: &str) {
    // Directly: what the client sees without the proxy.
    let lone = PyServer::start(ServerMode::Dies);
    let direct = py_client(&lone.url(), style, "poke");
    drop(lone);

    let server = PyServer::start(ServerMode::Dies);
    let proxy = Proxy::start(&server.url(), &[]);
    let via = py_client(&proxy.url("/mcp"), style, "poke");

    assert_eq!(
        direct.json["outcome"],
        via.json["outcome"],
        "poke ({style}): outcome differs through the proxy\ndirect: {}\nproxied: {}\n{}",
        direct.json,
        via.json,
        proxy.dump()
    );
    // The Python SDK fails an orphaned call at once; the proxy must not turn that into a wait.
    let direct_ms = direct.json["elapsed_ms"].as_i64().unwrap_or(0);
    let via_ms = via.json["elapsed_ms"].as_i64().unwrap_or(i64::MAX);
    assert!(
        via_ms <= direct_ms + 2_000,
        "poke ({style}): the client learned of the death {via_ms} ms after the call through the proxy, \
         {direct_ms} ms directly\n{}",
        proxy.dump()
    );

    let orphan = proxy.wait_notice(Duration::from_secs(5), |n| {
        n["kind"] == "call_orphaned" && n["method"] == "tools/call" && n["tool"] == "poke"
    });
    let Some(orphan) = orphan else {
        panic!(
            "poke ({style}): no call_orphaned for tools/call poke\n{}",
            proxy.dump()
        );
    };
    let notices = proxy.notices();
    let stream = &orphan["stream"];
    let ended = of_kind(&notices, "stream_ended")
        .into_iter()
        .find(|n| n["stream"] == *stream)
        .unwrap_or_else(|| panic!("no stream_ended for stream {stream}\n{}", proxy.dump()));
    // On the wire (checked by hand with a raw socket): the server's process exit closes the socket
    // with a FIN in the middle of the chunked SSE body (no terminating 0-chunk). That is truncated
    // framing — `error` in the event vocabulary (`eof` is a FIN after complete framing), not a RST.
    let how = ended["how"].as_str().unwrap_or("");
    assert_eq!(
        how,
        "error",
        "poke ({style}): the upstream stream ended by FIN mid-chunked-body; stream_ended says how={how:?}\n{}",
        proxy.dump()
    );
    assert_eq!(ended["leg"], "upstream", "{}", proxy.dump());
    assert_eq!(
        orphan["how"],
        ended["how"],
        "call_orphaned.how vs stream_ended.how\n{}",
        proxy.dump()
    );
    let gap = (ts(&orphan["t"]) - ts(&ended["t"]))
        .num_milliseconds()
        .abs();
    assert!(
        gap <= 50,
        "poke ({style}): call_orphaned {gap} ms away from its stream_ended\n{}",
        proxy.dump()
    );
    assert!(
        tool_notices(&notices, "call_answered", "poke").is_empty(),
        "poke ({style}) was never answered, but the proxy says it was\n{}",
        proxy.dump()
    );
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn server_dies_mid_call_default_style_is_orphaned() {
    poke_dies("default");
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn server_dies_mid_call_legacy_style_is_orphaned() {
    poke_dies("legacy");
}

/// Reads a recording: a header line with a format version, then one event per line.
fn read_recording(path: &Path) -> Vec<Event> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Value =
        serde_json::from_str(lines.next().unwrap_or_else(|| panic!("empty recording")))
            .unwrap_or_else(|e| panic!("recording header is not JSON: {e}"));
    let has_version = header
        .as_object()
        .map(|o| {
            o.iter()
                .any(|(k, v)| k.contains("version") && (v.is_u64() || v.is_string()))
        })
        .unwrap_or(false);
    assert!(
        has_version,
        "recording header has no format version: {header}"
    );
    let mut raw = Vec::new();
    for line in lines {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("recording line is not JSON ({e}): {line}"));
        assert!(v["kind"].is_string(), "recording line without kind: {line}");
        raw.push(v);
    }
    let rec = mcpscope_engine::record::read_file(path)
        .unwrap_or_else(|e| panic!("record::read_file: {e}"));
    assert!(
        rec.warnings.is_empty(),
        "recording read with warnings: {:?}",
        rec.warnings
    );
    assert_eq!(rec.header.version, mcpscope_engine::event::FORMAT_VERSION);
    assert_eq!(
        rec.events.len(),
        raw.len(),
        "read_file's events vs the recording's lines"
    );
    rec.events
}

/// (session, method, tool, request id) of answered calls.
type CallKey = (Option<String>, String, Option<String>, String);

fn record_round_trip(style: &str) {
    let dir = temp_dir();
    let file = dir.path().join(format!("healthy-{style}.jsonl"));
    let file_arg = file.to_string_lossy().to_string();
    let (mut proxy, _) = healthy_through_proxy(style, &["--record", &file_arg]);
    proxy.proc.terminate(Duration::from_secs(5));
    let notices = proxy.notices();
    // A round that ended asking for input (2026-07-28 MRTR) is answered too, as an exchange.
    let live: BTreeSet<CallKey> = of_kind(&notices, "call_answered")
        .into_iter()
        .chain(of_kind(&notices, "call_input_required"))
        .map(|n| {
            (
                n["session"].as_str().map(str::to_string),
                n["method"].as_str().unwrap_or("").to_string(),
                n["tool"].as_str().map(str::to_string),
                n["request_id"].to_string(),
            )
        })
        .collect();

    let events = read_recording(&file);
    let (model, _) = Model::from_events(&events);
    let folded: BTreeSet<CallKey> = model
        .calls
        .iter()
        // The live notices cover client requests only (not the server's elicitation/create).
        .filter(|c| c.dir == Direction::ClientToServer && matches!(c.verdict, Verdict::Answered))
        .map(|c| {
            (
                model.sessions.get(c.session).and_then(|s| s.id.clone()),
                c.method.to_string(),
                c.tool.as_deref().map(str::to_string),
                c.id.to_string(),
            )
        })
        .collect();
    assert!(
        !live.is_empty(),
        "no call_answered notices\n{}",
        proxy.dump()
    );
    assert_eq!(
        live,
        folded,
        "answered calls: live --json vs the folded recording\n{}",
        proxy.dump()
    );
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn recording_folds_to_the_live_answers_default_style() {
    record_round_trip("default");
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn recording_folds_to_the_live_answers_legacy_style() {
    record_round_trip("legacy");
}
