//! A server that lists hostile tool schemas (a `$ref` cycle on one value, thirty levels of
//! `anyOf`/`oneOf`/`not` over the same references) cannot take the proxy down: the live proxy
//! with `--json`, `check` and `replay --json` each say once that the schema was not checked,
//! the calls before and after are answered and recorded, and the proxy's memory stays small.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::peers::{Proxy, of_kind, temp_dir};
use serde_json::{Value, json};

/// `levels` nested `keyword`s, each over the previous level twice.
fn fan_out(levels: usize, keyword: &str) -> Value {
    let mut defs = serde_json::Map::new();
    defs.insert("l0".into(), json!({"type": "string"}));
    for level in 1..=levels {
        let prev = format!("#/$defs/l{}", level - 1);
        let body = match keyword {
            "not" => json!({"not": {"not": {"allOf": [{"$ref": prev}, {"$ref": prev}]}}}),
            _ => json!({keyword: [{"$ref": prev}, {"$ref": prev}]}),
        };
        defs.insert(format!("l{level}"), body);
    }
    json!({"$defs": defs, "$ref": format!("#/$defs/l{levels}")})
}

/// The tools: `echo` (an ordinary schema), then the hostile ones.
fn tools() -> Vec<Value> {
    let cycle = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a"});
    vec![
        json!({"name": "echo", "inputSchema": {"type": "object",
            "properties": {"text": {"type": "string"}}, "required": ["text"]}}),
        json!({"name": "cycle", "inputSchema": cycle}),
        json!({"name": "any_of", "inputSchema": fan_out(30, "anyOf")}),
        json!({"name": "one_of", "inputSchema": fan_out(30, "oneOf")}),
        json!({"name": "not", "inputSchema": fan_out(30, "not")}),
    ]
}

const HOSTILE: [&str; 4] = ["cycle", "any_of", "one_of", "not"];

/// A JSON-only MCP server on a real socket: initialize, tools/list, tools/call (echoes the
/// tool's name), 202 for notifications.
fn upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64).flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    format!("http://{addr}/mcp")
}

fn serve(mut conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
    let Some((_, body)) = common::peers::read_request(&mut conn) else {
        return;
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = request.get("id").cloned();
    let result = match request["method"].as_str().unwrap_or("") {
        "initialize" => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-schemas", "version": "1"}}),
        "tools/list" => json!({"tools": tools()}),
        "tools/call" => json!({"content": [{"type": "text",
            "text": format!("ran {}", request["params"]["name"].as_str().unwrap_or("?"))}]}),
        _ => json!({}),
    };
    let reply = match id {
        None => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
        Some(id) => {
            let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        }
    };
    let _ = conn.write_all(reply.as_bytes());
}

/// One POST to the proxy; the response body.
fn post(base: &str, body: &Value) -> String {
    let addr = base.trim_start_matches("http://");
    let body = body.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-06-18\r\n\
         Mcp-Session-Id: s1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(addr).expect("connect to the proxy");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    tcp.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = tcp.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(text)
}

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": "hi"}}})
}

/// The resident set of a process, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn mcpscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .output()
        .expect("run mcpscope")
}

fn unchecked_tools(notices: &[Value]) -> Vec<String> {
    let mut tools: Vec<String> = of_kind(notices, "schema_unchecked")
        .iter()
        .map(|n| n["tool"].as_str().unwrap_or("?").to_string())
        .collect();
    tools.sort();
    tools
}

#[test]
fn hostile_schemas_are_reported_not_followed() {
    let dir = temp_dir();
    let recording = dir.path().join("hostile.jsonl");
    let record = recording.to_str().expect("utf-8 path");
    let mut proxy = Proxy::start(&upstream(), &["--record", record]);
    let base = proxy.base.clone();
    post(
        &base,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "schema-budget", "version": "1"}}}),
    );
    let listed = post(
        &base,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert!(listed.contains("any_of"), "{listed}\n{}", proxy.dump());
    let mut id = 2;
    let before = post(&base, &call(id, "echo"));
    assert!(before.contains("ran echo"), "{before}\n{}", proxy.dump());
    for round in 0..2 {
        for tool in HOSTILE {
            id += 1;
            let answer = post(&base, &call(id, tool));
            assert!(
                answer.contains(&format!("ran {tool}")),
                "round {round} {tool}: {answer}\n{}",
                proxy.dump()
            );
        }
    }
    id += 1;
    let after = post(&base, &call(id, "echo"));
    assert!(after.contains("ran echo"), "{after}\n{}", proxy.dump());
    let answered = proxy.wait_notice(Duration::from_secs(20), |n| {
        n["kind"] == "call_answered" && n["request_id"] == id
    });
    assert!(answered.is_some(), "{}", proxy.dump());
    let rss = rss_mib(proxy.proc.child.id());
    assert!(!proxy.proc.exited(), "the proxy died\n{}", proxy.dump());
    assert!(rss < 200.0, "the proxy holds {rss:.0} MiB");
    eprintln!("the proxy's RSS after the hostile schemas: {rss:.1} MiB");
    let notices = proxy.notices();
    // Each hostile schema said once, for its tool, with why; the ordinary one never.
    assert_eq!(
        unchecked_tools(&notices),
        ["any_of", "cycle", "not", "one_of"],
        "{}",
        proxy.dump()
    );
    let cycle = of_kind(&notices, "schema_unchecked")
        .into_iter()
        .find(|n| n["tool"] == "cycle")
        .expect("the cycle said");
    let why = cycle["message"].as_str().unwrap_or("");
    assert!(
        why.starts_with("schema not checked:") && why.contains("loop back"),
        "{why}"
    );
    let answered = of_kind(&notices, "call_answered").len();
    assert_eq!(answered, 2 + 2 * HOSTILE.len() + 2, "{}", proxy.dump());
    proxy.proc.terminate(Duration::from_secs(10));
    check_and_replay(&recording);
}

/// The recording through `check` (plain and failing on schemas) and `replay --json`.
fn check_and_replay(recording: &Path) {
    let file = recording.to_str().expect("utf-8 path");
    let plain = mcpscope(&["check", file]);
    let text = String::from_utf8_lossy(&plain.stdout);
    assert_eq!(plain.status.code(), Some(0), "{plain:?}");
    assert!(text.contains(": ok — "), "{text}");
    assert_eq!(
        text.matches("[schema-unchecked]").count(),
        HOSTILE.len(),
        "{text}"
    );
    let strict = mcpscope(&["check", "--fail-on", "schema-input,schema-unchecked", file]);
    let text = String::from_utf8_lossy(&strict.stdout);
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    assert!(text.contains("schema not checked"), "{text}");
    let replayed = mcpscope(&["replay", "--json", file]);
    assert!(replayed.status.success(), "{replayed:?}");
    let notices: Vec<Value> = String::from_utf8_lossy(&replayed.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        unchecked_tools(&notices),
        ["any_of", "cycle", "not", "one_of"]
    );
}
