//! One cell: a server (when built in), a proxy with the case's fault armed, the client once, and
//! the judgement.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use http::Uri;
use mcpscope_engine::model::Model;
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::Config;
use mcpscope_proxy::running::start_proxy;
use mcpscope_testkit::testserver;

use super::cases::{self, Case};
use super::client::{self, ClientRun};
use super::judge::{self, Judgement, Target};

/// How long the proxy goes on after the client ended, so that the last events arrive.
const SETTLE: Duration = Duration::from_millis(150);

/// How long the end of a cell waits for its recording to be written.
const FINISH_PATIENCE: Duration = Duration::from_secs(5);

/// What every cell shares.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The client command, with `{url}` placeholders.
    pub command: Vec<String>,
    /// How long the client may run.
    pub timeout: Duration,
    /// Which requests the fault hits.
    pub target: Target,
    /// The upstream to use instead of a built-in test server per cell.
    pub upstream: Option<Uri>,
    /// Where each cell's recording goes.
    pub record_dir: Option<PathBuf>,
    /// Run the proxy with `--rescue`.
    pub rescue: bool,
}

/// A cell's result.
#[derive(Debug, Clone)]
pub struct CellResult {
    /// The case.
    pub case: &'static Case,
    /// The judgement.
    pub judgement: Judgement,
    /// The client process.
    pub client: ClientRun,
    /// Milliseconds the client ran.
    pub elapsed_ms: i64,
    /// The cell's recording, if kept.
    pub recording: Option<PathBuf>,
}

/// Runs one cell.
pub async fn run(case: &'static Case, plan: &Plan) -> anyhow::Result<CellResult> {
    let server = match &plan.upstream {
        Some(_) => None,
        None => Some(
            testserver::start_refusing(
                testserver::Options {
                    json_responses: case.server.json,
                    event_ids: case.server.event_ids,
                    ..testserver::Options::default()
                },
                case.server.refusal,
            )
            .await
            .context("cannot start the test server")?,
        ),
    };
    let upstream = match (&plan.upstream, &server) {
        (Some(uri), _) => uri.clone(),
        (None, Some(server)) => server.url().parse().context("test server URL")?,
        (None, None) => anyhow::bail!("no upstream"),
    };
    let recorder = match &plan.record_dir {
        Some(dir) => {
            let path = dir.join(format!("{}.jsonl", case.name));
            Some(
                Recorder::create(&path, Create::Replace, true)
                    .with_context(|| format!("cannot create the recording {}", path.display()))?,
            )
        }
        None => None,
    };
    let config = Config {
        upstream,
        rescue: plan.rescue,
        ..Config::default()
    };
    let mut running = start_proxy(config, recorder, Redactor::new()).await?;
    if let Some(fault) = case.fault {
        let rule =
            mcpscope_engine::fault::spec::parse_rule(&cases::rule(fault, &plan.target.matchers()))
                .map_err(|e| mcpscope_engine::UsageError(format!("--tool/--method: {e}")))?;
        let engine = mcpscope_engine::fault::RuleEngine::new();
        engine.add(rule);
        running.proxy.shared.set_planner(Arc::new(engine));
    }
    let mut feed = running.hub.take_output().context("view feed taken")?;
    let fold = tokio::spawn(async move {
        let mut model = Model::new();
        while let Some(event) = feed.recv().await {
            model.apply(&event);
        }
        model
    });
    let url = format!("http://{}/mcp", running.proxy.addr);
    let argv = client::substitute(&plan.command, &url);
    let run = client::run(&argv, plan.timeout).await;
    tokio::time::sleep(SETTLE).await;
    running.proxy.shutdown();
    drop(running.proxy);
    let recording = running.hub.recording.clone();
    let _ = tokio::task::spawn_blocking(move || running.hub.finish_within(FINISH_PATIENCE)).await;
    let model = fold.await.context("the cell's model")?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    let elapsed_ms = match (run.started_at, run.exited_at) {
        (Some(start), Some(end)) => (end - start).num_milliseconds(),
        _ => i64::try_from(plan.timeout.as_millis()).unwrap_or(i64::MAX),
    };
    Ok(CellResult {
        case,
        judgement: judge::judge(&model, &plan.target, case.expect, &run),
        client: run,
        elapsed_ms,
        recording,
    })
}
