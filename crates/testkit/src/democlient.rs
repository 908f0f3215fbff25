//! A scripted, minimal Streamable HTTP MCP client for `mcpscope demo`.
//!
//! It behaves like a plain real client: initialize (2025-11-25), `notifications/initialized`, a GET
//! stream kept open in a task, then tool calls whose SSE responses it reads incrementally. A call
//! whose stream dies is logged and the script carries on (no resumption, no retry). It never
//! prints to stdout (the TUI owns it); it logs with `tracing`.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::sse::{SseFrame, SseParser};

/// Protocol revision the demo client speaks.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Bound on each step.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// One step of a demo script.
#[derive(Debug, Clone, PartialEq)]
pub enum DemoStep {
    /// `initialize` (2025-11-25); takes the `Mcp-Session-Id`.
    Initialize,
    /// `notifications/initialized`.
    Initialized,
    /// Opens the GET stream and keeps reading it in a task.
    OpenGetStream,
    /// `tools/list`.
    ListTools,
    /// `tools/call`; with `progress`, the request carries `_meta.progressToken`.
    Call {
        /// Tool name.
        name: String,
        /// Tool arguments.
        arguments: Value,
        /// Whether to ask for progress notifications.
        progress: bool,
    },
    /// Sleeps.
    Wait(Duration),
    /// DELETE the session.
    EndSession,
}

impl DemoStep {
    /// A `tools/call` step.
    pub fn call(name: &str, arguments: Value, progress: bool) -> Self {
        DemoStep::Call {
            name: name.to_string(),
            arguments,
            progress,
        }
    }

    /// A short label for logs and outcomes.
    pub fn label(&self) -> String {
        match self {
            DemoStep::Initialize => "initialize".into(),
            DemoStep::Initialized => "notifications/initialized".into(),
            DemoStep::OpenGetStream => "GET stream".into(),
            DemoStep::ListTools => "tools/list".into(),
            DemoStep::Call { name, .. } => format!("tools/call {name}"),
            DemoStep::Wait(d) => format!("wait {} ms", d.as_millis()),
            DemoStep::EndSession => "DELETE session".into(),
        }
    }
}

/// What became of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// The step's label.
    pub step: String,
    /// Whether it completed (a tool result with `isError` still counts as completed).
    pub ok: bool,
    /// The result text, or the error.
    pub detail: String,
    /// How long it took.
    pub elapsed: Duration,
}

/// The demo script: initialize → initialized → GET stream → tools/list → echo → slow (with a
/// progress token) → peek → poke (expected to die behind the proxy's fault rule) → wait → echo.
pub fn default_script() -> Vec<DemoStep> {
    vec![
        DemoStep::Initialize,
        DemoStep::Initialized,
        DemoStep::OpenGetStream,
        DemoStep::ListTools,
        DemoStep::call("echo", json!({"text": "hello from mcpscope demo"}), false),
        DemoStep::call("slow", json!({"steps": 5, "interval_ms": 200}), true),
        DemoStep::call("peek", json!({}), false),
        DemoStep::call("poke", json!({}), false),
        DemoStep::Wait(Duration::from_millis(1500)),
        DemoStep::call("echo", json!({"text": "still there?"}), false),
    ]
}

/// Runs [`default_script`] against `url`, logging each outcome.
pub async fn run_demo(url: &str) -> anyhow::Result<()> {
    let outcomes = run_script(url, &default_script()).await?;
    let failed = outcomes.iter().filter(|o| !o.ok).count();
    tracing::info!(
        steps = outcomes.len(),
        failed,
        "demo client: script finished"
    );
    Ok(())
}

