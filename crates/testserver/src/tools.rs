//! JSON-RPC request handling of the test server: lifecycle, tools and their side effects.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use super::stream::StreamLog;
use super::{Shared, catalog};

/// Where a request's related notifications go.
#[derive(Clone)]
pub(crate) enum Emit {
    /// Onto the request's SSE stream.
    Stream(Arc<StreamLog>),
    /// Nowhere (JSON responses cannot carry them).
    Discard,
}

impl Emit {
    /// Sends a message related to the request, if it has a stream.
    pub(crate) fn send(&self, msg: &Value) {
        if let Emit::Stream(log) = self {
            log.push_message(msg);
        }
    }
}

/// Server name reported in `serverInfo`.
pub(crate) const SERVER_NAME: &str = "mcpscope-testserver";

/// JSON-RPC error codes.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// Invalid request.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// Method not found.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid params.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// Resource not found.
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;

/// The `instructions` of the test server.
pub(crate) const INSTRUCTIONS: &str = "mcpscope test server: echo, slow, peek, poke (changes state), fail, \
slow_task (a task from 2025-11-25), and the conformance suite's test_* tools, prompts and resources.";

/// A successful response.
pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub(crate) fn error(id: &Value, code: i64, message: &str) -> Value {
    mcpscope_engine::wire::jsonrpc::error(id, code, message)
}

pub(crate) fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")})
}

/// The server's capabilities in `version` (`tasks` from 2025-11-25).
pub(crate) fn capabilities(version: &str) -> Value {
    let mut caps = json!({
        "tools": {"listChanged": false},
        "prompts": {"listChanged": false},
        "resources": {"subscribe": true, "listChanged": false},
        "completions": {},
        "logging": {}
    });
    if super::tasks::speaks_tasks(version) {
        caps["tasks"] = super::tasks::capability();
    }
    caps
}

/// What a request is answered in: the server, the session and revision, where its related
/// messages go.
pub(crate) struct Ctx<'a> {
    /// The server's shared state.
    pub shared: &'a Arc<Shared>,
    /// The session id, if any (none in 2026-07-28).
    pub session: Option<&'a str>,
    /// The revision spoken.
    pub version: &'a str,
    /// The request's stream, if it has one.
    pub emit: &'a Emit,
}

/// Log levels, least severe first.
const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

impl Ctx<'_> {
    /// Sends a `notifications/message` at `info` on the request's stream: always before
    /// 2026-07-28; in 2026-07-28 only when the request opted in with
    /// `_meta["io.modelcontextprotocol/logLevel"]` at `info` or below.
    fn log_info(&self, req_params: &Value, logger: &str, data: &str) {
        if mcpscope_engine::revision::is_sessionless(self.version) {
            let asked = req_params
                .pointer("/_meta")
                .and_then(|m| m.get(super::modern::META_LOG_LEVEL))
                .and_then(Value::as_str)
                .and_then(|l| LEVELS.iter().position(|x| *x == l));
            if asked.is_none_or(|i| i > 1) {
                return;
            }
        }
        self.emit
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": logger, "data": data}}));
    }
}

