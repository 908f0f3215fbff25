//! A cell's agent host: the model stub it talks to, its launch from the preset, and what
//! reached the model (the host's reaction).

use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Utc};
use mcpscope_engine::UsageError;
use mcpscope_hosts::preset::{self, Host};
use mcpscope_hosts::stub::{self, Options, ToolResult};
use serde_json::{Value, json};

use super::client::{self, ClientRun, Setting};
use crate::cli::MatrixArgs;

/// The built-in server's tool a host calls when `--tool` names none.
pub const DEFAULT_TOOL: &str = "slow";

/// What every cell's host shares.
#[derive(Debug, Clone)]
pub struct HostPlan {
    /// The host.
    pub host: Host,
    /// Its program.
    pub bin: String,
    /// Its version (`--version`), when it says.
    pub version: Option<String>,
    /// The prompt.
    pub prompt: String,
    /// The MCP tool it is made to call.
    pub tool: String,
    /// The call's arguments.
    pub tool_args: Value,
}

impl HostPlan {
    /// The plan from `matrix` arguments; `None` without `--host`. Runs the host's `--version`
    /// (inside the sandbox, which the caller has entered).
    pub async fn from_args(args: &MatrixArgs) -> anyhow::Result<Option<Arc<HostPlan>>> {
        let Some(name) = &args.host else {
            return Ok(None);
        };
        if args.upstream.is_some() {
            return Err(UsageError(
                "--host cannot use --upstream: the host runs in a network namespace of its own, \
                 with loopback alone, where only the built-in servers exist"
                    .into(),
            )
            .into());
        }
        let host = if name == "custom" {
            let api = args.model_api.as_deref().ok_or_else(|| {
                UsageError("--host custom needs --model-api (anthropic, openai-responses, openai-chat or gemini)".into())
            })?;
            let mut command = args.command.clone();
            if let Some(program) = command.first_mut() {
                *program = absolute_bin(program)?;
            }
            Host::custom(api, command).map_err(UsageError)?
        } else {
            if !args.command.is_empty() {
                return Err(UsageError(format!(
                    "--host {name} starts the host itself: no command after `--` (use --host custom for your own)"
                ))
                .into());
            }
            Host::parse(name).map_err(UsageError)?
        };
        let bin = match (&args.host_bin, &host) {
            (Some(bin), _) => absolute_bin(bin)?,
            (None, host) => host.default_bin().unwrap_or_default().to_string(),
        };
        let tool = args.tool.clone().unwrap_or_else(|| DEFAULT_TOOL.into());
        let tool_args = match &args.tool_args {
            Some(text) => crate::model_stub::parse_tool_args(text)?,
            None if tool == DEFAULT_TOOL => json!({"steps": 3, "interval_ms": 150}),
            None => json!({}),
        };
        let version = if matches!(host, Host::Custom { .. }) {
            None
        } else {
            let home = tempfile::tempdir().context("a throwaway HOME")?;
            let cell = preset::Cell {
                bin: &bin,
                prompt: "",
                mcp_url: "http://127.0.0.1:9/mcp",
                model_url: "http://127.0.0.1:9",
                tool: &tool,
                home: home.path(),
            };
            let env = preset::launch(&host, &cell)?.env;
            let probe = bin.clone();
            let version = tokio::task::spawn_blocking(move || preset::version(&probe, &env))
                .await
                .context("the host's --version")?;
            if version.is_none() && !runs(&bin) {
                return Err(UsageError(format!(
                    "cannot run the {} host {bin:?}: install it (scripts/setup-peers.sh puts Claude Code in tests/peers/hosts/) or name it with --host-bin",
                    host.name()
                ))
                .into());
            }
            version
        };
        Ok(Some(Arc::new(HostPlan {
            host,
            bin,
            version,
            prompt: args
                .prompt
                .clone()
                .unwrap_or_else(|| preset::DEFAULT_PROMPT.into()),
            tool,
            tool_args,
        })))
    }

    /// How the host is named in reports: `claude-code 2.1.332`.
    pub fn label(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v}", self.host.name()),
            None => self.host.name().to_string(),
        }
    }
}

/// A `--host-bin` that names a path (it has a `/`) made absolute against the working directory:
/// each cell's host runs in a throwaway directory of its own, where a relative path names
/// nothing. A bare name is left to be found on PATH.
fn absolute_bin(bin: &str) -> anyhow::Result<String> {
    if !bin.contains('/') {
        return Ok(bin.to_string());
    }
    let path = std::path::absolute(bin).with_context(|| format!("--host-bin {bin:?}"))?;
    Ok(path.display().to_string())
}

fn runs(bin: &str) -> bool {
    std::process::Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// What a cell's host did at the model.
#[derive(Debug, Clone, Default)]
pub struct HostRun {
    /// The first tool result that reached the model.
    pub result: Option<ToolResult>,
    /// Requests the model saw.
    pub model_requests: usize,
}

/// Runs the host once against the cell's proxy at `mcp_url`, with its own stub and HOME.
pub async fn run(
    plan: &HostPlan,
    mcp_url: &str,
    extra_env: &[(String, String)],
    activity: super::activity::ActivityLog,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<(ClientRun, HostRun)> {
    let stub = stub::start(Options {
        tool: Some(plan.tool.clone()),
        tool_args: plan.tool_args.clone(),
        ..Options::default()
    })
    .await
    .context("cannot start the model stub")?;
    let home = tempfile::tempdir().context("a throwaway HOME")?;
    let model_url = stub.url();
    let launch = preset::launch(
        &plan.host,
        &preset::Cell {
            bin: &plan.bin,
            prompt: &plan.prompt,
            mcp_url,
            model_url: &model_url,
            tool: &plan.tool,
            home: home.path(),
        },
    )?;
    let mut env = launch.env;
    env.extend(extra_env.iter().cloned());
    let setting = Setting {
        env: Some(env),
        dir: Some(home.path().to_path_buf()),
        activity: Some(activity),
    };
    let mut run = client::run_in(&launch.argv, &setting, stop).await;
    let result = stub.log.first_result();
    run.model_reaction = result.as_ref().map(|r| r.at);
    let mut offered: Vec<String> = Vec::new();
    for seen in stub.log.seen() {
        for name in seen.tool_names {
            if !offered.contains(&name) {
                offered.push(name);
            }
        }
    }
    run.model_tools = Some(offered);
    let host = HostRun {
        result,
        model_requests: stub.log.seen().len(),
    };
    stub.shutdown();
    Ok((run, host))
}

/// Milliseconds from `from` to `to`.
pub fn ms(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds()
}
