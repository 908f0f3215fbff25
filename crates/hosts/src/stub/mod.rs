//! The scripted model endpoint: a stand-in for the model APIs agent hosts speak, on loopback.
//!
//! It serves Anthropic Messages (`POST /v1/messages`, streaming as Anthropic streams it and not;
//! `POST /v1/messages/count_tokens`), OpenAI Chat Completions (`POST /v1/chat/completions`) and
//! Responses (`POST /v1/responses`), and Gemini (`POST …/models/M:generateContent` and
//! `:streamGenerateContent`). Its script: a request that offers the target tool gets one call
//! of it; once the tool's result comes back, a short final text; anything else a short text.
//! It records what reached the model — above all when each tool result arrived, its text
//! (redacted, cut) and whether it was an error — and never contacts anything.

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use mcpscope_engine::redact::Redactor;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

/// The largest request body read (hosts send their whole conversation each time).
const MAX_BODY: usize = 32 * 1024 * 1024;

/// Characters of a tool result's text kept.
pub const TEXT_KEPT: usize = 300;

/// The final answer once the tool's result came back.
pub const FINAL_TEXT: &str = "The tool returned; done.";

/// The answer to any other request.
pub const SHORT_TEXT: &str = "OK.";

/// The model name the stub reports when a request names none.
const MODEL: &str = "mcpscope-model-stub";

/// A model API the stub speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    OpenAiResponses,
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// Gemini `generateContent`.
    Gemini,
}

impl Api {
    /// Its name in output.
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAiResponses => "openai-responses",
            Api::OpenAiChat => "openai-chat",
            Api::Gemini => "gemini",
        }
    }

    /// Which API a request path belongs to, if any.
    fn of_path(path: &str) -> Option<Api> {
        if path.ends_with("/messages") || path.ends_with("/messages/count_tokens") {
            Some(Api::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Api::OpenAiResponses)
        } else if path.ends_with("/chat/completions") {
            Some(Api::OpenAiChat)
        } else if path.contains(":generateContent") || path.contains(":streamGenerateContent") {
            Some(Api::Gemini)
        } else {
            None
        }
    }
}

/// Which APIs a stub answers: `openai` is both OpenAI APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Serves {
    /// Every API, each on its own paths.
    #[default]
    All,
    /// Anthropic only.
    Anthropic,
    /// OpenAI Responses and Chat Completions.
    OpenAi,
    /// Gemini only.
    Gemini,
}

impl Serves {
    /// Parses `anthropic`, `openai`, `gemini` or `all`.
    pub fn parse(s: &str) -> Result<Serves, String> {
        match s {
            "all" => Ok(Serves::All),
            "anthropic" => Ok(Serves::Anthropic),
            "openai" => Ok(Serves::OpenAi),
            "gemini" => Ok(Serves::Gemini),
            other => Err(format!(
                "unknown model API {other:?} (anthropic, openai, gemini or all)"
            )),
        }
    }

    fn allows(self, api: Api) -> bool {
        match self {
            Serves::All => true,
            Serves::Anthropic => api == Api::Anthropic,
            Serves::OpenAi => matches!(api, Api::OpenAiResponses | Api::OpenAiChat),
            Serves::Gemini => api == Api::Gemini,
        }
    }
}

/// How a stub behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where it listens (loopback).
    pub listen: SocketAddr,
    /// Which APIs it answers.
    pub serves: Serves,
    /// The tool it calls, whatever the host calls it ([`offered_as`]): `TOOL`,
    /// `SERVER__TOOL`, `mcp__SERVER__TOOL` (Claude Code, Codex's namespaces), `mcp_SERVER_TOOL`
    /// (Gemini CLI), `SERVER_TOOL`, `SERVER.TOOL`, `SERVER/TOOL`. `None`: the first offered
    /// tool named `mcp__…` or `mcp_…`.
    pub tool: Option<String>,
    /// The call's arguments.
    pub tool_args: Value,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            serves: Serves::All,
            tool: None,
            tool_args: json!({}),
        }
    }
}

