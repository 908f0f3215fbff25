//! `mcpscope diff`, the schema checks and SARIF through the real binary: two recordings of
//! `mcpscope serve-test` made through the real proxy, the second with `echo` redefined
//! (`MCPSCOPE_TESTSERVER_DRIFT`: a required `count` in its `inputSchema`, no `readOnlyHint`);
//! calls whose arguments break `inputSchema` and whose result breaks `outputSchema`; and the
//! latency percentiles of a shipped recording against a computation by hand from its events.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::peers::{Proc, Proxy, ServeTest, temp_dir};
use mcpscope_engine::event::{Direction, EventKind};
use mcpscope_testserver::client::McpClient;
use serde_json::{Value, json};

fn mcpscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .output()
        .expect("run mcpscope")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `mcpscope serve-test` on an ephemeral loopback port, `echo` redefined when `drift`.
fn serve_test(drift: bool) -> (Proc, String) {
    let server = ServeTest::start_with(&[], |command| {
        if drift {
            command.env("MCPSCOPE_TESTSERVER_DRIFT", "1");
        } else {
            command.env_remove("MCPSCOPE_TESTSERVER_DRIFT");
        }
    });
    (server.proc, server.url)
}

/// Records one session through the real proxy: handshake, `tools/list`, `echo` with only its
/// `text`, `measure` with a number and with a string (which breaks its `outputSchema`).
async fn record(dir: &Path, name: &str, drift: bool) -> PathBuf {
    record_with_notices(dir, name, drift).await.0
}

/// [`record`], returning also the proxy's `--json` notices (its stdout).
async fn record_with_notices(dir: &Path, name: &str, drift: bool) -> (PathBuf, String) {
    let (mut server, url) = serve_test(drift);
    let path = dir.join(name);
    let mut proxy = Proxy::start(&url, &["--record", path.to_str().expect("path")]);
    let mut client = McpClient::new(&proxy.url("/mcp")).expect("client");
    client.handshake().await.expect("handshake");
    let list = client.request("tools/list", json!({})).await.expect("list");
    assert!(list.result().is_some(), "{list:?}");
    for (tool, args) in [
        ("echo", json!({"text": "hi"})),
        ("measure", json!({"value": 3})),
        ("measure", json!({"value": "three"})),
    ] {
        let answer = client.call(tool, args, false).await.expect("call");
        assert!(answer.result().is_some(), "{tool}: {answer:?}");
    }
    proxy.proc.terminate(Duration::from_secs(5));
    server.terminate(Duration::from_secs(5));
    assert!(common::peers::non_empty(&path), "{}", proxy.dump());
    let notices = proxy.stdout.text();
    (path, notices)
}

/// The schema findings among JSON notices: (tool, side, member, path, keyword), in order.
fn schema_lines(json_lines: &str) -> Vec<(String, String, String, String, String)> {
    json_lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "schema_violation")
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (s("tool"), s("side"), s("member"), s("path"), s("keyword"))
        })
        .collect()
}

