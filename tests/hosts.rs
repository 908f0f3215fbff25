//! Agent hosts in the matrix: the real Claude Code CLI (installed by scripts/setup-peers.sh),
//! driven through every case by `mcpscope matrix --host claude-code`, which runs it, its model
//! stub, the servers and the proxies in a loopback-only network namespace. Plus the sandbox
//! itself, with a custom host that reports the namespace it runs in.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::peers::root;
use serde_json::Value;

/// The longest a whole matrix run may take here (it bounds itself well below this).
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// The stream-death cases: no event id to resume from, or resumption impossible for a host
/// that never resumes.
const STREAM_DEATHS: &[&str] = &[
    "reset-after-event",
    "reset-after-headers",
    "eof-before-result",
    "server-dies",
    "json-reset",
    "priming-then-reset",
    "resumable",
    "resume-refused",
];

fn claude_newest() -> PathBuf {
    let bin = root().join("tests/peers/hosts/node_modules/claude-code-newest/bin/claude.exe");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup-peers.sh (npm ci in tests/peers/hosts)",
        bin.display()
    );
    bin
}

/// Claude Code matrices run one at a time: thirteen hosts per run already share two cores, and
/// the reaction times measured are the hosts' own.
static ONE_HOST_MATRIX: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `mcpscope ARGS`, bounded; its JSON lines by case, and its stderr.
fn matrix(args: &[&str]) -> (BTreeMap<String, Value>, String) {
    let _turn = ONE_HOST_MATRIX.lock().unwrap_or_else(|p| p.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpscope runs");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpscope {args:?} ran longer than {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    let cells = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}\n{err}")))
        .map(|c| (c["case"].as_str().expect("case").to_string(), c))
        .collect();
    (cells, err)
}

fn verdict(cells: &BTreeMap<String, Value>, case: &str) -> String {
    let cell = cells
        .get(case)
        .unwrap_or_else(|| panic!("no cell {case}: {cells:?}"));
    // As the board writes a cell: the outcome once (`skipped: why`, not `skipped: skipped: why`).
    let (outcome, verdict) = (
        cell["outcome"].as_str().unwrap_or("?"),
        cell["verdict"].as_str().unwrap_or("?"),
    );
    match verdict
        .strip_prefix(outcome)
        .is_some_and(|r| r.starts_with(':'))
    {
        true => verdict.to_string(),
        false => format!("{outcome}: {verdict}"),
    }
}

/// The committed docs/hosts.md table under `heading`: case → the column named `column`.
fn documented(heading: &str, column: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root().join("docs/hosts.md")).expect("docs/hosts.md");
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("docs/hosts.md has no section {heading:?}"));
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().replace("**", ""))
                .collect()
        })
        .collect();
    let head = rows.first().expect("a table");
    let at = head
        .iter()
        .position(|h| h == column)
        .unwrap_or_else(|| panic!("no column {column:?} in {head:?}"));
    rows[1..]
        .iter()
        .map(|row| (row[0].clone(), row[at].clone()))
        .collect()
}

/// What a run says against what docs/hosts.md says, for every documented case.
fn assert_matches_docs(cells: &BTreeMap<String, Value>, heading: &str, column: &str) {
    assert_rows_match_docs(cells, heading, column, None);
}

/// The rows of a preset host's column compared with the board: the stream deaths without event
/// ids, the JSON reset, the HTTP errors and the control. The rows about resumption depend on
/// when a host's own retry timer fires against the server's (opencode's priming-then-reset
/// under --rescue went either way in three runs), so they are the board's record, not a test.
const STEADY_ROWS: &[&str] = &[
    "healthy",
    "reset-after-event",
    "reset-after-headers",
    "eof-before-result",
    "server-dies",
    "server-dies-refusing",
    "json-reset",
    "session-expired",
    "status-503",
];