/// Runs `steps` against the MCP endpoint `url`. A failing step is logged and recorded, and the
/// script carries on; only a failed `initialize` (nothing else can work then) is an error.
pub async fn run_script(url: &str, steps: &[DemoStep]) -> anyhow::Result<Vec<StepOutcome>> {
    let mut client = DemoClient::new(url)?;
    let mut outcomes = Vec::with_capacity(steps.len());
    for step in steps {
        let label = step.label();
        let started = Instant::now();
        tracing::info!(step = %label, "demo client: step");
        let res = match tokio::time::timeout(STEP_TIMEOUT, client.step(step)).await {
            Ok(res) => res,
            Err(_) => Err(anyhow!("timed out after {} s", STEP_TIMEOUT.as_secs())),
        };
        let elapsed = started.elapsed();
        let outcome = match res {
            Ok(detail) => {
                tracing::info!(step = %label, %detail, ?elapsed, "demo client: step done");
                StepOutcome {
                    step: label,
                    ok: true,
                    detail,
                    elapsed,
                }
            }
            Err(err) => {
                tracing::warn!(step = %label, error = %format!("{err:#}"), ?elapsed, "demo client: step failed");
                if *step == DemoStep::Initialize {
                    client.close();
                    return Err(err.context("demo client: initialize failed"));
                }
                StepOutcome {
                    step: label,
                    ok: false,
                    detail: format!("{err:#}"),
                    elapsed,
                }
            }
        };
        outcomes.push(outcome);
    }
    client.close();
    Ok(outcomes)
}

struct DemoClient {
    http: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    session: Option<String>,
    next_id: i64,
    get_task: Option<JoinHandle<()>>,
}

impl DemoClient {
    fn new(url: &str) -> anyhow::Result<Self> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("bad MCP url {url:?}"))?;
        if uri.scheme_str() != Some("http") {
            bail!("the demo client speaks plain http only: {url}");
        }
        let http = Client::builder(TokioExecutor::new()).build_http();
        Ok(Self {
            http,
            uri,
            session: None,
            next_id: 1,
            get_task: None,
        })
    }

    fn close(&mut self) {
        if let Some(task) = self.get_task.take() {
            task.abort();
        }
    }

    async fn step(&mut self, step: &DemoStep) -> anyhow::Result<String> {
        match step {
            DemoStep::Initialize => {
                let result = self
                    .request(
                        "initialize",
                        json!({
                            "protocolVersion": PROTOCOL_VERSION,
                            "capabilities": {},
                            "clientInfo": {"name": "mcpscope-demo-client", "version": env!("CARGO_PKG_VERSION")}
                        }),
                    )
                    .await?;
                let version = result
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                Ok(format!(
                    "protocol {version}, session {}",
                    self.session.as_deref().unwrap_or("(none)")
                ))
            }
            DemoStep::Initialized => {
                let status = self.notify("notifications/initialized", json!({})).await?;
                Ok(format!("{status}"))
            }
            DemoStep::OpenGetStream => self.open_get().await,
            DemoStep::ListTools => {
                let result = self.request("tools/list", json!({})).await?;
                let names: Vec<&str> = result
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|tools| {
                        tools
                            .iter()
                            .filter_map(|t| t.get("name").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(names.join(", "))
            }
            DemoStep::Call {
                name,
                arguments,
                progress,
            } => {
                let mut params = json!({"name": name, "arguments": arguments});
                if *progress {
                    params["_meta"] = json!({"progressToken": format!("demo-{}", self.next_id)});
                }
                let result = self.request("tools/call", params).await?;
                let text = result
                    .get("content")
                    .and_then(Value::as_array)
                    .and_then(|c| c.first())
                    .and_then(|c| c.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if result.get("isError").and_then(Value::as_bool) == Some(true) {
                    Ok(format!("tool error: {text}"))
                } else {
                    Ok(text)
                }
            }
            DemoStep::Wait(d) => {
                tokio::time::sleep(*d).await;
                Ok(String::new())
            }
            DemoStep::EndSession => {
                let resp = self.send(Method::DELETE, None).await?;
                let status = resp.status();
                self.session = None;
                self.close();
                if !status.is_success() {
                    bail!("DELETE answered {status}");
                }
                Ok(format!("{status}"))
            }
        }
    }

    async fn send(
        &self,
        method: Method,
        body: Option<&Value>,
    ) -> anyhow::Result<http::Response<Incoming>> {
        let mut req = Request::builder()
            .method(method.clone())
            .uri(self.uri.clone());
        let accept = if method == Method::GET {
            "text/event-stream"
        } else {
            "application/json, text/event-stream"
        };
        req = req.header(header::ACCEPT, accept);
        if let Some(session) = &self.session {
            req = req.header("mcp-session-id", session);
            req = req.header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        let bytes = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(v.to_string())
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(bytes))?;
        Ok(self.http.request(req).await?)
    }

    async fn notify(&mut self, method: &str, params: Value) -> anyhow::Result<StatusCode> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let resp = self.send(Method::POST, Some(&msg)).await?;
        let status = resp.status();
        // Drain whatever body there is.
        let _ = resp.into_body().collect().await;
        if !status.is_success() {
            bail!("{method} answered {status}");
        }
        Ok(status)
    }

    /// Sends a request and waits for its response (JSON or SSE); returns the `result`.
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.send(Method::POST, Some(&msg)).await?;
        let status = resp.status();
        if self.session.is_none()
            && let Some(session) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            self.session = Some(session.to_string());
        }
        let content = ContentKind::of(
            resp.headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        if !status.is_success() {
            let body = resp
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            bail!(
                "{method} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        let response = if content == ContentKind::Sse {
            read_sse_response(resp.into_body(), &json!(id)).await?
        } else if content == ContentKind::Json {
            let body = resp
                .into_body()
                .collect()
                .await
                .context("reading the JSON response")?
                .to_bytes();
            serde_json::from_slice(&body).context("parsing the JSON response")?
        } else {
            bail!(
                "{method} answered with a body that is neither JSON nor SSE ({})",
                content.word()
            );
        };
        if let Some(err) = response.get("error") {
            bail!("{method}: JSON-RPC error {err}");
        }
        response
            .get("result")
            .cloned()
            .ok_or_else(|| anyhow!("{method}: response without result"))
    }

    async fn open_get(&mut self) -> anyhow::Result<String> {
        let resp = self.send(Method::GET, None).await?;
        let status = resp.status();
        if !status.is_success() {
            bail!("GET answered {status}");
        }
        let task = tokio::spawn(async move {
            let mut body = resp.into_body();
            let mut parser = SseParser::new();
            let mut frames = Vec::new();
            loop {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            parser.feed(data, &mut frames);
                            for f in frames.drain(..) {
                                log_frame("GET stream", &f);
                            }
                        }
                    }
                    Some(Err(err)) => {
                        tracing::warn!(%err, "demo client: GET stream failed");
                        break;
                    }
                    None => {
                        tracing::info!("demo client: GET stream ended");
                        break;
                    }
                }
            }
        });
        if let Some(old) = self.get_task.replace(task) {
            old.abort();
        }
        Ok(format!("{status}"))
    }
}