/// The tool list, with annotations.
pub(crate) fn tool_list() -> Value {
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

/// When set (to anything), `tools/list` describes `echo` as a later version of the server
/// would: a required `count` in its `inputSchema` and no `readOnlyHint` (its annotations then
/// read as the spec's defaults) — two recordings, one with it, show what `mcpscope diff` finds.
pub(crate) const DRIFT_ENV: &str = "MCPSCOPE_TESTSERVER_DRIFT";

/// `measure`: returns its `value` argument as `structuredContent` `{"value": …}`, which its
/// `outputSchema` says is a number, so a string value makes a result that breaks its own schema.
pub(crate) fn measure_tool() -> Value {
    json!({
        "name": "measure",
        "description": "Returns its value as structuredContent; the outputSchema says a number.",
        "inputSchema": {"type": "object", "properties": {"value": {}}, "required": ["value"]},
        "outputSchema": {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
        "annotations": {"readOnlyHint": true, "idempotentHint": true}
    })
}

/// Every tool: the mcpscope ones and the conformance suite's.
pub(crate) fn all_tools() -> Value {
    let mut all = match tool_list() {
        Value::Array(v) => v,
        _ => Vec::new(),
    };
    if std::env::var_os(DRIFT_ENV).is_some()
        && let Some(echo) = all.first_mut()
    {
        echo["inputSchema"] = json!({"type": "object",
            "properties": {"text": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
            "required": ["text", "count"]});
        echo["annotations"] = json!({"idempotentHint": true, "openWorldHint": false});
    }
    all.push(measure_tool());
    all.push(super::tasks::tool());
    all.extend(catalog::tools());
    Value::Array(all)
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// Answers one request (an object with `id` and `method`).
pub(crate) async fn handle(ctx: &Ctx<'_>, req: &Value) -> Value {
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req.get("method").and_then(Value::as_str).unwrap_or("");
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    let str_param = |k: &str| {
        params
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match method {
        "ping" | "logging/setLevel" => result(&id, json!({})),
        "tools/list" => result(&id, json!({"tools": all_tools()})),
        "prompts/list" => result(&id, json!({"prompts": catalog::prompts()})),
        "prompts/get" => {
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            match catalog::get_prompt(&str_param("name"), &args) {
                Some(r) => result(&id, r),
                None => error(
                    &id,
                    INVALID_PARAMS,
                    &format!("Unknown prompt: {}", str_param("name")),
                ),
            }
        }
        "resources/list" => result(&id, json!({"resources": catalog::resources()})),
        "resources/templates/list" => result(
            &id,
            json!({"resourceTemplates": catalog::resource_templates()}),
        ),
        "resources/read" => {
            let counter = ctx.shared.counter.load(Ordering::SeqCst);
            match catalog::read_resource(&str_param("uri"), counter) {
                Some(r) => result(&id, r),
                None => error(
                    &id,
                    RESOURCE_NOT_FOUND,
                    &format!("Resource not found: {}", str_param("uri")),
                ),
            }
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            if let Some(session) = ctx.session {
                ctx.shared
                    .subscribe(session, &str_param("uri"), method == "resources/subscribe");
            }
            result(&id, json!({}))
        }
        "completion/complete" => result(
            &id,
            json!({"completion": {"values": [], "total": 0, "hasMore": false}}),
        ),
        "server/discover" => result(
            &id,
            json!({
                "supportedVersions": super::SUPPORTED_VERSIONS,
                "capabilities": capabilities(ctx.version),
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }),
        ),
        "tools/call" => call_tool(ctx, &id, &params).await,
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
            if super::tasks::speaks_tasks(ctx.version) =>
        {
            match super::tasks::handle(ctx.shared, ctx.session, &id, method, &params).await {
                Some(answer) => answer,
                None => error(
                    &id,
                    METHOD_NOT_FOUND,
                    &format!("Method not found: {method}"),
                ),
            }
        }
        "subscriptions/listen" => error(
            &id,
            INVALID_REQUEST,
            "subscriptions/listen needs an SSE response stream",
        ),
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

async fn call_tool(ctx: &Ctx<'_>, id: &Value, params: &Value) -> Value {
    let (shared, session, emit) = (ctx.shared, ctx.session, ctx.emit);
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
            let (steps, interval_ms) = match shared.opts.slow {
                Some(plan) => (plan.steps, plan.interval_ms),
                None => (
                    u64_arg(&args, "steps", 5),
                    u64_arg(&args, "interval_ms", 200),
                ),
            };
            let steps = steps.min(10_000);
            let interval = Duration::from_millis(interval_ms.min(60_000));
            for step in 1..=steps {
                tokio::time::sleep(interval).await;
                let message = format!("step {step}/{steps}");
                match &progress_token {
                    Some(token) => emit.send(&json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step, "total": steps, "message": message}
                    })),
                    None => ctx.log_info(params, "slow", &message),
                }
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
            shared.resource_changed(catalog::COUNTER_URI);
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
        "measure" => {
            let value = args.get("value").cloned().unwrap_or(Value::Null);
            result(
                id,
                json!({"content": [{"type": "text", "text": value.to_string()}],
                       "structuredContent": {"value": value}}),
            )
        }
        super::tasks::TASK_TOOL => {
            if params.get("task").is_some_and(Value::is_object)
                && super::tasks::speaks_tasks(ctx.version)
            {
                return super::tasks::create(shared, session, id, params);
            }
            let ms = u64_arg(&args, "ms", super::tasks::DEFAULT_WORK_MS).min(60_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            result(id, text_result(format!("done after {ms} ms")))
        }
        "fail" => result(
            id,
            json!({"content": [{"type": "text", "text": "fail: this tool always fails"}], "isError": true}),
        ),
        _ => conformance_tool(ctx, id, name, &args, params, progress_token).await,
    }
}

/// The conformance suite's `test_*` tools.
async fn conformance_tool(
    ctx: &Ctx<'_>,
    id: &Value,
    name: &str,
    args: &Value,
    params: &Value,
    progress_token: Option<Value>,
) -> Value {
    if let Some(r) = catalog::plain_tool(name, args) {
        return result(id, r);
    }
    if let Some((key, method, request)) = catalog::client_request(name, args) {
        return result(
            id,
            ask_client(ctx, name, key, method, request, params).await,
        );
    }
    let pause = || tokio::time::sleep(Duration::from_millis(50));
    match name {
        "test_tool_with_logging" => {
            for (i, line) in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ]
            .into_iter()
            .enumerate()
            {
                if i > 0 {
                    pause().await;
                }
                ctx.log_info(params, "test_tool_with_logging", line);
            }
            result(id, text_result("Tool with logging executed successfully"))
        }
        "test_tool_with_progress" => {
            let token = progress_token.unwrap_or(json!(0));
            for (i, step) in [0, 50, 100].into_iter().enumerate() {
                if i > 0 {
                    pause().await;
                }
                ctx.emit.send(
                    &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": 100,
                        "message": format!("Completed step {step} of 100")}}),
                );
            }
            let shown = token
                .as_str()
                .map(str::to_string)
                .unwrap_or(token.to_string());
            result(id, text_result(shown))
        }
        "test_reconnection" => {
            // Close the response (the priming event carried an id and `retry:`), answer later:
            // the client resumes with GET + Last-Event-ID and reads the result there.
            if let Emit::Stream(log) = ctx.emit
                && log.ids
                && ctx.session.is_some()
            {
                log.disconnect();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            result(
                id,
                text_result(
                    "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
                ),
            )
        }
        _ => error(id, INVALID_PARAMS, &format!("Unknown tool: {name}")),
    }
}

/// Asks the client for input: in 2026-07-28 an input-required result (MRTR) until the retry
/// carries the answer; before that a request on the call's SSE stream.
async fn ask_client(
    ctx: &Ctx<'_>,
    tool: &str,
    key: &str,
    method: &str,
    request: Value,
    params: &Value,
) -> Value {
    let failed = |why: String| json!({"content": [{"type": "text", "text": format!("{tool}: {why}")}], "isError": true});
    if mcpscope_engine::revision::is_sessionless(ctx.version) {
        if let Some(answer) = params.pointer(&format!("/inputResponses/{key}")) {
            return catalog::answered(tool, answer);
        }
        let capability = catalog::capability_for(method);
        let declared = params
            .pointer("/_meta")
            .and_then(|m| m.get(super::modern::META_CAPABILITIES))
            .and_then(|c| c.get(capability))
            .is_some();
        if !declared {
            return failed(format!("the client declared no {capability} capability"));
        }
        return json!({
            "resultType": "input_required",
            "inputRequests": {key: {"method": method, "params": request}},
        });
    }
    let Emit::Stream(log) = ctx.emit else {
        return failed("asking the client needs an SSE response stream".into());
    };
    match ctx.shared.backchannel.ask(log, method, request).await {
        Ok(answer) => catalog::answered(tool, &answer),
        Err(why) => failed(why),
    }
}
