//! Interop tests with the official TypeScript MCP SDK (npm `@modelcontextprotocol/sdk` 1.x) as the
//! client (tests/peers/node/client.mjs) against the Python SDK server (tests/peers/py_server.py),
//! directly and through the mcpscope proxy. The 1.x TypeScript client speaks the initialize
//! handshake at 2025-11-25.
//!
//! Needs `.venv` and tests/peers/node/node_modules from `scripts/setup-peers.sh`, so the tests are
//! ignored by a plain `cargo test`; `scripts/test.sh` installs them and runs them.

mod common;

use std::time::Duration;

use common::peers::{Proxy, PyServer, ServerMode, node_client, of_kind, temp_dir, ts};
use mcpscope_engine::model::Model;

#[test]
#[ignore = "needs Node.js with the TypeScript MCP SDK in tests/peers/node/node_modules and the Python MCP SDK in .venv: run scripts/test.sh (installs them)"]
fn node_client_healthy_is_transparent() {
    let server = PyServer::start(ServerMode::Healthy);
    let direct = node_client(&server.url(), "healthy", 20);
    let proxy = Proxy::start(&server.url(), &[]);
    let via = node_client(&proxy.url("/mcp"), "healthy", 20);

    assert_eq!(
        direct.json,
        via.json,
        "the node client's view differs through the proxy\ndirect: {}\nproxied: {}\n{}",
        direct.json,
        via.json,
        proxy.dump()
    );
    assert_eq!(direct.json["protocol"], "2025-11-25", "{}", direct.json);
    assert_eq!(direct.json["progress"], 5, "{}", direct.json);
    assert_eq!(direct.json["ask"], "answer=42", "{}", direct.json);

    for tool in ["echo", "slow", "ask"] {
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
    let orphaned = of_kind(&notices, "call_orphaned");
    assert!(
        orphaned.is_empty(),
        "a healthy session had orphaned calls: {orphaned:?}\n{}",
        proxy.dump()
    );
}

/// The seed's hang, with the TypeScript client: the server dies mid-`poke`; the client keeps
/// waiting until its own request timeout, while the proxy names the call orphaned at once.
#[test]
#[ignore = "needs Node.js with the TypeScript MCP SDK in tests/peers/node/node_modules and the Python MCP SDK in .venv: run scripts/test.sh (installs them)"]
fn node_client_waits_for_its_timeout_but_the_proxy_sees_the_orphan() {
    const TIMEOUT_S: u32 = 4;
    let lone = PyServer::start(ServerMode::Dies);
    let direct = node_client(&lone.url(), "poke", TIMEOUT_S);
    drop(lone);

    let server = PyServer::start(ServerMode::Dies);
    let dir = temp_dir();
    let file = dir.path().join("node-poke.jsonl");
    let file_arg = file.to_string_lossy().to_string();
    let mut proxy = Proxy::start(&server.url(), &["--record", &file_arg]);
    let via = node_client(&proxy.url("/mcp"), "poke", TIMEOUT_S);

    assert_eq!(
        direct.json["outcome"],
        via.json["outcome"],
        "poke: outcome differs through the proxy\ndirect: {}\nproxied: {}\n{}",
        direct.json,
        via.json,
        proxy.dump()
    );

    let started = proxy
        .wait_notice(Duration::from_secs(1), |n| {
            n["kind"] == "call_started" && n["method"] == "tools/call" && n["tool"] == "poke"
        })
        .unwrap_or_else(|| panic!("no call_started for poke\n{}", proxy.dump()));
    let orphan = proxy
        .wait_notice(Duration::from_secs(5), |n| {
            n["kind"] == "call_orphaned" && n["method"] == "tools/call" && n["tool"] == "poke"
        })
        .unwrap_or_else(|| panic!("no call_orphaned for tools/call poke\n{}", proxy.dump()));
    let notices = proxy.notices();
    let ended = of_kind(&notices, "stream_ended")
        .into_iter()
        .find(|n| n["stream"] == orphan["stream"])
        .unwrap_or_else(|| panic!("no stream_ended for the orphan's stream\n{}", proxy.dump()));
    let gap = (ts(&orphan["t"]) - ts(&ended["t"]))
        .num_milliseconds()
        .abs();
    assert!(
        gap <= 50,
        "call_orphaned {gap} ms away from its stream_ended\n{}",
        proxy.dump()
    );
    // The server dies ~300 ms into the call: the diagnosis must come long before the client's timeout.
    let after = (ts(&orphan["t"]) - ts(&started["t"])).num_milliseconds();
    assert!(
        after < i64::from(TIMEOUT_S) * 1000 / 2,
        "call_orphaned came {after} ms after call_started (client timeout {TIMEOUT_S} s)\n{}",
        proxy.dump()
    );

    // What the client did next, from the recording: the 1.x TypeScript client reopens its GET
    // stream at once (the seed's observation) and sends notifications/cancelled at its timeout.
    proxy.proc.terminate(Duration::from_secs(5));
    let rec = mcpscope_engine::record::read_file(&file)
        .unwrap_or_else(|e| panic!("record::read_file: {e}"));
    let (model, _) = Model::from_events(&rec.events);
    let poke = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("poke"))
        .unwrap_or_else(|| panic!("no poke call in the recording\n{}", proxy.dump()));
    assert_eq!(poke.verdict.name(), "orphaned", "{:?}", poke.verdict);
    assert!(
        poke.reaction.cancelled,
        "the TypeScript client sent notifications/cancelled at its timeout, but the model's reaction \
         is {:?}",
        poke.reaction
    );
    assert!(
        poke.reaction.new_get,
        "the TypeScript client reopened its GET stream, but the model's reaction is {:?}",
        poke.reaction
    );
    assert_eq!(poke.reaction.retries, 0, "{:?}", poke.reaction);
}