fn assert_rows_match_docs(
    cells: &BTreeMap<String, Value>,
    heading: &str,
    column: &str,
    rows: Option<&[&str]>,
) {
    let mut docs = documented(heading, column);
    if let Some(rows) = rows {
        docs.retain(|case, _| rows.contains(&case.as_str()));
    }
    // When a host gave up on the silent call is a measurement (its seconds), not a verdict.
    docs.remove("silent-slow");
    // Rows this run left out (`--quick`, or `-` in the table) are not compared.
    let differ: Vec<String> = docs
        .iter()
        .filter(|(case, doc)| cells.contains_key(*case) && *doc != "-")
        .filter(|(case, doc)| verdict(cells, case) != **doc)
        .map(|(case, doc)| {
            format!(
                "{case}: docs say {doc:?}, this run {:?}",
                verdict(cells, case)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "docs/hosts.md ({heading}) is out of date (scripts/hosts-table.sh remakes it):\n{}",
        differ.join("\n")
    );
}

fn claude_column(cells: &BTreeMap<String, Value>) -> String {
    let version = cells
        .values()
        .find_map(|c| c["host_version"].as_str())
        .expect("host_version");
    format!("Claude Code {version}")
}

/// The report's finding on the newest Claude Code: a stream that dies before the result
/// leaves the call hanging (the tool result never reaches the model), while a JSON reset and
/// an HTTP 503 fail at once. The same column is what docs/hosts.md shows.
#[test]
#[ignore = "needs Claude Code in tests/peers/hosts (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn claude_code_hangs_on_stream_death_and_fails_promptly_on_errors() {
    let bin = claude_newest();
    let (cells, err) = matrix(&[
        "matrix",
        "--host",
        "claude-code",
        "--host-bin",
        bin.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert!(err.contains("loopback-only network namespace"), "{err}");
    for case in ["reset-after-event", "eof-before-result", "server-dies"] {
        assert_eq!(
            verdict(&cells, case),
            "hung: hangs on stream death",
            "{err}"
        );
        let cell = &cells[case];
        assert_eq!(cell["tool_result_ms"], Value::Null, "{cell}");
        assert_eq!(cell["killed"], true, "{cell}");
    }
    for case in ["json-reset", "status-503"] {
        assert_eq!(verdict(&cells, case), "failed: correct", "{err}");
        let cell = &cells[case];
        assert_eq!(cell["tool_result_error"], true, "{cell}");
        assert!(
            cell["tool_result_ms"].as_i64().is_some_and(|ms| ms < 2_000),
            "{cell}"
        );
    }
    let healthy = &cells["healthy"];
    assert_eq!(verdict(&cells, "healthy"), "ok: correct");
    assert_eq!(healthy["host"], "claude-code");
    assert_eq!(healthy["tool_result_error"], false, "{healthy}");
    assert!(
        healthy["tool_result_text"]
            .as_str()
            .is_some_and(|t| t.contains("done after 3 steps")),
        "{healthy}"
    );
    // A slow call: progress every 2 s keeps it alive; 45 s of silence does not (its idle
    // timeout is 10 s here, and it checks every 30 s).
    assert_eq!(
        verdict(&cells, "progress-keeps-alive"),
        "ok: correct",
        "{err}"
    );
    let silent = verdict(&cells, "silent-slow");
    let after_s: Option<u64> = silent
        .strip_prefix("failed: gave up after ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok());
    assert!(
        after_s.is_some_and(|s| (29..=35).contains(&s)) && silent.ends_with("(a fact, no defect)"),
        "{silent}\n{err}"
    );
    assert_matches_docs(&cells, "Without --rescue", &claude_column(&cells));
}

/// Through `--rescue`, every stream death reaches the model as a tool error within a second.
#[test]
#[ignore = "needs Claude Code in tests/peers/hosts (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn claude_code_through_rescue_gets_every_death_as_an_error_within_a_second() {
    let bin = claude_newest();
    let (cells, err) = matrix(&[
        "matrix",
        "--host",
        "claude-code",
        "--host-bin",
        bin.to_str().expect("utf-8 path"),
        "--json",
        "--quick",
        "--rescue",
    ]);
    // Claude Code speaks 2026-07-28: no retry hint reaches it, so that case is not judged.
    assert!(
        verdict(&cells, "retry-hint").starts_with("skipped: no retry hint reached the client"),
        "{err}"
    );
    for case in STREAM_DEATHS {
        let cell = &cells[*case];
        assert_eq!(verdict(&cells, case), "failed: correct", "{cell}\n{err}");
        assert_eq!(cell["tool_result_error"], true, "{cell}");
        assert!(
            cell["tool_result_ms"].as_i64().is_some_and(|ms| ms < 1_000),
            "{case}: {cell}"
        );
    }
    assert_matches_docs(&cells, "With --rescue", &claude_column(&cells));
}

/// The healthy cell of a custom host that is a shell script (`sh -c SCRIPT`), 2 s per cell,
/// and what mcpscope printed on stderr.
fn custom_shell_cell(script: &str) -> (Value, String) {
    let (cells, err) = matrix(&[
        "matrix",
        "--cases",
        "healthy",
        "--timeout",
        "2s",
        "--json",
        "--host",
        "custom",
        "--model-api",
        "anthropic",
        "--",
        "sh",
        "-c",
        script,
    ]);
    let cell = cells
        .get("healthy")
        .cloned()
        .unwrap_or_else(|| panic!("{err}"));
    (cell, err)
}

/// The last lines a cell's client printed.
fn last_lines(cell: &Value) -> Vec<&str> {
    cell["last_lines"]
        .as_array()
        .expect("last_lines")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// A custom host runs in a network namespace with loopback alone: `lo` is its only link and it
/// has no route. (It never calls the tool, so the cell is inconclusive; only where it ran counts.)
#[test]
fn a_custom_host_runs_with_loopback_alone() {
    let (cell, err) = custom_shell_cell(
        "echo model={model_url}; tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' '; echo routes=$(tail -n +2 /proc/self/net/route | wc -l); echo home=$HOME",
    );
    let lines = last_lines(&cell);
    assert!(lines[0].starts_with("model=http://127.0.0.1:"), "{lines:?}");
    assert_eq!(lines[1..3], ["lo", "routes=0"], "{lines:?}\n{err}");
    assert!(
        lines[3].starts_with("home=")
            && !lines[3].ends_with(&std::env::var("HOME").unwrap_or_default()),
        "a throwaway HOME: {lines:?}"
    );
    assert_eq!(cell["host"], "custom");
    assert_eq!(cell["outcome"], "inconclusive", "{cell}");
    assert_eq!(cell["defect"], Value::Null, "{cell}");
}

/// `mcpscope model-stub` alone: it says where it listens and prints one JSON object per request.
#[test]
fn model_stub_prints_each_request_it_saw() {
    use std::io::{BufRead, BufReader, Write};
    let child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["model-stub", "--listen", "0", "--tool", "slow", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpscope model-stub");
    // Killed when the test ends, however it ends.
    let mut stub = common::peers::Proc {
        child,
        name: "model-stub".into(),
    };
    let mut err = BufReader::new(stub.child.stderr.take().expect("stderr"));
    let mut banner = String::new();
    err.read_line(&mut banner).expect("banner");
    let addr = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no URL in {banner:?}"))
        .to_string();
    let body = r#"{"model":"m","max_tokens":9,"stream":true,"tools":[{"name":"mcp__s__slow","input_schema":{}}],"messages":[{"role":"user","content":"go"}]}"#;
    let mut tcp = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        tcp,
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).expect("read");
    assert!(answer.contains("event: message_start"), "{answer}");
    let mut out = BufReader::new(stub.child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("a line per request");
    let seen: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(seen["path"], "/v1/messages");
    assert_eq!(seen["api"], "anthropic");
    assert_eq!(
        seen["answer"],
        serde_json::json!({"kind": "tool_call", "tool": "mcp__s__slow"})
    );
    stub.terminate(Duration::from_secs(2));
}

/// A host's namespace has no way out, so an `--upstream` elsewhere is refused, saying why.
#[test]
fn a_host_with_an_upstream_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args([
            "matrix",
            "--host",
            "claude-code",
            "--upstream",
            "http://127.0.0.1:1/mcp",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("mcpscope runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--host cannot use --upstream"), "{err}");
}

/// A host named by a relative path is found although each cell runs it in a throwaway directory:
/// the path is taken from where `mcpscope` was started.
#[test]
fn a_host_named_by_a_relative_path_runs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp");
    let script = dir.path().join("host.sh");
    std::fs::write(&script, "#!/bin/sh\necho relative-host-ran\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args([
            "matrix",
            "--cases",
            "healthy",
            "--timeout",
            "2",
            "--json",
            "--host",
            "custom",
            "--model-api",
            "anthropic",
            "--",
            "./host.sh",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("mcpscope runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("relative-host-ran"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether a process whose command line holds `needle` is running.
fn running_with(needle: &str) -> bool {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|cmd| {
            String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(needle)
        })
}

/// A daemon a host starts (one that leaves the cell's process group, as `cline` does) dies with
/// its cell: each host runs in a PID namespace of its own.
#[test]
fn a_daemon_a_host_starts_dies_with_its_cell() {
    // An odd duration names the daemon among every process of the machine.
    let needle = format!("{}.{}", 900 + std::process::id() % 97, std::process::id());
    let (cell, err) = custom_shell_cell(&format!(
        "setsid sleep {needle} < /dev/null > /dev/null 2>&1 & echo started"
    ));
    assert_eq!(cell["last_lines"][0], "started", "{cell}\n{err}");
    // The kernel kills the namespace's processes as its first one ends: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while running_with(&format!("sleep {needle}")) {
        assert!(
            Instant::now() < deadline,
            "the daemon `sleep {needle}` outlived its cell\n{err}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--hosts` lists the shipped presets with what each needs; `--host-file` runs a preset from
/// anywhere, its files written into the cell's HOME and its templates filled.
#[test]
fn presets_are_files_listed_by_hosts_and_run_from_host_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["matrix", "--hosts"])
        .env("XDG_CONFIG_HOME", "/nonexistent-for-this-test")
        .stdin(Stdio::null())
        .output()
        .expect("mcpscope runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for name in ["claude-code", "codex", "gemini-cli", "custom"] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{name}:\n{text}");
    }
    assert!(text.contains("needs: Node.js 20 or later"), "{text}");
    let dir = tempfile::tempdir().expect("temp");
    let preset = dir.path().join("echoer.toml");
    std::fs::write(
        &preset,
        r#"name = "echoer"
description = "prints what it was given"
api = "openai-chat"
bin = "sh"
tool_name = "{tool}"
argv = ["{bin}", "-c", "echo url={url}; cat $HOME/conf/echoer.json; echo; echo key=$ECHOER_KEY"]

[env]
ECHOER_KEY = "{key}"

[[files]]
path = "conf/echoer.json"
text = '{"server": "{server}", "model": "{model_url}"}'
"#,
    )
    .expect("write the preset");
    let preset = preset.display().to_string();
    let (cells, err) = matrix(&[
        "matrix",
        "--cases",
        "healthy",
        "--timeout",
        "2s",
        "--json",
        "--host-file",
        &preset,
    ]);
    let cell = cells.get("healthy").unwrap_or_else(|| panic!("{err}"));
    let lines = last_lines(cell);
    assert!(
        lines[0].starts_with("url=http://127.0.0.1:"),
        "{lines:?}\n{err}"
    );
    assert!(
        lines[1].starts_with(r#"{"server": "mcpscope", "model": "http://127.0.0.1:"#),
        "{lines:?}"
    );
    assert_eq!(lines[2], "key=mcpscope-model-stub-key", "{lines:?}");
    assert_eq!(cell["host"], "echoer");
}

/// A preset host's column, without and with --rescue, against docs/hosts.md (column `label
/// VERSION`); with --rescue every stream death without an event id reaches the model (as an
/// error where the host's model API can say so).
fn assert_host_column(preset: &str, bin: &str, label: &str) {
    let bin = root().join(bin);
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup-peers.sh",
        bin.display()
    );
    let bin = bin.to_str().expect("utf-8 path");
    let column = |cells: &BTreeMap<String, Value>| {
        let version = cells
            .values()
            .find_map(|c| c["host_version"].as_str())
            .expect("host_version");
        format!("{label} {version}")
    };
    let (cells, err) = matrix(&[
        "matrix",
        "--host",
        preset,
        "--host-bin",
        bin,
        "--json",
        "--quick",
    ]);
    assert_eq!(verdict(&cells, "healthy"), "ok: correct", "{err}");
    assert_eq!(cells["healthy"]["host"], preset);
    assert_rows_match_docs(
        &cells,
        "Without --rescue",
        &column(&cells),
        Some(STEADY_ROWS),
    );
    let (cells, err) = matrix(&[
        "matrix",
        "--host",
        preset,
        "--host-bin",
        bin,
        "--json",
        "--quick",
        "--rescue",
    ]);
    for case in ["reset-after-event", "eof-before-result", "server-dies"] {
        let cell = &cells[case];
        assert_eq!(verdict(&cells, case), "failed: correct", "{cell}\n{err}");
        assert!(cell["tool_result_ms"].as_i64().is_some(), "{case}: {cell}");
    }
    assert_rows_match_docs(&cells, "With --rescue", &column(&cells), Some(STEADY_ROWS));
}

/// Gemini CLI (installed by scripts/setup-peers.sh), its preset's model pinned past the router.
#[test]
#[ignore = "needs Gemini CLI in tests/peers/hosts (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn gemini_cli_matches_its_column_without_and_with_rescue() {
    assert_host_column(
        "gemini-cli",
        "tests/peers/hosts/node_modules/.bin/gemini",
        "Gemini CLI",
    );
}

/// opencode (installed by scripts/setup-peers.sh), its model a custom provider at the stub.
#[test]
#[ignore = "needs opencode in tests/peers/hosts (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn opencode_matches_its_column_without_and_with_rescue() {
    assert_host_column(
        "opencode",
        "tests/peers/hosts/node_modules/.bin/opencode",
        "opencode",
    );
}

/// The Cline CLI (installed by scripts/setup-peers.sh), in its local "sandbox" mode (no hub
/// daemon).
#[test]
#[ignore = "needs Cline in tests/peers/hosts (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn cline_matches_its_column_without_and_with_rescue() {
    assert_host_column(
        "cline",
        "tests/peers/hosts/node_modules/.bin/cline",
        "Cline",
    );
}

/// Kimi CLI 1.51.0 (from PyPI, installed by scripts/setup-peers.sh into .venv-kimi).
#[test]
#[ignore = "needs Kimi CLI in .venv-kimi (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn kimi_cli_matches_its_column_without_and_with_rescue() {
    // A machine with no Python 3.13 cannot install it (none can be fetched here): setup-peers
    // leaves the reason, and the column is not re-run.
    if let Ok(why) = std::fs::read_to_string(root().join(".venv-kimi/UNAVAILABLE")) {
        eprintln!("Kimi CLI's column is not re-run: {}", why.trim());
        return;
    }
    assert_host_column("kimi-cli", ".venv-kimi/bin/kimi", "Kimi CLI");
}

/// Qwen Code (installed by scripts/setup-peers.sh, run by Node 22), its MCP tools made visible
/// past its tool search.
#[test]
#[ignore = "needs Qwen Code in tests/peers/hosts (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn qwen_code_matches_its_column_without_and_with_rescue() {
    assert_host_column(
        "qwen-code",
        "tests/peers/hosts/node_modules/.mcpscope/qwen",
        "Qwen Code",
    );
}

