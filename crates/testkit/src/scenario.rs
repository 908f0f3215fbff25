//! The scenarios of the shipped sample recordings, made by mcpscope itself: for each, the
//! built-in test server, the proxy with a recorder, a fault armed through a planner, and the
//! [`crate::client`] driving the session. `scripts/make-recordings.sh` runs them through
//! `examples/make_recordings.rs`; the tests run them live to compare with the replay.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use mcpscope_engine::event::EndHow;
use mcpscope_engine::fault::{Fault, Plan, Planner, RequestInfo, Trigger};
use mcpscope_engine::model::{Model, Notice};
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::{Config, Shared};
use mcpscope_session::Session;
use mcpscope_testserver::client::{Answer, Background, McpClient, Outcome};
use mcpscope_testserver::{self as testserver, Options};

/// Every scenario, in the order they are made.
pub const SCENARIOS: [&str; 6] = [
    "healthy",
    "server-dies",
    "sse-eof",
    "json-reset",
    "status-503",
    "resumed",
];

/// Arms one fault for the first `tools/call` of a tool.
struct OnTool {
    tool: &'static str,
    plan: Mutex<Option<Plan>>,
}

impl Planner for OnTool {
    fn plan(&self, request: &RequestInfo<'_>) -> Option<Plan> {
        let body = request.body?;
        let is_call = body.get("method").and_then(Value::as_str) == Some("tools/call")
            && body.pointer("/params/name").and_then(Value::as_str) == Some(self.tool);
        if !is_call {
            return None;
        }
        self.plan.lock().ok()?.take()
    }
}

fn on_tool(tool: &'static str, fault: Fault, trigger: Trigger, rule: &str) -> Arc<OnTool> {
    Arc::new(OnTool {
        tool,
        plan: Mutex::new(Some(Plan {
            fault,
            trigger,
            origin: rule.to_string(),
        })),
    })
}

fn expect(what: &str, answer: &Answer, ok: impl Fn(&Outcome) -> bool) -> anyhow::Result<()> {
    let outcome = &answer.outcome;
    if !ok(outcome) {
        bail!("{what}: unexpected outcome {outcome:?}");
    }
    eprintln!("  {what}: {outcome:?}");
    Ok(())
}

fn answered(o: &Outcome) -> bool {
    o.result().is_some()
}