/// A tool result that reached the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// When the request carrying it arrived.
    pub at: DateTime<Utc>,
    /// The call it answers (the id the stub gave it).
    pub call_id: String,
    /// Its text, redacted and cut to [`TEXT_KEPT`] characters.
    pub text: String,
    /// Whether the host marked it as an error (Anthropic's `is_error`; other APIs have none).
    pub is_error: bool,
}

/// What the stub answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A call of this tool.
    ToolCall(String),
    /// The final text after a tool result.
    Final,
    /// A short text (no target tool offered).
    Text,
    /// A token count.
    CountTokens,
    /// Not a path it serves (404).
    NotFound,
    /// A body it could not read as JSON (400).
    BadRequest(String),
}

/// One request the stub saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it arrived.
    pub at: DateTime<Utc>,
    /// `POST /v1/messages` and so on.
    pub method: String,
    /// The path (with its query).
    pub path: String,
    /// Its API, if a known path.
    pub api: Option<Api>,
    /// Whether it asked for a stream.
    pub stream: bool,
    /// How many tools it offered.
    pub tools: usize,
    /// The offered tools' names.
    pub tool_names: Vec<String>,
    /// Tool results it carried that had not reached the model before.
    pub results: Vec<ToolResult>,
    /// The answer.
    pub answer: Answer,
}

impl Seen {
    /// One line for a person.
    pub fn line(&self) -> String {
        let answer = match &self.answer {
            Answer::ToolCall(name) => format!("tool call {name}"),
            Answer::Final => "final text".into(),
            Answer::Text => "text".into(),
            Answer::CountTokens => "token count".into(),
            Answer::NotFound => "404".into(),
            Answer::BadRequest(why) => format!("400 ({why})"),
        };
        let mut line = format!(
            "{} {} {}{} tools={} → {answer}",
            self.at.format("%H:%M:%S%.3f"),
            self.method,
            self.path,
            if self.stream { " stream" } else { "" },
            self.tools,
        );
        for r in &self.results {
            line.push_str(&format!(
                "; tool result {}{}: {}",
                r.call_id,
                if r.is_error { " (error)" } else { "" },
                r.text
            ));
        }
        line
    }

    /// One JSON object.
    pub fn json(&self) -> Value {
        let answer = match &self.answer {
            Answer::ToolCall(name) => json!({"kind": "tool_call", "tool": name}),
            Answer::Final => json!({"kind": "final_text"}),
            Answer::Text => json!({"kind": "text"}),
            Answer::CountTokens => json!({"kind": "count_tokens"}),
            Answer::NotFound => json!({"kind": "not_found"}),
            Answer::BadRequest(why) => json!({"kind": "bad_request", "why": why}),
        };
        json!({
            "t": self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "method": self.method,
            "path": self.path,
            "api": self.api.map(Api::name),
            "stream": self.stream,
            "tools": self.tools,
            "tool_names": self.tool_names,
            "tool_results": self.results.iter().map(|r| json!({
                "t": r.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "call_id": r.call_id,
                "text": r.text,
                "is_error": r.is_error,
            })).collect::<Vec<_>>(),
            "answer": answer,
        })
    }
}

/// What the stub has seen, shared by its connections.
#[derive(Debug, Default)]
pub struct Log {
    seen: Mutex<Vec<Seen>>,
    /// Call ids whose results already reached the model.
    answered: Mutex<HashSet<String>>,
    next_id: std::sync::atomic::AtomicU64,
    changed: Notify,
}

impl Log {
    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The requests from the `from`-th on.
    pub fn since(&self, from: usize) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter().skip(from).cloned().collect()
    }

    /// The first tool result that reached the model.
    pub fn first_result(&self) -> Option<ToolResult> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter().flat_map(|s| s.results.iter()).next().cloned()
    }

    /// Waits until a request arrives after the `count`-th.
    pub async fn wait_beyond(&self, count: usize) {
        loop {
            let notified = self.changed.notified();
            if self.seen.lock().unwrap_or_else(|p| p.into_inner()).len() > count {
                return;
            }
            notified.await;
        }
    }

    fn push(&self, seen: Seen) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(seen);
        self.changed.notify_waiters();
    }

    fn new_call_id(&self, prefix: &str) -> String {
        let n = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{prefix}mcpscope{n}")
    }

    /// Keeps the results not seen before.
    fn fresh(&self, results: Vec<ToolResult>) -> Vec<ToolResult> {
        let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        results
            .into_iter()
            .filter(|r| answered.insert(r.call_id.clone()))
            .collect()
    }
}

