//! JSON-RPC request handling of the test server: lifecycle, tools and their side effects.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use super::Shared;
use super::stream::StreamLog;

/// Where a request's related notifications go.
#[derive(Clone)]
pub(crate) enum Emit {
    /// Onto the request's SSE stream.
    Stream(Arc<StreamLog>),
    /// Nowhere (JSON responses cannot carry them).
    Discard,
}

impl Emit {
    fn send(&self, msg: &Value) {
        if let Emit::Stream(log) = self {
            log.push_message(msg);
        }
    }
}

/// Server name reported in `serverInfo`.
pub const SERVER_NAME: &str = "mcpscope-testserver";

/// JSON-RPC error codes.
pub const PARSE_ERROR: i64 = -32700;
/// Invalid request.
pub const INVALID_REQUEST: i64 = -32600;
/// Method not found.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid params.
pub const INVALID_PARAMS: i64 = -32602;

/// A successful response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub(crate) fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")})
}

pub(crate) fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}, "logging": {}})
}

/// The tool list, with annotations.
pub fn tool_list() -> Value {
    let empty = json!({"type": "object", "properties": {}});
    json!([
        {
            "name": "echo",
            "description": "Returns its text at once.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
        },
        {
            "name": "slow",
            "description": "Sends `steps` progress notifications (or log messages without a progress token) `interval_ms` apart, then returns.",
            "inputSchema": {"type": "object", "properties": {
                "steps": {"type": "integer", "minimum": 0, "default": 5},
                "interval_ms": {"type": "integer", "minimum": 0, "default": 200}
            }},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "peek",
            "description": "Reads the counter.",
            "inputSchema": empty,
            "annotations": {"readOnlyHint": true}
        },
        {
            "name": "poke",
            "description": "Increments the counter (after about 300 ms). Changes state: not safe to retry.",
            "inputSchema": empty
        },
        {
            "name": "fail",
            "description": "Always fails (a tool result with isError).",
            "inputSchema": empty,
            "annotations": {"readOnlyHint": true, "idempotentHint": true}
        }
    ])
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// Answers one request (an object with `id` and `method`). `session` is the session id, if any.
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    session: Option<&str>,
    req: &Value,
    emit: &Emit,
) -> Value {
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req.get("method").and_then(Value::as_str).unwrap_or("");
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    match method {
        "ping" | "logging/setLevel" => result(&id, json!({})),
        "tools/list" => result(&id, json!({"tools": tool_list()})),
        "server/discover" => result(
            &id,
            json!({
                "supportedVersions": super::SUPPORTED_VERSIONS,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
            }),
        ),
        "tools/call" => call_tool(shared, session, &id, &params, emit).await,
        "initialize" => error(
            &id,
            INVALID_REQUEST,
            "initialize is only valid as the first message of a session",
        ),
        _ => error(
            &id,
            METHOD_NOT_FOUND,
            &format!("Method not found: {method}"),
        ),
    }
}

fn u64_arg(args: &Value, name: &str, default: u64) -> u64 {
    args.get(name).and_then(Value::as_u64).unwrap_or(default)
}

async fn call_tool(
    shared: &Arc<Shared>,
    session: Option<&str>,
    id: &Value,
    params: &Value,
    emit: &Emit,
) -> Value {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let progress_token = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .cloned();
    match name {
        "echo" => {
            let text = args.get("text").and_then(Value::as_str).unwrap_or("");
            result(id, text_result(text))
        }
        "slow" => {
            let steps = u64_arg(&args, "steps", 5).min(10_000);
            let interval = Duration::from_millis(u64_arg(&args, "interval_ms", 200).min(60_000));
            for step in 1..=steps {
                tokio::time::sleep(interval).await;
                let message = format!("step {step}/{steps}");
                let note = match &progress_token {
                    Some(token) => json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step, "total": steps, "message": message}
                    }),
                    None => json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "logger": "slow", "data": message}
                    }),
                };
                emit.send(&note);
            }
            result(id, text_result(format!("slow: done after {steps} steps")))
        }
        "peek" => {
            let n = shared.counter.load(Ordering::SeqCst);
            result(id, text_result(n.to_string()))
        }
        "poke" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let n = shared.counter.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(session) = session {
                shared.broadcast(
                    session,
                    &json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "logger": "poke", "data": format!("counter is now {n}")}
                    }),
                );
            }
            result(id, text_result(n.to_string()))
        }
        "fail" => result(
            id,
            json!({"content": [{"type": "text", "text": "fail: this tool always fails"}], "isError": true}),
        ),
        _ => error(id, INVALID_PARAMS, &format!("Unknown tool: {name}")),
    }
}
