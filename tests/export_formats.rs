//! `mcpscope export` through the real binary on every shipped recording: HAR 1.2 validated
//! against its schema, OTLP/JSON span structure, Mermaid statements by a small grammar, and
//! the Markdown calls table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn recordings() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("recordings/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    files
}

fn recording(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings")
        .join(name)
}

fn export(format: &str, file: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["export", "--format", format])
        .args(extra)
        .arg(file)
        .output()
        .expect("run mcpscope")
}

fn export_ok(format: &str, file: &Path, extra: &[&str]) -> String {
    let out = export(format, file, extra);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{format} {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn export_json(format: &str, file: &Path) -> Value {
    serde_json::from_str(&export_ok(format, file, &[])).expect("JSON")
}

fn folded(file: &Path) -> mcpscope_export::Folded {
    mcpscope_export::load(file, &mut std::io::sink()).expect("load")
}

fn har_validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/har-1.2.schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("schema")).expect("JSON");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("a valid schema")
}

fn schema_errors(validator: &jsonschema::Validator, har: &Value) -> Vec<String> {
    validator
        .iter_errors(har)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

#[test]
fn har_validates_with_every_exchange_and_its_timings() {
    let validator = har_validator();
    for file in recordings() {
        let har = export_json("har", &file);
        let errors = schema_errors(&validator, &har);
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
        assert_eq!(har["log"]["version"], json!("1.2"));
        assert_eq!(har["log"]["creator"]["name"], json!("mcpscope"));
        assert_eq!(
            har["log"]["creator"]["version"],
            json!(env!("CARGO_PKG_VERSION"))
        );
        let model = folded(&file).model;
        let entries = har["log"]["entries"].as_array().expect("entries");
        assert_eq!(entries.len(), model.streams.len(), "{}", file.display());
        for (entry, stream) in entries.iter().zip(&model.streams) {
            assert_eq!(entry["_mcp"]["stream"], json!(stream.id));
            assert_eq!(entry["request"]["method"], json!(stream.method));
            let timings = &entry["timings"];
            let parts: Vec<f64> = ["send", "wait", "receive"]
                .iter()
                .map(|k| timings[k].as_f64().expect("timing"))
                .collect();
            if stream.head_at.is_some() && stream.ended.is_some() {
                assert!(parts.iter().all(|t| *t >= 0.0), "{timings}");
            }
            let sum: f64 = parts.iter().filter(|t| **t >= 0.0).sum();
            let time = entry["time"].as_f64().expect("time");
            assert!((time - sum).abs() < 0.002, "{time} vs {sum}");
            if let Some(end) = &stream.ended {
                let total = (end.at - stream.opened_at).num_microseconds().expect("us") as f64;
                assert!((time - total / 1000.0).abs() < 0.002, "{time} vs {total}");
            }
            if let Some(text) = entry["request"]["postData"]["text"].as_str() {
                for line in text.lines() {
                    serde_json::from_str::<Value>(line).expect("the client's JSON message");
                }
            }
        }
    }
}

#[test]
fn har_carries_sse_bodies_and_the_mcp_view() {
    let har = export_json("har", &recording("server-dies.jsonl"));
    let entries = har["log"]["entries"].as_array().expect("entries");
    let by_stream: HashMap<u64, &Value> = entries
        .iter()
        .map(|e| (e["_mcp"]["stream"].as_u64().expect("id"), e))
        .collect();
    let tools = by_stream[&4]["response"]["content"]["text"]
        .as_str()
        .expect("SSE text");
    assert!(tools.starts_with("event: message\ndata: {"), "{tools}");
    assert!(tools.ends_with("}\n\n"), "{tools}");
    let dead = by_stream[&6];
    assert_eq!(dead["_mcp"]["fate"], json!("died"));
    assert_eq!(dead["_mcp"]["end"]["how"], json!("reset"));
    assert_eq!(dead["_mcp"]["end"]["leg"], json!("upstream"));
    assert_eq!(dead["_mcp"]["faults"], json!(["server-dies:400ms"]));
    assert_eq!(dead["_mcp"]["calls"][0]["verdict"], json!("orphaned"));
    assert_eq!(dead["_mcp"]["calls"][0]["tool"], json!("poke"));
    assert!(
        dead["request"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:") && u.ends_with("/mcp"))
    );
    let resumed = export_json("har", &recording("resumed.jsonl"));
    let text = resumed.to_string();
    assert!(
        text.contains("id: s2-1\\nevent: message\\ndata: "),
        "{text}"
    );
}

#[test]
fn the_har_schema_rejects_a_broken_entry() {
    let validator = har_validator();
    let mut har = export_json("har", &recording("healthy.jsonl"));
    assert!(schema_errors(&validator, &har).is_empty());
    if let Some(entry) = har["log"]["entries"][0].as_object_mut() {
        entry.remove("timings");
    }
    har["log"]["entries"][1]["response"]["status"] = json!("200");
    assert_eq!(schema_errors(&validator, &har).len(), 2);
}

fn spans(otlp: &Value) -> Vec<Value> {
    otlp["resourceSpans"]
        .as_array()
        .expect("resourceSpans")
        .iter()
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == json!(key))
        .map(|a| &a["value"])
}

fn is_hex(value: &Value, len: usize) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn otlp_has_a_span_per_call_under_a_span_per_session() {
    for file in recordings() {
        let otlp = export_json("otlp", &file);
        let model = folded(&file).model;
        let spans = spans(&otlp);
        let sessions = model
            .sessions
            .iter()
            .filter(|s| !s.streams.is_empty())
            .count();
        // A task operation has a span of its own, the parent of its requests' spans.
        let operations = model.calls.iter().filter(|c| c.task().is_some()).count();
        assert_eq!(
            spans.len(),
            model.calls.len() + sessions + operations,
            "{}",
            file.display()
        );
        let roots: HashMap<&str, &Value> = spans
            .iter()
            .filter(|s| s["parentSpanId"] == json!(""))
            .map(|s| (s["spanId"].as_str().expect("id"), s))
            .collect();
        assert_eq!(roots.len(), sessions);
        let operation_spans: HashMap<&str, &Value> = spans
            .iter()
            .filter(|s| {
                attribute(s, "mcp.task.id").is_some()
                    && attribute(s, "mcpscope.task.polls").is_some()
            })
            .map(|s| (s["spanId"].as_str().expect("id"), s))
            .collect();
        assert_eq!(operation_spans.len(), operations);
        for op in operation_spans.values() {
            assert!(
                roots.contains_key(op["parentSpanId"].as_str().expect("parent")),
                "{op}"
            );
        }
        let calls: Vec<&Value> = spans
            .iter()
            .filter(|s| s["parentSpanId"] != json!(""))
            .filter(|s| !operation_spans.contains_key(s["spanId"].as_str().expect("id")))
            .collect();
        assert_eq!(calls.len(), model.calls.len());
        for (span, call) in calls.iter().zip(&model.calls) {
            assert!(
                is_hex(&span["traceId"], 32) && is_hex(&span["spanId"], 16),
                "{span}"
            );
            let parent_id = span["parentSpanId"].as_str().expect("parent");
            let parent = roots
                .get(parent_id)
                .or_else(|| operation_spans.get(parent_id))
                .expect("the parent is a session span or a task operation's span");
            assert_eq!(
                operation_spans.contains_key(parent_id),
                call.task().is_some() || call.about_task().is_some(),
                "{span}"
            );
            assert_eq!(parent["traceId"], span["traceId"]);
            assert_eq!(span["name"], json!(call.title()));
            assert_eq!(
                attribute(span, "mcp.method.name"),
                Some(&json!({"stringValue": call.method}))
            );
            assert_eq!(
                attribute(span, "jsonrpc.request.id"),
                Some(&json!({"stringValue": call.id_text()}))
            );
            assert_eq!(
                attribute(span, "network.transport"),
                Some(&json!({"stringValue": "tcp"}))
            );
            assert!(attribute(span, "server.port").is_some_and(|p| p["intValue"].is_string()));
            if let Some(tool) = &call.tool {
                assert_eq!(
                    attribute(span, "gen_ai.tool.name"),
                    Some(&json!({"stringValue": tool}))
                );
            }
            let start: u128 = span["startTimeUnixNano"]
                .as_str()
                .expect("start")
                .parse()
                .expect("nanos");
            let end: u128 = span["endTimeUnixNano"]
                .as_str()
                .expect("end")
                .parse()
                .expect("nanos");
            assert!(start <= end);
            let error = span["status"]["code"] == json!(2);
            let should = matches!(call.verdict.name(), "orphaned" | "error");
            assert_eq!(error, should, "{}: {span}", file.display());
            if should {
                assert!(attribute(span, "error.type").is_some(), "{span}");
            }
            if call.verdict.name() == "orphaned" {
                let died = span["events"]
                    .as_array()
                    .expect("events")
                    .iter()
                    .find(|e| e["name"] == json!("stream_died"))
                    .expect("a stream_died event");
                let keys: Vec<&Value> = died["attributes"]
                    .as_array()
                    .expect("attributes")
                    .iter()
                    .map(|a| &a["key"])
                    .collect();
                assert!(keys.contains(&&json!("how")) && keys.contains(&&json!("leg")));
            }
        }
        // The same recording gives the same ids.
        assert_eq!(export_json("otlp", &file), otlp);
    }
}

fn nanos_of(span: &Value, key: &str) -> u128 {
    span[key].as_str().expect("nanos").parse().expect("nanos")
}

/// A task operation is one span from the create to the `tasks/result` answer, naming the task,
/// its status and its polls; the create, the `tasks/get` and both `tasks/result` requests (the
/// first one's stream was reset) are its children, inside it.
#[test]
fn otlp_has_a_span_per_task_operation_over_its_requests() {
    let spans = spans(&export_json("otlp", &recording("tasks-reset.jsonl")));
    let op = spans
        .iter()
        .find(|s| attribute(s, "mcpscope.task.polls").is_some())
        .expect("a task operation span");
    let task_id = attribute(op, "mcp.task.id").expect("mcp.task.id").clone();
    assert!(task_id["stringValue"].is_string(), "{op}");
    assert!(attribute(op, "mcp.task.status").is_some(), "{op}");
    assert_eq!(
        attribute(op, "mcpscope.task.polls"),
        Some(&json!({"intValue": "1"})),
        "{op}"
    );
    assert_eq!(
        attribute(op, "mcpscope.task.waits_lost"),
        Some(&json!({"intValue": "1"})),
        "{op}"
    );
    assert_eq!(
        attribute(op, "mcpscope.verdict"),
        Some(&json!({"stringValue": "answered"}))
    );
    let children: Vec<&Value> = spans
        .iter()
        .filter(|s| s["parentSpanId"] == op["spanId"])
        .collect();
    let methods: Vec<&str> = children
        .iter()
        .filter_map(|s| attribute(s, "mcp.method.name")?["stringValue"].as_str())
        .collect();
    assert_eq!(
        methods,
        ["tools/call", "tasks/get", "tasks/result", "tasks/result"]
    );
    let (start, end) = (
        nanos_of(op, "startTimeUnixNano"),
        nanos_of(op, "endTimeUnixNano"),
    );
    for child in &children {
        assert_eq!(attribute(child, "mcp.task.id"), Some(&task_id), "{child}");
        assert!(nanos_of(child, "startTimeUnixNano") >= start, "{child}");
        assert!(nanos_of(child, "endTimeUnixNano") <= end, "{child}");
    }
    // The create ends when the task is created, long before the operation.
    assert!(nanos_of(children[0], "endTimeUnixNano") < nanos_of(children[3], "startTimeUnixNano"));
    assert_eq!(
        nanos_of(children[3], "endTimeUnixNano"),
        end,
        "ends with the result"
    );
}

#[test]
fn otlp_sse_events_carry_their_ids() {
    let otlp = export_json("otlp", &recording("resumed.jsonl"));
    let slow = spans(&otlp)
        .into_iter()
        .find(|s| s["name"] == json!("tools/call slow"))
        .expect("slow span");
    let ids: Vec<&str> = slow["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == json!("sse_event"))
        .filter_map(|e| {
            e["attributes"]
                .as_array()?
                .iter()
                .find(|a| a["key"] == json!("id"))?["value"]["stringValue"]
                .as_str()
        })
        .collect();
    assert_eq!(ids, ["s2-0", "s2-1", "s2-2", "s2-3", "s2-4", "s2-5"]);
}

#[test]
fn otlp_follows_a_requests_traceparent() {
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let content = std::fs::read_to_string(recording("healthy.jsonl")).expect("read");
    let mut edited = Vec::new();
    let mut done = false;
    for line in content.lines() {
        let mut value: Value = serde_json::from_str(line).expect("line");
        if !done && value["body"]["method"] == json!("tools/call") {
            value["body"]["params"]["_meta"] =
                json!({"traceparent": format!("00-{trace}-{parent}-01")});
            done = true;
        }
        edited.push(value.to_string());
    }
    assert!(done);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("traced.jsonl");
    std::fs::write(&path, edited.join("\n") + "\n").expect("write");
    let spans = spans(&export_json("otlp", &path));
    let traced: Vec<&Value> = spans
        .iter()
        .filter(|s| s["traceId"] == json!(trace))
        .collect();
    assert_eq!(traced.len(), 1, "{spans:#?}");
    assert_eq!(traced[0]["parentSpanId"], json!(parent));
    assert!(
        traced[0]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("tools/call "))
    );
}

const PARTICIPANTS: [&str; 3] = ["Client", "mcpscope", "Server"];
const ARROWS: [&str; 8] = ["-->>", "->>", "--x", "-x", "--)", "-)", "-->", "->"];

/// Text in a message or note: one line, `#` only opening an entity code and `;` only ending one.
fn valid_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("empty text".into());
    }
    let mut rest = text;
    while let Some(at) = rest.find(['#', ';']) {
        if rest[at..].starts_with(';') {
            return Err(format!("a bare ';' in {text:?}"));
        }
        let after = &rest[at + 1..];
        let end = after
            .find(';')
            .ok_or_else(|| format!("a bare '#' in {text:?}"))?;
        let code = &after[..end];
        let numeric = !code.is_empty() && code.bytes().all(|b| b.is_ascii_digit());
        let named = !code.is_empty() && code.bytes().all(|b| b.is_ascii_alphabetic());
        if !numeric && !named {
            return Err(format!("a bad entity #{code}; in {text:?}"));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

/// One statement of a `sequenceDiagram`: a participant, a message or a note.
fn valid_statement(line: &str) -> Result<(), String> {
    let body = line
        .strip_prefix("    ")
        .ok_or_else(|| format!("not indented: {line:?}"))?;
    if let Some(name) = body.strip_prefix("participant ") {
        return PARTICIPANTS
            .contains(&name)
            .then_some(())
            .ok_or_else(|| format!("unknown participant {name:?}"));
    }
    if let Some(note) = body.strip_prefix("Note over ") {
        let (over, text) = note
            .split_once(": ")
            .ok_or_else(|| format!("a note without text: {line:?}"))?;
        let over: Vec<&str> = over.split(',').collect();
        if over.len() > 2 || !over.iter().all(|p| PARTICIPANTS.contains(p)) {
            return Err(format!("a note over unknown participants: {line:?}"));
        }
        return valid_text(text);
    }
    let (head, text) = body
        .split_once(": ")
        .ok_or_else(|| format!("a message without text: {line:?}"))?;
    let from = PARTICIPANTS
        .iter()
        .find(|p| head.starts_with(**p))
        .ok_or_else(|| format!("no sender in {line:?}"))?;
    let rest = &head[from.len()..];
    let arrow = ARROWS
        .iter()
        .find(|a| rest.starts_with(**a))
        .ok_or_else(|| format!("no arrow in {line:?}"))?;
    let to = &rest[arrow.len()..];
    if !PARTICIPANTS.contains(&to) || to == *from {
        return Err(format!("bad receiver {to:?} in {line:?}"));
    }
    valid_text(text)
}

fn valid_diagram(text: &str) -> Result<(), String> {
    let mut lines = text.lines();
    if lines.next() != Some("sequenceDiagram") {
        return Err("does not start with sequenceDiagram".into());
    }
    lines.try_for_each(valid_statement)
}

#[test]
fn the_grammar_rejects_what_mermaid_would() {
    assert!(valid_statement("    Client->>Server: hi #59; there").is_ok());
    assert!(valid_statement("    Client->>Server: a; b").is_err());
    assert!(valid_statement("    Client->>Server: POST#6").is_err());
    assert!(valid_statement("    Client->>Nobody: x").is_err());
    assert!(valid_statement("    Note over Client,Server: ok").is_ok());
    assert!(valid_statement("Client->>Server: x").is_err());
}

#[test]
fn mermaid_diagrams_are_valid_statements() {
    for file in recordings() {
        let whole = export_ok("mermaid", &file, &[]);
        valid_diagram(&whole).unwrap_or_else(|e| panic!("{}: {e}\n{whole}", file.display()));
        for number in 1..=folded(&file).model.calls.len() {
            let one = export_ok("mermaid", &file, &["--call", &number.to_string()]);
            valid_diagram(&one).unwrap_or_else(|e| panic!("{}: {e}\n{one}", file.display()));
        }
    }
}

#[test]
fn the_server_dies_diagram_shows_the_death() {
    let file = recording("server-dies.jsonl");
    let diagram = export_ok("mermaid", &file, &["--call", "4"]);
    assert!(
        diagram.contains("Client->>mcpscope: tools/call poke id 4"),
        "{diagram}"
    );
    assert!(
        diagram.contains("Server-xmcpscope: POST 6 sse reset"),
        "{diagram}"
    );
    assert!(
        diagram.contains(
            "Note over Client,Server: POST 6 sse died: reset on the upstream leg at 23:08:53.423"
        ),
        "{diagram}"
    );
    assert!(
        diagram.contains("call 4 orphaned: stream ended before the response"),
        "{diagram}"
    );
    let resumed = export_ok("mermaid", &recording("resumed.jsonl"), &["--call", "2"]);
    assert!(resumed.contains("notifications/progress 3/4"), "{resumed}");
    assert!(resumed.contains("resumes after event s2-2"), "{resumed}");
    let out = export("mermaid", &file, &["--call", "99"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--call 99"));
}

#[test]
fn markdown_lists_every_call() {
    for file in recordings() {
        let table = export_ok("markdown", &file, &[]);
        let model = folded(&file).model;
        // The calls table, up to the blank line before the latency section.
        let lines: Vec<&str> = table.lines().take_while(|l| !l.is_empty()).collect();
        assert_eq!(
            lines[0],
            "| # | time | method | tool | id | session | stream | verdict | death / cause | elapsed |"
        );
        let rows = model.calls.iter().filter(|c| c.stands_alone()).count();
        assert_eq!(lines.len(), rows + 2, "{table}");
        for line in &lines[2..] {
            assert_eq!(line.matches(" | ").count(), 9, "{line}");
        }
    }
    let table = export_ok("markdown", &recording("sse-eof.jsonl"), &[]);
    let row = table
        .lines()
        .find(|l| l.contains("poke"))
        .expect("poke row");
    assert!(
        row.contains("| orphaned |") && row.contains("eof (upstream leg)"),
        "{row}"
    );
}

/// A task operation in Markdown is one row (task id, status, polls, the dead wait), and in
/// Mermaid one sequence: the create, the task created, the `tasks/get` poll, the lost
/// `tasks/result` wait, the second `tasks/result` and the result; a request about the task
/// given to `--call` draws its operation.
#[test]
fn task_operations_show_their_polls_under_the_operation() {
    let file = recording("tasks-reset.jsonl");
    let model = folded(&file).model;
    let op = model
        .calls
        .iter()
        .find(|c| c.task().is_some())
        .expect("a task operation");
    let task = op.task().expect("task");
    let table = export_ok("markdown", &file, &[]);
    let rows: Vec<&str> = table.lines().filter(|l| l.contains("tasks/")).collect();
    assert!(rows.is_empty(), "no rows of their own: {rows:?}");
    let row = table
        .lines()
        .find(|l| l.contains(&task.id))
        .unwrap_or_else(|| panic!("an operation row naming the task\n{table}"));
    assert!(row.contains("| tools/call |"), "{row}");
    assert!(
        row.contains(&format!("task {} {}, 1 poll", task.id, task.status.name())),
        "{row}"
    );
    assert!(row.contains("1 result wait died, asked again 1"), "{row}");

    let number = op.index + 1;
    let diagram = export_ok("mermaid", &file, &["--call", &number.to_string()]);
    let short = task.short_id();
    let order = [
        format!("task {short} created"),
        "tasks/get id".to_string(),
        "tasks/result id".to_string(),
        format!("lost: the task {short} lives, ask again"),
        "tasks/result id".to_string(),
        "-->>Client: result id".to_string(),
    ];
    let mut at = 0;
    for needle in &order {
        let found = diagram[at..]
            .find(needle.as_str())
            .unwrap_or_else(|| panic!("{needle:?} in order\n{diagram}"));
        at += found + needle.len();
    }
    let get = model
        .calls
        .iter()
        .find(|c| c.method == "tasks/get")
        .expect("tasks/get");
    let about = export_ok("mermaid", &file, &["--call", &(get.index + 1).to_string()]);
    assert_eq!(about, diagram, "--call of a poll draws its operation");
    let whole = export_ok("mermaid", &file, &[]);
    let drawn = whole
        .lines()
        .filter(|l| l.starts_with("    Note over Client,Server: call ") && l.contains(", session "))
        .count();
    assert_eq!(
        drawn,
        model.calls.iter().filter(|c| c.stands_alone()).count(),
        "{whole}"
    );
}

#[test]
fn bad_formats_are_usage_errors() {
    let file = recording("healthy.jsonl");
    let out = export("pdf", &file, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"pdf\""));
    let out = export("har", &file, &["--call", "1"]);
    assert_eq!(out.status.code(), Some(2));
}
