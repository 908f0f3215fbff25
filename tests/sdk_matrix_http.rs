//! The SDK matrix over Streamable HTTP with the official TypeScript SDK as the *server*
//! (tests/peers/node/http_server.mjs: `McpServer` + `StreamableHTTPServerTransport`, stateful
//! sessions, revisions up to 2025-11-25) and every SDK client the tests know: the Python SDK 2.x
//! (default style, which probes `server/discover` first and falls back to `initialize`, and legacy
//! style), the Python SDK 1.x, and the TypeScript SDK. Each client runs the healthy scenario
//! (tools/list, echo, slow with progress, ask with an elicitation) directly and through
//! `mcpscope --json`: the client must see the same thing both ways, and the proxy must see every
//! call answered and nothing it would call a failure.
//!
//! Needs Node.js with tests/peers/node/node_modules, `.venv` and `.venv-mcp1` from
//! `scripts/setup-peers.sh`, so the tests are ignored by a plain `cargo test`; `scripts/test.sh`
//! installs them and runs them.
//!
//! One more cell completes the matrix the other interop tests leave open: the Python SDK 1.x
//! client against the Python SDK 2.x server (tests/peers/py_server.py).

mod common;

use std::time::{Duration, Instant};

use common::node_server::{NodeServer, py1_client};
use common::peers::{ClientRun, Proxy, PyServer, ServerMode, node_client, of_kind, py_client, ts};
use serde_json::{Map, Value};

/// The SDK clients of the matrix.
#[derive(Clone, Copy, Debug)]
enum SdkClient {
    /// Python SDK 2.x, `mode="auto"`.
    Python2Default,
    /// Python SDK 2.x, `mode="legacy"`.
    Python2Legacy,
    /// Python SDK 1.x.
    Python1,
    /// TypeScript SDK 1.x.
    TypeScript,
}

impl SdkClient {
    /// Runs the client's healthy scenario against `url`.
    fn healthy(self, url: &str) -> ClientRun {
        match self {
            SdkClient::Python2Default => py_client(url, "default", "healthy"),
            SdkClient::Python2Legacy => py_client(url, "legacy", "healthy"),
            SdkClient::Python1 => py1_client(url),
            SdkClient::TypeScript => node_client(url, "healthy", 20),
        }
    }

    /// Runs the client's poke scenario (one `poke`, with a progress callback) against `url`.
    fn poke(self, url: &str) -> ClientRun {
        match self {
            SdkClient::Python2Default => py_client(url, "default", "poke"),
            SdkClient::Python2Legacy => py_client(url, "legacy", "poke"),
            SdkClient::TypeScript => node_client(url, "poke", POKE_TIMEOUT_S),
            SdkClient::Python1 => panic!("py1_client.py runs the healthy scenario only"),
        }
    }

    /// Whether it probes `server/discover` (2026-07-28) before falling back to `initialize`.
    fn probes_first(self) -> bool {
        matches!(self, SdkClient::Python2Default)
    }
}

/// The SDK servers of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SdkServer {
    /// tests/peers/py_server.py (Python SDK 2.x, every revision including 2026-07-28).
    Python,
    /// tests/peers/node/http_server.mjs (TypeScript SDK 1.x, up to 2025-11-25).
    TypeScript,
}

/// A running SDK server, stopped on drop.
enum Running {
    Python(PyServer),
    TypeScript(NodeServer),
}

impl SdkServer {
    /// Starts it on an ephemeral loopback port.
    fn start(self, mode: ServerMode) -> Running {
        match self {
            SdkServer::Python => Running::Python(PyServer::start(mode)),
            SdkServer::TypeScript => Running::TypeScript(NodeServer::start(mode)),
        }
    }
}

impl Running {
    /// Its `/mcp` URL.
    fn url(&self) -> String {
        match self {
            Running::Python(s) => s.url(),
            Running::TypeScript(s) => s.url(),
        }
    }
}

/// The TypeScript client's request timeout for `poke` (it waits for it when the server dies).
const POKE_TIMEOUT_S: u32 = 4;

/// Notice kinds that must not appear in a healthy session.
const FAILURES: [&str; 4] = [
    "call_orphaned",
    "call_failed",
    "client_retry",
    "invalid_message",
];

/// The tools the healthy scenario calls.
const HEALTHY_TOOLS: [&str; 3] = ["echo", "slow", "ask"];

