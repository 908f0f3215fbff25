//! The official SDK clients against `mcpscope serve-test`, directly and through the proxy: the
//! Python SDK 2.x in its default mode (2026-07-28: server/discover, input-required rounds, a
//! subscriptions/listen stream) and in the 2025 style (initialize, a session, server-to-client
//! requests), and the TypeScript SDK 1.x. Every tool, prompt and resource must work, and give the
//! same answers through the proxy, which must see every call answered and nothing invalid.
//!
//! Needs the peers of `scripts/setup-peers.sh`, so the tests are ignored by a plain `cargo test`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::peers::{
    ClientRun, Proxy, ServeTest, node_client_script, of_kind, root, run_json, venv_python,
};
use serde_json::Value;

fn py(url: &str, style: &str) -> ClientRun {
    let mut cmd = Command::new(venv_python());
    cmd.arg(root().join("tests/peers/py_testserver_client.py"))
        .arg(url)
        .args(["--style", style]);
    run_json(
        cmd,
        &format!("py_testserver_client {style} {url}"),
        Duration::from_secs(60),
    )
}

fn node(url: &str) -> ClientRun {
    let dir = node_client_script()
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_else(root);
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("testserver_client.mjs"))
        .arg(url)
        .current_dir(&dir);
    run_json(
        cmd,
        &format!("testserver_client.mjs {url}"),
        Duration::from_secs(60),
    )
}

/// Checks one client's view of serve-test: every tool answered as it should.
fn check_view(v: &Value, protocol: &str) {
    assert_eq!(v["protocol"], protocol, "{v}");
    let calls = v["calls"].as_object().expect("calls");
    for (name, call) in calls {
        let expected_error = name == "fail" || name == "test_error_handling";
        if name == "poke_moves_the_counter" {
            assert_eq!(call, true, "{v}");
            continue;
        }
        assert_eq!(call["is_error"], expected_error, "{name}: {call}");
        assert!(
            call["text"].as_str().is_some_and(|t| !t.is_empty()),
            "{name}: {call}"
        );
    }
    // Every listed tool but the stateful/transport ones was called.
    let tools = v["tools"].as_array().expect("tools");
    assert!(tools.len() >= 19, "{v}");
    for t in tools {
        let t = t.as_str().unwrap_or("");
        if !["peek", "poke", "test_reconnection"].contains(&t) {
            assert!(calls.contains_key(t), "{t} was not called: {v}");
        }
    }
    assert_eq!(calls["test_sampling"]["text"], "LLM response: sampled");
    assert!(
        calls["test_elicitation"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ada")),
        "{v}"
    );
    assert_eq!(
        v["progress"], 6,
        "3 from slow, 3 from test_tool_with_progress: {v}"
    );
    assert_eq!(v["template"]["id"], "7", "{v}");
}

/// The proxy saw the client's calls all answered, and nothing orphaned, failed, retried or
/// invalid.
fn check_proxy(proxy: &Proxy) {
    let answered = proxy.wait_notice(Duration::from_secs(5), |n| {
        n["kind"] == "call_answered" && n["tool"] == "test_sampling"
    });
    assert!(answered.is_some(), "no answer seen\n{}", proxy.dump());
    let notices = proxy.notices();
    for kind in [
        "call_orphaned",
        "call_failed",
        "client_retry",
        "invalid_message",
    ] {
        let bad: Vec<&Value> = of_kind(&notices, kind)
            .into_iter()
            .filter(|n| n["method"] != "subscriptions/listen")
            .collect();
        assert!(bad.is_empty(), "{kind}: {bad:?}\n{}", proxy.dump());
    }
}

fn direct_and_proxied(run: impl Fn(&str) -> ClientRun, protocol: &str) {
    let server = ServeTest::start(&[]);
    let direct = run(&server.url);
    check_view(&direct.json, protocol);
    let proxy = Proxy::start(&server.url, &[]);
    let via = run(&proxy.url("/mcp"));
    assert_eq!(
        direct.json,
        via.json,
        "the view differs through the proxy\n{}",
        proxy.dump()
    );
    check_proxy(&proxy);
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn python_default_mode_2026_07_28() {
    direct_and_proxied(
        |url| {
            let run = py(url, "default");
            assert_eq!(
                run.json["listen_event"], "ResourceUpdated mcpscope://counter",
                "the listen stream did not hear of the poke: {}",
                run.json
            );
            run
        },
        "2026-07-28",
    );
}

#[test]
#[ignore = "needs the Python MCP SDK in .venv: run scripts/test.sh (installs it)"]
fn python_2025_style() {
    direct_and_proxied(|url| py(url, "legacy"), "2025-11-25");
}

#[test]
#[ignore = "needs the TypeScript MCP SDK in tests/peers/node: run scripts/test.sh (installs it)"]
fn typescript_client() {
    direct_and_proxied(
        |url| {
            let run = node(url);
            assert_eq!(
                run.json["resource_updated"], "mcpscope://counter",
                "the subscription did not hear of the poke: {}",
                run.json
            );
            run
        },
        "2025-11-25",
    );
}