/// Several `--host-bin`: the whole matrix once per program, one column each in the text table
/// (a version sweep), each cell's JSON naming its program.
#[test]
fn several_host_programs_make_one_column_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut programs = Vec::new();
    for name in ["first.sh", "second.sh"] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {name}\n")).expect("write");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        programs.push(path.display().to_string());
    }
    let base = [
        "matrix",
        "--cases",
        "healthy",
        "--timeout",
        "2s",
        "--host",
        "custom",
        "--model-api",
        "anthropic",
        "--host-bin",
        &programs[0],
        "--host-bin",
        &programs[1],
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(base)
        .args(["--", "sh"])
        .output()
        .expect("run mcpscope");
    let text = String::from_utf8_lossy(&out.stdout);
    let head = text.lines().next().unwrap_or_default();
    assert!(
        head.contains("custom (first.sh)") && head.contains("custom (second.sh)"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("every row is the same in every column"),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(base)
        .args(["--json", "--", "sh"])
        .output()
        .expect("run mcpscope");
    let cells: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(cells.len(), 2, "{cells:?}");
    for (cell, program) in cells.iter().zip(&programs) {
        assert_eq!(cell["host_bin"], program.as_str(), "{cell}");
        let name = program.rsplit('/').next().unwrap_or_default();
        assert_eq!(cell["last_lines"][0], name, "{cell}");
        assert_eq!(cell["outcome"], "inconclusive", "{cell}");
    }
}

/// A host against the user's own server: the official Python SDK's server, started by
/// `--server-command` inside each cell's loopback-only namespace. Claude Code answers the
/// healthy call and hangs on a stream death there too.
#[test]
#[ignore = "needs Claude Code in tests/peers/hosts and the Python SDK in .venv (scripts/setup-peers.sh) and root or unprivileged user namespaces: run scripts/test.sh"]
fn claude_code_against_the_python_sdk_server_started_in_its_namespace() {
    let bin = claude_newest();
    let python = root().join(".venv/bin/python");
    assert!(python.exists(), "run scripts/setup-peers.sh");
    let server = format!(
        "{} {} {{port}}",
        python.display(),
        root().join("tests/peers/py_server.py").display()
    );
    let (cells, err) = matrix(&[
        "matrix",
        "--host",
        "claude-code",
        "--host-bin",
        bin.to_str().expect("utf-8 path"),
        "--server-command",
        &server,
        "--cases",
        "healthy,reset-after-event,resumable",
        "--json",
    ]);
    assert_eq!(verdict(&cells, "healthy"), "ok: correct", "{err}");
    assert_eq!(
        verdict(&cells, "reset-after-event"),
        "hung: hangs on stream death",
        "{err}"
    );
    assert_eq!(cells["resumable"]["outcome"], "skipped", "{err}");
}