fn log_frame(stream: &str, f: &SseFrame) {
    if f.data.trim().is_empty() {
        tracing::debug!(stream, id = ?f.id, retry = ?f.retry, "demo client: priming event");
    } else {
        tracing::info!(stream, id = ?f.id, data = %f.data, "demo client: event");
    }
}

/// Reads an SSE response until the response with `id` arrives.
async fn read_sse_response(mut body: Incoming, id: &Value) -> anyhow::Result<Value> {
    let mut parser = SseParser::new();
    let mut frames = Vec::new();
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                parser.feed(data, &mut frames);
                for f in frames.drain(..) {
                    if f.data.trim().is_empty() {
                        log_frame("POST stream", &f);
                        continue;
                    }
                    let msg: Value = match serde_json::from_str(&f.data) {
                        Ok(v) => v,
                        Err(err) => {
                            tracing::warn!(%err, data = %f.data, "demo client: unparsable SSE data");
                            continue;
                        }
                    };
                    let is_response = msg.get("method").is_none()
                        && (msg.get("result").is_some() || msg.get("error").is_some());
                    if is_response && msg.get("id") == Some(id) {
                        return Ok(msg);
                    }
                    log_frame("POST stream", &f);
                }
            }
            Some(Err(err)) => bail!("the response stream failed before the result: {err}"),
            None => bail!("the response stream ended before the result"),
        }
    }
}