/// Records scenario `name` into `OUT/NAME.jsonl` (progress on stderr); returns the model and
/// the notices of the live view that watched it run.
pub async fn record(name: &str, out: &Path) -> anyhow::Result<(Model, Vec<Notice>)> {
    let opts = Options {
        json_responses: name == "json-reset",
        event_ids: name == "resumed",
        ..Options::default()
    };
    let server = testserver::start(opts).await?;
    let path = out.join(format!("{name}.jsonl"));
    let config = Config {
        listen: "127.0.0.1:0".parse()?,
        upstream: server.url().parse()?,
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let recorder = Recorder::create(&path, Create::Replace, true)?;
    let mut session = Session::builder("scenario", Redactor::new())
        .record(Some(recorder))
        .start()?;
    let proxy = mcpscope_proxy::start(config, session.sink()).await?;
    let mut feed = session.feed().context("view feed already taken")?;
    let live = tokio::spawn(async move {
        let mut model = Model::new();
        let mut notices = Vec::new();
        while let Some(event) = feed.recv().await {
            notices.extend(model.apply(&event));
        }
        (model, notices)
    });
    let url = format!("http://{}/mcp", proxy.addr);
    let shared = proxy.shared.clone();
    let mut c = McpClient::new(&url)?.named("mcpscope-probe");
    eprintln!("{name}:");
    expect("initialize", &c.handshake().await?, answered)?;
    drive(name, &mut c, &shared).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(c);
    proxy.shutdown();
    drop(shared);
    drop(proxy);
    let events = session
        .finish(Duration::from_secs(60))
        .await
        .context("the recording was not finished within a minute")?
        .written;
    server.shutdown().await;
    eprintln!("  → {} ({events} events)", path.display());
    Ok(live.await?)
}

/// Drives the client through scenario `name`, arming its fault on the proxy first.
async fn drive(name: &str, c: &mut McpClient, shared: &Shared) -> anyhow::Result<()> {
    match name {
        "healthy" => {
            let mut get = warm_up(c).await?;
            let slow = json!({"steps": 3, "interval_ms": 100});
            expect("slow", &c.call("slow", slow, true).await?, answered)?;
            expect("poke", &c.call("poke", json!({}), false).await?, answered)?;
            expect("peek", &c.call("peek", json!({}), false).await?, answered)?;
            get.close();
        }
        "server-dies" => {
            shared.set_planner(on_tool(
                "poke",
                Fault::ServerDies {
                    down: Duration::from_millis(400),
                },
                Trigger::After(Duration::from_millis(100)),
                "server-dies after 100ms when tool=poke",
            ));
            let mut get = warm_up(c).await?;
            let poke = c.call("poke", json!({}), true).await?;
            expect("poke", &poke, |o| o.died() == Some(EndHow::Reset))?;
            let dead = get.ended(Duration::from_secs(5)).await;
            eprintln!("  GET stream: {:?}", dead.map(|a| a.outcome));
            tokio::time::sleep(Duration::from_millis(600)).await;
            let echo = c
                .call("echo", json!({"text": "still there?"}), false)
                .await?;
            expect("echo", &echo, answered)?;
        }
        "sse-eof" | "json-reset" => {
            // The poke's response dies: a clean end of its SSE stream, or a JSON body cut by a
            // reset.
            let (fault, trigger, label, how) = if name == "sse-eof" {
                let after = Trigger::After(Duration::from_millis(100));
                (
                    Fault::Eof,
                    after,
                    "eof after 100ms when tool=poke",
                    EndHow::Eof,
                )
            } else {
                let label = "json-reset when tool=poke";
                (Fault::JsonThenReset, Trigger::Now, label, EndHow::Reset)
            };
            shared.set_planner(on_tool("poke", fault, trigger, label));
            let echo = c.call("echo", json!({"text": "hello"}), false).await?;
            expect("echo", &echo, answered)?;
            let poke = c.call("poke", json!({}), false).await?;
            expect("poke", &poke, |o| o.died() == Some(how))?;
        }
        "status-503" => {
            shared.set_planner(on_tool(
                "poke",
                Fault::Status(503),
                Trigger::Now,
                "status:503 when tool=poke",
            ));
            let poke = c.call("poke", json!({}), false).await?;
            expect("poke", &poke, |o| matches!(o, Outcome::Status(503, _)))?;
        }
        "resumed" => {
            shared.set_planner(on_tool(
                "slow",
                Fault::Reset,
                Trigger::AfterEvents(3),
                "reset after 3 events when tool=slow",
            ));
            let id = json!(c.next_id());
            let slow = json!({"steps": 4, "interval_ms": 100});
            let cut = c.call("slow", slow, true).await?;
            let Outcome::Died {
                last_event_id: Some(last),
                ..
            } = &cut.outcome
            else {
                bail!("slow: expected a cut with an event id, got {cut:?}");
            };
            eprintln!("  slow: {:?}", cut.outcome);
            tokio::time::sleep(Duration::from_millis(100)).await;
            expect("resume", &c.resume(last, id).await?, answered)?;
        }
        other => bail!(
            "unknown scenario {other:?} (known: {})",
            SCENARIOS.join(", ")
        ),
    }
    Ok(())
}

/// What every session does first: a GET stream, `tools/list`, one `echo`.
async fn warm_up(c: &mut McpClient) -> anyhow::Result<Background> {
    let get = c.open_get().await?;
    expect(
        "tools/list",
        &c.request("tools/list", json!({})).await?,
        answered,
    )?;
    let echo = c.call("echo", json!({"text": "hello"}), false).await?;
    expect("echo", &echo, answered)?;
    Ok(get)
}
