//! The scripted steps of `mcpscope demo`, a thin layer over [`crate::client::McpClient`].
//!
//! It behaves like a plain real client: initialize (2025-11-25), `notifications/initialized`, a GET
//! stream kept open in the background, then tool calls whose SSE responses it reads incrementally.
//! A call whose stream dies is logged and the script carries on (no resumption, no retry). It never
//! prints to stdout (the TUI owns it); it logs with `tracing`.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use crate::client::{Answer, Background, McpClient, Outcome};
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

/// How long the client waits before its first request (lets the view come up).
const START_DELAY: Duration = Duration::from_millis(500);
/// The pause between the periodic calls after the script.
const IDLE_PERIOD: Duration = Duration::from_secs(4);

/// `mcpscope demo`'s script: the default script (healthy calls, then the `poke` whose stream
/// dies), then a `peek` and an `echo` every few seconds in the same session.
pub fn demo_script() -> Vec<DemoStep> {
    let mut steps = default_script();
    for i in 0..150 {
        steps.push(DemoStep::Wait(IDLE_PERIOD));
        steps.push(DemoStep::call("peek", serde_json::json!({}), false));
        steps.push(DemoStep::call(
            "echo",
            serde_json::json!({"text": format!("tick {}", i + 1)}),
            false,
        ));
    }
    steps
}

/// `mcpscope demo`'s client: runs the script, then keeps a fresh session busy every few seconds.
pub async fn drive(url: String) {
    tokio::time::sleep(START_DELAY).await;
    loop {
        if let Err(e) = run_script(&url, &demo_script()).await {
            tracing::warn!(error = %format!("{e:#}"), "demo client failed");
        }
        tokio::time::sleep(IDLE_PERIOD).await;
    }
}

/// Runs `steps` against the MCP endpoint `url`. A failing step is logged and recorded, and the
/// script carries on; only a failed `initialize` (nothing else can work then) is an error.
pub async fn run_script(url: &str, steps: &[DemoStep]) -> anyhow::Result<Vec<StepOutcome>> {
    let mut client = DemoClient {
        mcp: McpClient::new(url)?.named("mcpscope-demo-client"),
        get: None,
    };
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

/// The MCP client and the GET stream it keeps open.
struct DemoClient {
    mcp: McpClient,
    get: Option<Background>,
}

impl DemoClient {
    fn close(&mut self) {
        self.get = None;
    }

    async fn step(&mut self, step: &DemoStep) -> anyhow::Result<String> {
        match step {
            DemoStep::Initialize => {
                let answer = self.mcp.initialize().await?;
                result_of("initialize", &answer)?;
                Ok(format!(
                    "protocol {}, session {}",
                    self.mcp.protocol(),
                    self.mcp.session().unwrap_or("(none)")
                ))
            }
            DemoStep::Initialized => {
                let status = self.mcp.initialized().await?;
                success("notifications/initialized", status)
            }
            DemoStep::OpenGetStream => {
                let get = self.mcp.open_get().await?;
                let status = get.status;
                self.get = Some(get);
                success("GET", status)
            }
            DemoStep::ListTools => {
                let answer = self.mcp.request("tools/list", json!({})).await?;
                let result = result_of("tools/list", &answer)?;
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
                    params["_meta"] =
                        json!({"progressToken": format!("demo-{}", self.mcp.next_id())});
                }
                let answer = self.mcp.request("tools/call", params).await?;
                let result = result_of("tools/call", &answer)?;
                let text = answer.text().unwrap_or("").to_string();
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
                let status = self.mcp.delete().await?;
                self.close();
                success("DELETE", status)
            }
        }
    }
}

/// The status as the step's detail, or an error when it is not 2xx.
fn success(what: &str, status: u16) -> anyhow::Result<String> {
    if !(200..300).contains(&status) {
        bail!("{what} answered {status}");
    }
    Ok(status.to_string())
}

/// The `result` of an answer, or why there is none.
fn result_of<'a>(method: &str, answer: &'a Answer) -> anyhow::Result<&'a Value> {
    match &answer.outcome {
        Outcome::Response(msg) => {
            if let Some(err) = msg.get("error") {
                bail!("{method}: JSON-RPC error {err}");
            }
            msg.get("result")
                .ok_or_else(|| anyhow!("{method}: response without result"))
        }
        Outcome::Status(status, body) => bail!("{method} answered {status}: {body}"),
        Outcome::Died { how, head, .. } => {
            let what = if *head {
                "the response stream"
            } else {
                "the request"
            };
            bail!("{what} failed before the result ({how:?})")
        }
        Outcome::NoResponse(status) => bail!("{method} answered {status} without a response"),
    }
}