async fn two_recordings(dir: &Path) -> (PathBuf, PathBuf) {
    let a = record(dir, "a.jsonl", false).await;
    let b = record(dir, "b.jsonl", true).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_names_the_changed_schema_and_annotation_and_fails_with_exit_code() {
    let dir = temp_dir();
    let (a, b) = two_recordings(dir.path()).await;
    let (a, b) = (a.to_str().expect("a"), b.to_str().expect("b"));

    let out = mcpscope(&["diff", a, b]);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    assert!(report.contains("DRIFT"), "{report}");
    assert!(
        report.contains("~ tool echo changed: annotations, inputSchema"),
        "{report}"
    );
    for line in [
        "~ /readOnlyHint: true → false",
        "+ /properties/count: {\"type\":\"integer\",\"minimum\":1}",
        "~ /required: [\"text\"] → [\"text\",\"count\"]",
    ] {
        assert!(report.contains(line), "{line:?} missing from\n{report}");
    }
    // Only echo changed: measure and the rest are the same definitions.
    assert!(!report.contains("tool measure changed"), "{report}");
    assert!(
        report.contains("context cost of tool definitions: "),
        "{report}"
    );

    let out = mcpscope(&["diff", "--exit-code", a, b]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let out = mcpscope(&["diff", "--exit-code", a, a]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("no drift"),
        "{}",
        text(&out.stdout)
    );

    // A baseline saved from A finds the same drift in B.
    let base = dir.path().join("base.json");
    let base = base.to_str().expect("base");
    let out = mcpscope(&["diff", "--save-baseline", base, a]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = mcpscope(&["diff", "--exit-code", "--json", "--baseline", base, b]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["drift"], true, "{v}");
    let echo = &v["changed"][0];
    assert_eq!(echo["name"], "echo", "{v}");
    assert_eq!(
        echo["members"]["annotations"][0],
        json!({"pointer": "/readOnlyHint", "before": true, "after": false}),
        "{v}"
    );
    assert_eq!(v["latency"]["b"]["tools"]["measure"]["count"], 2, "{v}");
    assert!(
        v["context_bytes"]["b"]["echo"].as_u64() > v["context_bytes"]["a"]["echo"].as_u64(),
        "{v}"
    );
    let out = mcpscope(&["diff", "--markdown", "--baseline", base, b]);
    let md = text(&out.stdout);
    assert!(md.contains("```diff\n"), "{md}");
    assert!(
        md.contains("! annotations/readOnlyHint: true → false"),
        "{md}"
    );

    // Bad arguments are usage errors.
    let out = mcpscope(&["diff", a]);
    assert_eq!(out.status.code(), Some(2));
    let out = mcpscope(&["diff", "--baseline", a, b]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not JSON"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_json_lines_and_the_replayed_ones_name_each_schema_violation() {
    let dir = temp_dir();
    let (path, live) = record_with_notices(dir.path(), "live.jsonl", true).await;
    let expected = vec![
        (
            "echo".to_string(),
            "input".to_string(),
            "arguments".to_string(),
            "$".to_string(),
            "required".to_string(),
        ),
        (
            "measure".to_string(),
            "output".to_string(),
            "structuredContent".to_string(),
            "$.value".to_string(),
            "type".to_string(),
        ),
    ];
    assert_eq!(schema_lines(&live), expected, "{live}");
    let out = mcpscope(&["replay", "--json", path.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let replayed = text(&out.stdout);
    assert_eq!(schema_lines(&replayed), expected, "{replayed}");
    // The readable lines say it too.
    let out = mcpscope(&["replay", "--headless", path.to_str().expect("path")]);
    let lines = text(&out.stdout);
    assert!(
        lines.contains("SCHEMA output  tools/call measure")
            && lines.contains("structuredContent $.value: type:"),
        "{lines}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_checks_flag_arguments_and_results_with_their_path_and_sarif_validates() {
    let dir = temp_dir();
    let (a, b) = two_recordings(dir.path()).await;
    let (a, b) = (a.to_str().expect("a"), b.to_str().expect("b"));
    let rules = "--fail-on=schema-input,schema-output";

    // A: echo's arguments fit; measure's string value breaks its outputSchema.
    let out = mcpscope(&["check", "--json", rules, a]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let failures = v["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{v}");
    assert_eq!(failures[0]["rule"], "schema-output", "{v}");
    assert_eq!(failures[0]["call"]["tool"], "measure", "{v}");
    let detail = failures[0]["detail"].as_str().expect("detail");
    assert!(
        detail.starts_with("structuredContent $.value: type: "),
        "{detail}"
    );
    assert_eq!(failures[0]["schema"]["path"], "$.value", "{v}");
    assert_eq!(failures[0]["schema"]["keyword"], "type", "{v}");
    assert_eq!(failures[0]["schema"]["member"], "structuredContent", "{v}");
    assert_eq!(v["latency"]["tools"]["measure"]["count"], 2, "{v}");

    // B: echo now requires `count`, which the call did not send.
    let out = mcpscope(&["check", rules, b]);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("[schema-input]"), "{report}");
    assert!(
        report.contains("schema-input: arguments $: required: \"count\" is a required property"),
        "{report}"
    );

    // The default rules leave schemas alone (a recording that passed still passes).
    let out = mcpscope(&["check", a]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // SARIF 2.1.0, valid by the published schema, each finding at its recording line.
    let sarif = dir.path().join("out.sarif");
    let out = mcpscope(&[
        "check",
        rules,
        "--sarif",
        sarif.to_str().expect("sarif"),
        a,
        b,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let log: Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).expect("sarif")).expect("JSON");
    let schema_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).expect("schema")).expect("JSON");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(&log)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{log:#}");
    let all = log["runs"][0]["results"].as_array().expect("results");
    let results: Vec<&Value> = all.iter().filter(|r| r["level"] == "error").collect();
    let ids: Vec<&str> = results
        .iter()
        .filter_map(|r| r["ruleId"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["schema-output", "schema-input", "schema-output"],
        "{log:#}"
    );
    assert_eq!(results[1]["properties"]["keyword"], "required", "{log:#}");
    assert_eq!(results[1]["properties"]["path"], "$", "{log:#}");
    // The location is the line where the call's exchange begins: its request follows.
    for result in results {
        let location = &result["locations"][0]["physicalLocation"];
        let file = match location["artifactLocation"]["index"].as_u64() {
            Some(0) => a,
            _ => b,
        };
        let line = location["region"]["startLine"].as_u64().expect("line") as usize;
        let lines: Vec<String> = std::fs::read_to_string(file)
            .expect("recording")
            .lines()
            .map(str::to_string)
            .collect();
        assert!(
            lines[line - 1].contains("\"stream_opened\""),
            "{}",
            lines[line - 1]
        );
        assert!(lines[line].contains("\"tools/call\""), "{}", lines[line]);
    }
    // Without the rule the check passes, and the finding is still reported: a warning after
    // the verdict line, a `warning` result in SARIF (a code-scanning upload shows it).
    let out = mcpscope(&["check", "--sarif", sarif.to_str().expect("sarif"), a]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let (verdict, rest) = report.split_once('\n').expect("lines");
    assert!(verdict.contains(": ok — "), "{report}");
    assert!(
        rest.contains("warning(s), not failing this check")
            && rest.contains("[schema-output]")
            && rest.contains("schema-output: structuredContent $.value: type: "),
        "{report}"
    );
    let log: Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).expect("sarif")).expect("JSON");
    assert!(validator.is_valid(&log), "{log:#}");
    let results = log["runs"][0]["results"].as_array().expect("results");
    let schema: Vec<&Value> = results
        .iter()
        .filter(|r| r["ruleId"] == "schema-output")
        .collect();
    assert_eq!(schema.len(), 1, "{log:#}");
    assert_eq!(schema[0]["level"], "warning", "{log:#}");
    assert!(
        results.iter().all(|r| r["level"] != "error"),
        "nothing fails: {log:#}"
    );
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    let orphaned = rules.iter().find(|r| r["id"] == "orphaned").expect("rule");
    assert_eq!(orphaned["defaultConfiguration"]["level"], "error");
    let schema_rule = rules
        .iter()
        .find(|r| r["id"] == "schema-output")
        .expect("rule");
    assert_eq!(schema_rule["defaultConfiguration"]["level"], "warning");
    let out = mcpscope(&["check", "--json", a]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["ok"], true, "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|f| f["rule"] == "schema-output")),
        "{v}"
    );
}

/// Nearest rank, as a person would: sort, take the ⌈p·n⌉-th.
fn by_hand(mut samples: Vec<f64>, p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let rank = (p * samples.len() as f64).ceil() as usize;
    samples[rank.max(1) - 1]
}

#[test]
fn latency_percentiles_match_a_hand_computation_on_a_shipped_recording() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings/healthy.jsonl");
    let recording = mcpscope_engine::record::read_file(&file).expect("read");
    // Requests by id, then their responses: milliseconds between the two messages.
    let mut sent: BTreeMap<String, (chrono::DateTime<chrono::Utc>, String, Option<String>)> =
        BTreeMap::new();
    let mut by_tool: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut by_method: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for event in &recording.events {
        let EventKind::Message { dir, body, .. } = &event.kind else {
            continue;
        };
        let id = body.get("id").map(Value::to_string);
        match (dir, id, body.get("method").and_then(Value::as_str)) {
            (Direction::ClientToServer, Some(id), Some(method)) => {
                let tool = body
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .filter(|_| method == "tools/call")
                    .map(str::to_string);
                sent.insert(id, (event.t, method.to_string(), tool));
            }
            (Direction::ServerToClient, Some(id), None) => {
                let Some((t0, method, tool)) = sent.remove(&id) else {
                    continue;
                };
                let ms = (event.t - t0).num_microseconds().expect("µs") as f64 / 1000.0;
                by_method.entry(method).or_default().push(ms);
                if let Some(tool) = tool {
                    by_tool.entry(tool).or_default().push(ms);
                }
            }
            _ => {}
        }
    }
    assert!(!by_tool.is_empty(), "no tool calls in {}", file.display());
    let out = mcpscope(&["check", "--json", file.to_str().expect("path")]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for (group, hand) in [("tools", &by_tool), ("methods", &by_method)] {
        for (name, samples) in hand {
            let row = &v["latency"][group][name];
            assert_eq!(row["timed"], samples.len(), "{name}: {row}");
            for (key, p) in [("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99)] {
                let expected = by_hand(samples.clone(), p);
                let got = row[key].as_f64().expect(key);
                assert!(
                    (got - expected).abs() < 0.0005,
                    "{group} {name} {key}: {got} vs {expected} by hand ({samples:?})"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_marks_schema_violations_and_the_detail_names_path_and_keyword() {
    use mcpscope_engine::model::Model;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    let dir = temp_dir();
    let file = record(dir.path(), "b.jsonl", true).await;
    let events = mcpscope_engine::record::read_file(&file)
        .expect("read")
        .events;
    let model = Model::from_events(&events).0;
    let now = model.last_t.unwrap_or_default();
    let mut app = mcpscope_tui::screen::proxy_view(None);
    let draw = |app: &mut mcpscope_tui::App| {
        mcpscope_tui::screen::text(&mcpscope_tui::render_to_buffer(app, &model, now, 160, 50))
    };
    let screen = draw(&mut app);
    let marked: Vec<&str> = screen.lines().filter(|l| l.contains("⚠schema")).collect();
    assert_eq!(marked.len(), 2, "{screen}");
    assert!(
        marked.iter().any(|l| l.contains("tools/call echo")),
        "{screen}"
    );
    assert!(
        marked.iter().any(|l| l.contains("tools/call measure")),
        "{screen}"
    );
    // Walk the calls until each flagged call's detail shows its path and keyword.
    let mut seen = (false, false);
    for _ in 0..model.calls.len() {
        let screen = draw(&mut app);
        seen.0 |=
            screen.contains("input: arguments $ — required: \"count\" is a required property");
        seen.1 |= screen.contains("output: structuredContent $.value — type: ");
        app.handle_key(
            KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE),
            &model,
        );
    }
    assert_eq!(seen, (true, true));
}