/// A running stub; stops when dropped or shut down.
#[derive(Debug)]
pub struct Stub {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it saw.
    pub log: Arc<Log>,
    shutdown: watch::Sender<bool>,
}

impl Stub {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting and ends every connection.
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts a stub.
pub async fn start(opts: Options) -> anyhow::Result<Stub> {
    let listener = TcpListener::bind(opts.listen).await?;
    let addr = listener.local_addr()?;
    let log = Arc::new(Log::default());
    let (tx, rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        opts,
        log: Arc::clone(&log),
        redactor: Redactor::new(),
    });
    tokio::spawn(accept_loop(listener, shared, rx));
    Ok(Stub {
        addr,
        log,
        shutdown: tx,
    })
}

#[derive(Debug)]
struct Shared {
    opts: Options,
    log: Arc<Log>,
    redactor: Redactor,
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => break,
        };
        let Ok((tcp, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(handle(&shared, req).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tcp), svc);
            tokio::select! {
                res = conn => {
                    if let Err(err) = res {
                        tracing::debug!(%err, "model stub: connection ended with an error");
                    }
                }
                _ = stop.changed() => {}
            }
        });
    }
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Reply {
    let mut res = Response::new(Full::new(body.into()));
    *res.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        res.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    res
}

fn json_reply(status: StatusCode, value: &Value) -> Reply {
    reply(status, "application/json", value.to_string())
}

fn sse_reply(text: String) -> Reply {
    let mut res = reply(StatusCode::OK, "text/event-stream", text);
    res.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    res
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Reply {
    let at = Utc::now();
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let api = Api::of_path(req.uri().path()).filter(|api| shared.opts.serves.allows(*api));
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => Bytes::from(format!("unreadable body: {e}")),
    };
    let mut seen = Seen {
        at,
        method: method.to_string(),
        path: path.clone(),
        api,
        stream: false,
        tools: 0,
        tool_names: Vec::new(),
        results: Vec::new(),
        answer: Answer::NotFound,
    };
    let res = match (api, method == Method::POST) {
        (Some(api), true) => match serde_json::from_slice::<Value>(&body) {
            Ok(request) => answer(shared, api, &path, &request, &mut seen),
            Err(e) => {
                seen.answer = Answer::BadRequest(format!("not JSON: {e}"));
                json_reply(
                    StatusCode::BAD_REQUEST,
                    &error_body(api, "invalid_request_error", "the body is not JSON"),
                )
            }
        },
        (api, _) => json_reply(
            StatusCode::NOT_FOUND,
            &error_body(
                api.unwrap_or(Api::Anthropic),
                "not_found_error",
                "the model stub does not serve this",
            ),
        ),
    };
    shared.log.push(seen);
    res
}

fn error_body(api: Api, kind: &str, message: &str) -> Value {
    match api {
        Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Api::OpenAiResponses | Api::OpenAiChat => {
            json!({"error": {"type": kind, "message": message, "code": null, "param": null}})
        }
        Api::Gemini => json!({"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}),
    }
}

/// What a request asks of the script, in every API's terms.
struct Turn {
    /// Offered tool names.
    tools: Vec<String>,
    /// Tool results it carries (all of them, seen before or not).
    results: Vec<ToolResult>,
    stream: bool,
}

impl Shared {
    /// The offered tool the script calls.
    fn target<'a>(&self, tools: &'a [String]) -> Option<&'a String> {
        match &self.opts.tool {
            Some(tool) => offered_as(tools, tool),
            None => tools
                .iter()
                .find(|name| name.starts_with("mcp__"))
                .or_else(|| tools.iter().find(|name| name.starts_with("mcp_"))),
        }
    }

    fn result_text(&self, text: &str) -> String {
        let text = self.redactor.text(text).unwrap_or_else(|| text.to_string());
        match text.char_indices().nth(TEXT_KEPT) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    }

    fn tool_result(&self, at: DateTime<Utc>, id: &str, text: &str, is_error: bool) -> ToolResult {
        ToolResult {
            at,
            call_id: id.to_string(),
            text: self.result_text(text),
            is_error,
        }
    }
}

