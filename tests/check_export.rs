//! `mcpscope check` through the real binary on the shipped recordings: exit codes, the text,
//! JSON and JUnit reports; and every `--fail-on` rule on scripted recordings.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mcpscope_analysis::check::{FileCheck, Rule};
use mcpscope_engine::event::{EndHow, Event, Leg};
use mcpscope_engine::fixtures::{Script, scenario};
use mcpscope_export::Folded;
use serde_json::{Value, json};

fn recording(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings")
        .join(name)
}

fn mcpscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .output()
        .expect("run mcpscope")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes events as a recording file.
fn write_recording(dir: &Path, name: &str, events: &[Event]) -> PathBuf {
    let mut lines = vec![
        r#"{"format":"mcpscope-recording","version":1,"created":"2026-01-01T00:00:00Z","tool_version":"0.1.0","redacted":true}"#.to_string(),
    ];
    lines.extend(
        events
            .iter()
            .map(|e| serde_json::to_string(e).expect("event")),
    );
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").expect("write recording");
    path
}

#[test]
fn a_healthy_recording_passes() {
    let out = mcpscope(&["check", recording("healthy.jsonl").to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("healthy.jsonl: ok"), "{stdout}");
    assert!(stdout.contains("6 answered"), "{stdout}");
}

#[test]
fn dead_streams_fail_naming_the_orphaned_call() {
    for (name, how, id) in [
        ("server-dies.jsonl", "reset", "id=4"),
        ("sse-eof.jsonl", "eof", "id=3"),
    ] {
        let out = mcpscope(&["check", recording(name).to_str().expect("path")]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(stdout.contains(&format!("{name}: FAIL")), "{stdout}");
        let line = stdout
            .lines()
            .find(|l| l.contains("✗"))
            .unwrap_or_else(|| panic!("no failing call in {stdout}"));
        for part in [
            "tools/call poke",
            id,
            "[orphaned]",
            "session ",
            "stream POST#",
        ] {
            assert!(line.contains(part), "{part:?} missing from {line:?}");
        }
        assert!(
            stdout.contains("died ") && stdout.contains(&format!(" {how} (upstream leg)")),
            "{stdout}"
        );
        assert!(
            stdout.contains("stream ended before the response"),
            "{stdout}"
        );
    }
}

#[test]
fn several_files_fail_when_one_does() {
    let out = mcpscope(&[
        "check",
        recording("healthy.jsonl").to_str().expect("path"),
        recording("sse-eof.jsonl").to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("healthy.jsonl: ok"), "{stdout}");
    assert!(stdout.contains("sse-eof.jsonl: FAIL"), "{stdout}");
}

#[test]
fn fail_on_chooses_the_rules() {
    let file = recording("status-503.jsonl");
    let file = file.to_str().expect("path");
    assert_eq!(mcpscope(&["check", file]).status.code(), Some(0));
    let out = mcpscope(&["check", "--fail-on", "http-error", file]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("HTTP 503"),
        "{}",
        text(&out.stdout)
    );
    let out = mcpscope(&["check", "--fail-on", "failed,injected-fault", file]);
    assert_eq!(out.status.code(), Some(1));
    let server_dies = recording("server-dies.jsonl");
    let out = mcpscope(&[
        "check",
        "--fail-on",
        "tool-error,pending",
        server_dies.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn an_unknown_rule_is_a_usage_error_naming_it() {
    let out = mcpscope(&[
        "check",
        "--fail-on",
        "orphaned,exploded",
        recording("healthy.jsonl").to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("\"exploded\""), "{stderr}");
    for word in Rule::ALL.map(Rule::word) {
        assert!(stderr.contains(word), "{word} not listed in {stderr}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn a_corrupt_recording_is_a_usage_error_with_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.jsonl");
    let mut content = std::fs::read_to_string(recording("healthy.jsonl")).expect("read");
    content = content.replacen("\"kind\":\"message\"", "\"kind\":\"mystery\"", 1);
    let line = content
        .lines()
        .position(|l| l.contains("mystery"))
        .expect("edited line")
        + 1;
    std::fs::write(&path, content).expect("write");
    let out = mcpscope(&["check", path.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:{line}:", path.display())),
        "{stderr}"
    );
    let missing = dir.path().join("missing.jsonl");
    let out = mcpscope(&["check", missing.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.jsonl"));
}

#[test]
fn json_prints_one_object_per_file() {
    let out = mcpscope(&[
        "check",
        "--json",
        recording("healthy.jsonl").to_str().expect("path"),
        recording("server-dies.jsonl").to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let reports: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["ok"], json!(true));
    assert_eq!(reports[0]["counts"]["answered"], json!(6));
    assert_eq!(reports[1]["ok"], json!(false));
    let failure = &reports[1]["failures"][0];
    assert_eq!(failure["rule"], json!("orphaned"));
    assert_eq!(failure["call"]["tool"], json!("poke"));
    assert_eq!(failure["call"]["id"], json!(4));
    assert_eq!(failure["call"]["death"]["how"], json!("reset"));
    assert_eq!(failure["call"]["death"]["leg"], json!("upstream"));
    assert_eq!(
        failure["call"]["cause"],
        json!("stream ended before the response")
    );
}

#[test]
fn junit_has_a_suite_per_recording_and_a_case_per_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let xml_path = dir.path().join("report.xml");
    let names = [
        "healthy.jsonl",
        "server-dies.jsonl",
        "sse-eof.jsonl",
        "resumed.jsonl",
    ];
    let files: Vec<String> = names
        .iter()
        .map(|n| recording(n).display().to_string())
        .collect();
    let mut args = vec!["check", "--junit", xml_path.to_str().expect("path")];
    args.extend(files.iter().map(String::as_str));
    let out = mcpscope(&args);
    assert_eq!(out.status.code(), Some(1));
    let xml = std::fs::read_to_string(&xml_path).expect("junit written");
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), names.len());
    for (suite, (name, file)) in suites.iter().zip(names.iter().zip(&files)) {
        assert_eq!(suite.attribute("name"), Some(file.as_str()));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let folded = mcpscope_export::load(&recording(name), &mut std::io::sink()).expect("load");
        assert_eq!(cases.len(), folded.model.calls.len(), "{name}");
        assert_eq!(
            suite.attribute("tests"),
            Some(cases.len().to_string().as_str())
        );
        let failed: Vec<_> = cases
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
            .collect();
        assert_eq!(
            suite.attribute("failures"),
            Some(failed.len().to_string().as_str())
        );
        for (case, call) in cases.iter().zip(&folded.model.calls) {
            assert_eq!(
                case.attribute("name"),
                Some(format!("{} #{}", call.title(), call.id_text()).as_str())
            );
        }
        match *name {
            "healthy.jsonl" | "resumed.jsonl" => assert!(failed.is_empty(), "{name}"),
            _ => {
                assert_eq!(failed.len(), 1, "{name}");
                let case = failed[0];
                assert!(
                    case.attribute("name")
                        .is_some_and(|n| n.starts_with("tools/call poke #"))
                );
                let failure = case
                    .children()
                    .find(|n| n.has_tag_name("failure"))
                    .expect("failure");
                assert_eq!(failure.attribute("type"), Some("orphaned"));
                assert!(
                    failure
                        .attribute("message")
                        .is_some_and(|m| m.contains("stream ended before the response"))
                );
                let body = failure.text().unwrap_or_default();
                assert!(
                    body.contains("died:") && body.contains("upstream leg"),
                    "{body}"
                );
            }
        }
    }
}

/// A session whose `poke` (not annotated idempotent) dies on a reset and is sent again, whose
/// `echo` (annotated idempotent) is retried the same way, and whose `fail` reports a tool error.
fn retries() -> Vec<Event> {
    let mut s = Script::new();
    s.handshake(0, 1, "s1");
    s.open(10, 2, "POST", Some("s1"))
        .send(
            10,
            2,
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}),
        )
        .head(12, 2, 200, "json", Some("s1"))
        .reply(
            12,
            2,
            json!({"jsonrpc":"2.0","id":1,"result":{"tools":[
                {"name":"echo","annotations":{"readOnlyHint":true,"idempotentHint":true}},
                {"name":"poke","annotations":{"idempotentHint":false}},
                {"name":"fail"}]}}),
        )
        .end(13, 2, EndHow::Eof, Leg::Upstream);
    s.call(100, 3, "s1", 2, "poke")
        .end(200, 3, EndHow::Reset, Leg::Upstream);
    s.call(300, 4, "s1", 3, "poke")
        .sse(
            310,
            4,
            None,
            json!({"jsonrpc":"2.0","id":3,"result":{"content":[]}}),
            (0, 60),
        )
        .end(311, 4, EndHow::Eof, Leg::Upstream);
    s.call(400, 5, "s1", 4, "echo")
        .end(450, 5, EndHow::Reset, Leg::Upstream);
    s.call(500, 6, "s1", 5, "echo")
        .sse(
            510,
            6,
            None,
            json!({"jsonrpc":"2.0","id":5,"result":{"content":[]}}),
            (0, 60),
        )
        .end(511, 6, EndHow::Eof, Leg::Upstream);
    s.call(600, 7, "s1", 6, "fail")
        .sse(
            610,
            7,
            None,
            json!({"jsonrpc":"2.0","id":6,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}),
            (0, 60),
        )
        .end(611, 7, EndHow::Eof, Leg::Upstream);
    s.events
}

fn found(events: Vec<Event>, rules: &[Rule]) -> Vec<(Rule, Option<String>)> {
    let check = FileCheck::new("script", Folded::from_events(events), rules);
    check
        .findings
        .iter()
        .map(|f| {
            let id = f
                .call
                .and_then(|i| check.folded.model.calls.get(i))
                .map(|c| c.id_text());
            (f.rule, id)
        })
        .collect()
}

#[test]
fn a_non_idempotent_tool_sent_again_may_have_run_twice() {
    let findings = found(retries(), &Rule::ALL);
    assert!(
        findings.contains(&(Rule::DoubleExecution, Some("3".into()))),
        "{findings:?}"
    );
    assert!(
        findings.contains(&(Rule::NonIdempotentRetry, Some("3".into()))),
        "{findings:?}"
    );
    // The idempotent echo's retry is no finding; the tool error is.
    assert!(!findings.iter().any(|(r, id)| id.as_deref() == Some("5")
        && matches!(r, Rule::DoubleExecution | Rule::NonIdempotentRetry)));
    assert!(
        findings.contains(&(Rule::ToolError, Some("6".into()))),
        "{findings:?}"
    );
    assert!(
        findings.contains(&(Rule::Orphaned, Some("2".into()))),
        "{findings:?}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_recording(dir.path(), "retries.jsonl", &retries());
    let path = path.to_str().expect("path");
    let out = mcpscope(&["check", "--fail-on", "double-execution", path]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("tools/call poke id=3 [double-execution]"),
        "{stdout}"
    );
    let out = mcpscope(&["check", "--fail-on", "tool-error", path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("boom"), "{}", text(&out.stdout));
}

#[test]
fn pending_and_never_resumed_calls_are_found() {
    // The scenario ends with `peek` pending and `slow` resumable (its window still open).
    let findings = found(
        scenario(),
        &[Rule::Pending, Rule::ResumableNeverResumed, Rule::Orphaned],
    );
    assert!(
        findings.contains(&(Rule::Pending, Some("6".into()))),
        "{findings:?}"
    );
    assert!(
        findings.contains(&(Rule::ResumableNeverResumed, Some("4".into()))),
        "{findings:?}"
    );
    assert!(
        findings.contains(&(Rule::Orphaned, Some("3".into()))),
        "{findings:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_junit_report_is_never_written_through_a_planted_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").expect("victim");
    let xml_path = dir.path().join("report.xml");
    std::os::unix::fs::symlink(&victim, &xml_path).expect("plant a link");
    let healthy = recording("healthy.jsonl").display().to_string();
    let out = mcpscope(&[
        "check",
        "--junit",
        xml_path.to_str().expect("path"),
        &healthy,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
    // A plain path is written, owner-only.
    std::fs::remove_file(&xml_path).expect("rm");
    let out = mcpscope(&[
        "check",
        "--junit",
        xml_path.to_str().expect("path"),
        &healthy,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&xml_path)
        .expect("written")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// A task-augmented `slow` (ttl `ttl` ms) whose `tasks/result` stream is reset, then `wait` ms.
fn task_script(ttl: u64, wait: i64) -> Script {
    let s1: &[(&str, &str)] = &[("mcp-session-id", "s1")];
    let mut s = Script::ticking();
    s.initialize("2025-11-25")
        .post(
            2,
            s1,
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                   "params":{"name":"slow","arguments":{},"task":{"ttl":ttl}}}),
        )
        .respond(2, 200, "application/json", s1)
        .json_body(
            2,
            json!({"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1","status":"working","ttl":ttl}}}),
        )
        .finish(2, EndHow::Eof, Leg::Upstream)
        .post(
            3,
            s1,
            json!({"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t1"}}),
        )
        .respond(3, 200, "text/event-stream", s1)
        .finish(3, EndHow::Reset, Leg::Upstream)
        .wait(wait)
        .push(mcpscope_engine::event::EventKind::Note {
            stream: None,
            text: "end".into(),
        });
    s
}

#[test]
fn check_names_a_lost_task_result_and_an_expired_task() {
    let rules = [Rule::TaskExpired, Rule::TaskResultLost];
    let words = |s: &Script| -> Vec<&'static str> {
        let (model, _) = s.fold();
        mcpscope_analysis::check::findings(&model, &rules)
            .iter()
            .map(|f| f.rule.word())
            .collect()
    };
    // The wait died and the client never asked again: the result is lost, the task not expired.
    assert_eq!(words(&task_script(60_000, 1_000)), ["task-result-lost"]);
    // Past the ttl: expired too.
    assert_eq!(
        words(&task_script(500, 1_000)),
        ["task-expired", "task-result-lost"]
    );
}

/// A dead `tasks/result` wait is no orphaned call: the task lived, and the client asked again
/// and got its result. The shipped recording (the TypeScript SDK's task client and server
/// through the proxy, the first `tasks/result` stream reset) passes the default rules, and
/// its requests about the task are counted under the operation, not as calls of their own.
#[test]
fn a_dead_task_result_wait_the_client_recovered_from_passes() {
    let path = recording("tasks-reset.jsonl");
    let out = mcpscope(&["check", "--json", path.to_str().expect("utf-8")]);
    let report: Value = serde_json::from_str(text(&out.stdout).trim()).expect("one object");
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["counts"].get("orphaned"), None, "{report:#}");
    // initialize and the task-augmented tools/call stand alone; tasks/get and tasks/result
    // belong to the operation.
    assert_eq!(report["counts"]["answered"], report["calls"], "{report:#}");
    // Asked again and answered: no result was lost either.
    let out = mcpscope(&[
        "check",
        "--fail-on",
        "task-result-lost,orphaned",
        path.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stdout));
}

#[test]
fn a_resumption_from_an_older_event_id_is_found_on_the_call_that_waited_by_default() {
    let s1: &[(&str, &str)] = &[("mcp-session-id", "s1")];
    let mut s = Script::ticking();
    s.initialize("2025-11-25")
        .post(
            2,
            s1,
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}),
        )
        .respond(2, 200, "text/event-stream", s1)
        .event(2, Some("s2-0"), None)
        .event(2, Some("s2-1"), None)
        .finish(2, EndHow::Reset, Leg::Upstream)
        .open_with(
            3,
            "GET",
            &[("mcp-session-id", "s1"), ("last-event-id", "s2-0")],
        )
        .respond(3, 200, "text/event-stream", s1)
        .event(
            3,
            Some("s2-2"),
            Some(json!({"jsonrpc":"2.0","id":1,"result":{"content":[]}})),
        );
    let default = Rule::parse_list(mcpscope_analysis::check::DEFAULT_FAIL_ON).expect("rules");
    assert_eq!(
        found(s.events.clone(), &default),
        vec![(Rule::ResumeMismatch, Some("1".into()))],
        "answered through the replay, and still found"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_recording(dir.path(), "stale.jsonl", &s.events);
    let out = mcpscope(&["check", path.to_str().expect("utf-8")]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("resume-mismatch")
            && stdout.contains("from event id s2-0, an older id; the last id #2 carried was s2-1"),
        "{stdout}"
    );
}