/// `v` without timing fields (keys ending in `_ms`), at any depth.
fn without_timings(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.ends_with("_ms"))
                .map(|(k, v)| (k.clone(), without_timings(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_timings).collect()),
        other => other.clone(),
    }
}

/// Whether `end` ends the call `start` began: same method and JSON-RPC id, and the same session
/// (an `initialize` starts without one and is answered in the session it opens).
fn ends(end: &Value, start: &Value) -> bool {
    end["method"] == start["method"]
        && end["request_id"] == start["request_id"]
        && (start["session"].is_null() || end["session"] == start["session"])
}

/// The calls started but not (yet) ended: answered, or (for a `server/discover` probe an older
/// server refuses) superseded by the client's fallback.
fn unsettled(notices: &[Value]) -> Vec<Value> {
    let ended: Vec<&Value> = notices
        .iter()
        .filter(|n| {
            n["kind"] == "call_answered"
                || (n["kind"] == "call_superseded" && n["method"] == "server/discover")
        })
        .collect();
    of_kind(notices, "call_started")
        .into_iter()
        .filter(|start| !ended.iter().any(|end| ends(end, start)))
        .cloned()
        .collect()
}

/// Waits (up to `limit`) until every started call has ended; returns the notices then.
fn settled_notices(proxy: &Proxy, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let notices = proxy.notices();
        let open = unsettled(&notices);
        if open.is_empty() && !of_kind(&notices, "call_started").is_empty() {
            return notices;
        }
        assert!(
            Instant::now() < deadline,
            "calls never answered within {limit:?}: {open:?}\n{}",
            proxy.dump()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The client against the server directly and through the proxy: same view, every call
/// answered, no failure notices, the elicitation seen and answered.
fn transparent(kind: SdkServer, client: SdkClient) {
    let started = Instant::now();
    let server = kind.start(ServerMode::Healthy);
    let direct = client.healthy(&server.url());
    let proxy = Proxy::start(&server.url(), &[]);
    let via = client.healthy(&proxy.url("/mcp"));

    let (direct_view, via_view) = (without_timings(&direct.json), without_timings(&via.json));
    assert_eq!(
        direct_view,
        via_view,
        "{client:?}: the client's view differs through the proxy\ndirect: {}\nproxied: {}\n{}",
        direct.json,
        via.json,
        proxy.dump()
    );
    let expected = serde_json::json!({
        "ask": "answer=42",
        "echo": "hello mcpscope",
        "progress": 5,
        "protocol": "2025-11-25",
        "slow": "done",
        "tools": ["ask", "echo", "peek", "poke", "slow"],
    });
    assert_eq!(direct_view, expected, "{client:?}: direct run");

    let notices = settled_notices(&proxy, Duration::from_secs(5));
    for kind in FAILURES {
        let found = of_kind(&notices, kind);
        assert!(
            found.is_empty(),
            "{client:?}: a healthy session had {kind}: {found:?}\n{}",
            proxy.dump()
        );
    }
    for tool in HEALTHY_TOOLS {
        let answered: Vec<_> = of_kind(&notices, "call_answered")
            .into_iter()
            .filter(|n| n["method"] == "tools/call" && n["tool"] == tool)
            .collect();
        assert_eq!(
            answered.len(),
            1,
            "{client:?}: tools/call {tool} answered {} times\n{}",
            answered.len(),
            proxy.dump()
        );
        assert_eq!(
            answered[0]["is_error"], false,
            "{client:?}: {}",
            answered[0]
        );
    }
    let asked = of_kind(&notices, "server_request")
        .into_iter()
        .find(|n| n["method"] == "elicitation/create")
        .unwrap_or_else(|| {
            panic!(
                "{client:?}: no server_request elicitation/create\n{}",
                proxy.dump()
            )
        });
    assert!(
        of_kind(&notices, "server_request_answered")
            .iter()
            .any(|n| ends(n, asked)),
        "{client:?}: the elicitation was never answered\n{}",
        proxy.dump()
    );
    let probes = of_kind(&notices, "call_superseded");
    if client.probes_first() && kind == SdkServer::TypeScript {
        assert!(
            probes.len() == 1
                && probes[0]["method"] == "server/discover"
                && probes[0]["by"] == "initialize"
                && probes[0]["error"] == "HTTP 400",
            "{client:?}: expected one server/discover probe refused with 400 and superseded by \
             initialize, got {probes:?}\n{}",
            proxy.dump()
        );
    } else {
        assert!(
            probes.is_empty(),
            "{client:?}: {probes:?}\n{}",
            proxy.dump()
        );
    }
    let sessions = of_kind(&notices, "session_started");
    assert!(
        sessions.iter().any(|n| n["session"].is_string()),
        "{client:?}: no session with an Mcp-Session-Id\n{}",
        proxy.dump()
    );
    eprintln!(
        "{kind:?} server, {client:?}: direct {:?}, proxied {:?}, whole test {:?}",
        direct.elapsed,
        via.elapsed,
        started.elapsed()
    );
}

/// The cell the other interop tests leave open: the Python SDK 1.x client, Python SDK 2.x server.
#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn python_sdk_1_against_python_server() {
    transparent(SdkServer::Python, SdkClient::Python1);
}

/// The TypeScript server dies ~300 ms into `poke`, after one progress notification: the client
/// sees the same outcome directly and through the proxy, and the proxy names the call orphaned as
/// soon as its stream dies (long before any client timeout).
fn server_death_is_orphaned(client: SdkClient) {
    let started = Instant::now();
    let lone = NodeServer::start(ServerMode::Dies);
    let direct = client.poke(&lone.url());
    drop(lone);

    let server = NodeServer::start(ServerMode::Dies);
    let proxy = Proxy::start(&server.url(), &[]);
    let via = client.poke(&proxy.url("/mcp"));

    for key in ["outcome", "progress", "protocol"] {
        assert_eq!(
            direct.json[key],
            via.json[key],
            "{client:?} poke: {key} differs through the proxy\ndirect: {}\nproxied: {}\n{}",
            direct.json,
            via.json,
            proxy.dump()
        );
    }
    assert_ne!(
        direct.json["outcome"], "result",
        "{client:?}: {}",
        direct.json
    );
    assert_eq!(direct.json["progress"], 1, "{client:?}: {}", direct.json);

    let is_poke = |n: &Value| n["method"] == "tools/call" && n["tool"] == "poke";
    let orphan = proxy
        .wait_notice(Duration::from_secs(5), |n| {
            n["kind"] == "call_orphaned" && is_poke(n)
        })
        .unwrap_or_else(|| panic!("{client:?}: no call_orphaned for poke\n{}", proxy.dump()));
    let notices = proxy.notices();
    let begun = of_kind(&notices, "call_started")
        .into_iter()
        .find(|n| is_poke(n))
        .unwrap_or_else(|| panic!("{client:?}: no call_started for poke\n{}", proxy.dump()));
    let after = (ts(&orphan["t"]) - ts(&begun["t"])).num_milliseconds();
    assert!(
        after < i64::from(POKE_TIMEOUT_S) * 1000 / 2,
        "{client:?}: call_orphaned came {after} ms after call_started\n{}",
        proxy.dump()
    );
    let answered: Vec<_> = of_kind(&notices, "call_answered")
        .into_iter()
        .filter(|n| is_poke(n))
        .collect();
    assert!(
        answered.is_empty(),
        "{client:?}: {answered:?}\n{}",
        proxy.dump()
    );
    eprintln!(
        "{client:?} poke: outcome {}, orphaned {after} ms into the call, whole test {:?}",
        via.json["outcome"],
        started.elapsed()
    );
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn python_sdk_2_default_style_against_typescript_server() {
    transparent(SdkServer::TypeScript, SdkClient::Python2Default);
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn python_sdk_2_legacy_style_against_typescript_server() {
    transparent(SdkServer::TypeScript, SdkClient::Python2Legacy);
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn python_sdk_1_against_typescript_server() {
    transparent(SdkServer::TypeScript, SdkClient::Python1);
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn typescript_sdk_against_typescript_server() {
    transparent(SdkServer::TypeScript, SdkClient::TypeScript);
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn typescript_server_death_is_orphaned_python_sdk_2_default_style() {
    server_death_is_orphaned(SdkClient::Python2Default);
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn typescript_server_death_is_orphaned_python_sdk_2_legacy_style() {
    server_death_is_orphaned(SdkClient::Python2Legacy);
}

#[test]
#[ignore = "needs the MCP SDK peers: run scripts/test.sh"]
fn typescript_server_death_is_orphaned_typescript_sdk() {
    server_death_is_orphaned(SdkClient::TypeScript);
}