/// The name under which a host offers the MCP tool `tool`: the name itself, else one that
/// ends in a separator and the name, the most specific separator first (`__`, then `_`, `.`,
/// `/`, `:`, `-`): `mcp__mcpscope__slow`, `mcp_mcpscope_slow`, `mcpscope.slow`. A tool whose own
/// name merely ends the same way (`very_slow` for `slow`) is taken only when nothing closer is
/// offered.
pub fn offered_as<'a>(tools: &'a [String], tool: &str) -> Option<&'a String> {
    if let Some(exact) = tools.iter().find(|name| *name == tool) {
        return Some(exact);
    }
    ["__", "_", ".", "/", ":", "-"].iter().find_map(|sep| {
        let suffix = format!("{sep}{tool}");
        let mut matching = tools.iter().filter(|name| name.ends_with(&suffix));
        // Prefer an MCP-looking name (`mcp…`) when several end the same way.
        let first = matching.clone().next();
        matching.find(|name| name.starts_with("mcp")).or(first)
    })
}

/// The script: `Some(name)` to call the tool, `None` for text; whether this is the final text.
fn decide(shared: &Shared, turn: &Turn) -> Answer {
    if !turn.results.is_empty() {
        Answer::Final
    } else if let Some(name) = shared.target(&turn.tools) {
        Answer::ToolCall(name.clone())
    } else {
        Answer::Text
    }
}

fn answer(shared: &Shared, api: Api, path: &str, request: &Value, seen: &mut Seen) -> Reply {
    if api == Api::Anthropic && path.contains("/count_tokens") {
        seen.answer = Answer::CountTokens;
        let tokens = request.to_string().len() / 4 + 1;
        return json_reply(StatusCode::OK, &json!({"input_tokens": tokens}));
    }
    let turn = match api {
        Api::Anthropic => anthropic::turn(shared, seen.at, request),
        Api::OpenAiChat => openai::chat_turn(shared, seen.at, request),
        Api::OpenAiResponses => openai::responses_turn(shared, seen.at, request),
        Api::Gemini => gemini::turn(shared, seen.at, request, path),
    };
    seen.stream = turn.stream;
    seen.tools = turn.tools.len();
    seen.tool_names.clone_from(&turn.tools);
    seen.results = shared.log.fresh(turn.results.clone());
    seen.answer = decide(shared, &turn);
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(MODEL);
    let args = &shared.opts.tool_args;
    match api {
        Api::Anthropic => anthropic::reply(shared, &seen.answer, model, args, turn.stream),
        Api::OpenAiChat => openai::chat_reply(shared, &seen.answer, model, args, turn.stream),
        Api::OpenAiResponses => {
            let namespaced = openai::namespaced(request.get("tools"));
            openai::responses_reply(shared, &namespaced, &seen.answer, model, args, turn.stream)
        }
        Api::Gemini => gemini::reply(&seen.answer, args, turn.stream),
    }
}

/// The text of a tool result's content: a string, or the text of its blocks.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn sse_event(out: &mut String, name: Option<&str>, data: &Value) {
    mcpscope_engine::wire::sse::encode_into(out, None, name, None, &data.to_string());
}

fn text_of(answer: &Answer) -> &'static str {
    match answer {
        Answer::Final => FINAL_TEXT,
        _ => SHORT_TEXT,
    }
}

mod anthropic;

mod openai;

mod gemini;

/// The members of `value`'s array `key` (none when it is missing or no array).
fn items<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `--tool-args`: a JSON object.
pub fn parse_tool_args(text: &str) -> Result<serde_json::Value, mcpscope_engine::UsageError> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(mcpscope_engine::UsageError(format!(
            "--tool-args {text:?}: not a JSON object"
        ))),
        Err(e) => Err(mcpscope_engine::UsageError(format!(
            "--tool-args {text:?}: {e}"
        ))),
    }
}
