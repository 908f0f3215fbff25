//! A cell's agent host: the model stub it talks to, its launch from the preset, and what
//! reached the model (the host's reaction).

use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Utc};
use mcpscope_engine::UsageError;
use mcpscope_hosts::preset::{self, Host, Source};
use mcpscope_hosts::stub::{self, Options, ToolResult};
use serde_json::{Value, json};

use super::client::{self, ClientRun, Setting};
use crate::args::MatrixArgs;

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
    /// The plans from `matrix` arguments, one per `--host-bin` (one for the preset's program
    /// when none is given); none without `--host`. Runs each host's `--version` (inside the
    /// sandbox, which the caller has entered).
    pub async fn from_args(args: &MatrixArgs) -> anyhow::Result<Vec<Arc<HostPlan>>> {
        if args.host.is_none() && args.host_file.is_none() {
            return Ok(Vec::new());
        }
        if args.upstream.is_some() {
            return Err(UsageError(
                "--host cannot use --upstream: the host runs in a network namespace of its own, \
                 with loopback alone, where only the built-in servers exist (start your own \
                 server inside it with --server-command)"
                    .into(),
            )
            .into());
        }
        let host = match (&args.host, &args.host_file) {
            (Some(name), _) if name == "custom" => {
                let api = args.model_api.as_deref().ok_or_else(|| {
                    UsageError("--host custom needs --model-api (anthropic, openai-responses, openai-chat or gemini)".into())
                })?;
                let mut command = args.command.clone();
                if let Some(program) = command.first_mut() {
                    *program = absolute_bin(program)?;
                }
                Host::custom(api, command).map_err(UsageError)?
            }
            (name, file) => {
                if !args.command.is_empty() {
                    return Err(UsageError(
                        "a host preset starts the host itself: no command after `--` (use --host custom for your own)"
                            .into(),
                    )
                    .into());
                }
                match (name, file) {
                    (Some(name), _) => Host::find(name).map_err(UsageError)?,
                    (None, Some(file)) => Host::from_file(file).map_err(UsageError)?,
                    (None, None) => return Ok(Vec::new()),
                }
            }
        };
        let bins = match args.host_bin.is_empty() {
            true => vec![host.bin.clone()],
            false => args
                .host_bin
                .iter()
                .map(|bin| absolute_bin(bin))
                .collect::<anyhow::Result<Vec<_>>>()?,
        };
        let tool = args.tool.clone().unwrap_or_else(|| DEFAULT_TOOL.into());
        let tool_args = match &args.tool_args {
            Some(text) => mcpscope_hosts::stub::parse_tool_args(text)?,
            None if tool == DEFAULT_TOOL => json!({"steps": 3, "interval_ms": 150}),
            None => json!({}),
        };
        let prompt = args
            .prompt
            .clone()
            .unwrap_or_else(|| preset::DEFAULT_PROMPT.into());
        let mut plans = Vec::new();
        for bin in bins {
            let version = Self::version(&host, &bin, &tool).await?;
            plans.push(Arc::new(HostPlan {
                host: host.clone(),
                bin,
                version,
                prompt: prompt.clone(),
                tool: tool.clone(),
                tool_args: tool_args.clone(),
            }));
        }
        Ok(plans)
    }

    /// The version `bin` reports (`None` for a custom host, or one that says none); an error
    /// when it does not run at all.
    async fn version(host: &Host, bin: &str, tool: &str) -> anyhow::Result<Option<String>> {
        let version = if host.source == Source::Command {
            None
        } else {
            let home = tempfile::tempdir().context("a throwaway HOME")?;
            let cell = preset::Cell {
                bin,
                prompt: "",
                mcp_url: "http://127.0.0.1:9/mcp",
                model_url: "http://127.0.0.1:9",
                tool,
                home: home.path(),
                idle_timeout_ms: None,
            };
            let env = preset::launch(host, &cell)?.env;
            let probe = bin.to_string();
            let version = tokio::task::spawn_blocking(move || preset::version(&probe, &env))
                .await
                .context("the host's --version")?;
            if version.is_none() && !runs(bin) {
                let how = host
                    .install
                    .as_deref()
                    .map_or(String::new(), |how| format!(" ({how})"));
                return Err(UsageError(format!(
                    "cannot run the {} host {bin:?}: install it{how}, or name it with --host-bin",
                    host.name
                ))
                .into());
            }
            version
        };
        Ok(version)
    }

    /// How the host is named in reports: `claude-code 2.1.332`.
    /// Without a version, the program's file name says which one: `custom (my-host.sh)`.
    pub fn label(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v}", self.host.name),
            None => {
                let file = std::path::Path::new(&self.bin)
                    .file_name()
                    .map_or_else(|| self.bin.clone(), |f| f.to_string_lossy().into_owned());
                format!("{} ({file})", self.host.name)
            }
        }
    }
}

/// The `--hosts` text: each preset, what it speaks and needs, where it comes from, and whether
/// its program is on PATH (found, not run: a host runs only inside the sandbox).
pub fn list() -> String {
    let (hosts, problems) = Host::all();
    let mut out = String::new();
    for host in &hosts {
        let from = match &host.source {
            Source::File(path) => path.display().to_string(),
            Source::Shipped | Source::Command => "shipped".into(),
        };
        let installed = match host.installed() {
            Some(path) => format!("installed: {}", path.display()),
            None => format!("not on PATH: {}", host.bin),
        };
        out.push_str(&format!(
            "{:<14} {} ({}; {from})\n{:<14} {installed}\n",
            host.name,
            host.description,
            host.api.name(),
            ""
        ));
        if !host.needs.is_empty() {
            out.push_str(&format!("{:<14} needs: {}\n", "", host.needs.join(", ")));
        }
        if let Some(how) = &host.install {
            out.push_str(&format!("{:<14} install: {how}\n", ""));
        }
    }
    out.push_str(
        "custom         any other host: --host custom --model-api API -- COMMAND ({url}, {model_url})\n",
    );
    if let Some(dir) = preset::user_dir() {
        out.push_str(&format!(
            "\nYour presets go in {} (NAME.toml, as in hosts/ of mcpscope's repository); \
             --host-file PATH runs one from anywhere.\n",
            dir.display()
        ));
    }
    for problem in problems {
        out.push_str(&format!("\nnot read: {problem}\n"));
    }
    out
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

/// Runs the host once against the cell's proxy at `mcp_url`, with its own stub and HOME, its
/// environment gaining `extra_env` and its `{idle_timeout_ms}` the case's, if it sets one.
pub async fn run(
    plan: &HostPlan,
    mcp_url: &str,
    (extra_env, idle_timeout_ms): (&[(String, String)], Option<u64>),
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
            idle_timeout_ms,
        },
    )?;
    let mut env = launch.env;
    env.extend(extra_env.iter().cloned());
    let setting = Setting {
        env: Some(env),
        dir: Some(home.path().to_path_buf()),
        activity: Some(activity),
    };
    // Daemons the host starts die with it, not with the next cell.
    let (argv, not_isolated) = mcpscope_hosts::sandbox::own_pid_namespace(launch.argv);
    if let Some(why) = not_isolated {
        tracing::warn!("the host runs without a PID namespace of its own: {why}");
    }
    let mut run = client::run_in(&argv, &setting, stop).await;
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
