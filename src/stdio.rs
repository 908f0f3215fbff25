//! `mcpscope stdio -- COMMAND ARGS…`: a transparent shim for a stdio MCP server. The server
//! runs as our child; its standard streams pass through unchanged (see
//! `mcpscope_proxy::stdio`); its events go through the same hub, redactor and recorder as the
//! HTTP proxy's. Nothing of ours is ever written to stdout: notices (`--json`) go to stderr or
//! a file, and diagnostics to stderr only when something is wrong. The exit code is the
//! child's (128 + the signal that killed it).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::headless::Style;
use mcpscope_engine::record::{Create, Recorder, open_private};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::hub::Hub;
use mcpscope_proxy::sink::EventSink;
use mcpscope_proxy::stdio::{Options, SpawnError};

/// Options of `stdio`.
#[derive(Debug, Clone, Args)]
pub struct StdioArgs {
    /// Record to this file (JSON Lines, mode 0600) instead of a new file in `recordings/`.
    #[arg(long, value_name = "PATH", conflicts_with = "no_record")]
    pub record: Option<PathBuf>,
    /// With --record: replace the file if it exists.
    #[arg(long, requires = "record")]
    pub overwrite: bool,
    /// Do not record.
    #[arg(long)]
    pub no_record: bool,
    /// A name for the session (default: the program's file name); the session is
    /// `stdio:NAME:PID`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Write the notices (as `--json` does for the proxy) as JSON lines to stderr, mixed with
    /// the server's own stderr. Never to stdout, which belongs to the server.
    #[arg(long)]
    pub json: bool,
    /// Write the JSON notices to this file (mode 0600, replaced) instead of stderr.
    #[arg(long, value_name = "PATH")]
    pub json_file: Option<PathBuf>,
    /// Keep secrets in the recording (they are hidden by default).
    #[arg(long)]
    pub no_redact: bool,
    /// Do not publish this session for `mcpscope attach` (by default it listens on a socket in
    /// the user's runtime directory that only this user can open).
    #[arg(long)]
    pub no_publish: bool,
    /// The server's command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// How long the end of a run waits for the hub to write what it was sent.
const FINISH_PATIENCE: Duration = Duration::from_secs(5);

/// Runs the shim to the end; the exit code is the server's.
pub fn main(args: &StdioArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::say!("mcpscope: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(args.clone()));
    // A read of our stdin may still be blocked in its thread: it is not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let code = match code {
        Ok(code) => code,
        Err(e) => {
            crate::say!("mcpscope: {e:#}");
            1
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The recording: `--record PATH` (an error stops the run), or a new file in `recordings/`
/// (if that fails the server still runs, unrecorded, and we say so).
fn recording(args: &StdioArgs, redacted: bool) -> anyhow::Result<Option<Recorder>> {
    if args.no_record {
        return Ok(None);
    }
    if let Some(path) = &args.record {
        let how = if args.overwrite {
            Create::Replace
        } else {
            Create::New
        };
        let recorder = Recorder::create(path, how, redacted)
            .with_context(|| format!("cannot create the recording {}", path.display()))?;
        return Ok(Some(recorder));
    }
    let dir = Recorder::default_dir();
    match Recorder::create_in(&dir, redacted) {
        Ok(recorder) => Ok(Some(recorder)),
        Err(e) => {
            crate::say!(
                "mcpscope: WARNING: cannot create a recording in {}: {e}; the server runs unrecorded",
                dir.display()
            );
            Ok(None)
        }
    }
}

/// Where the JSON notices go.
fn notice_output(args: &StdioArgs) -> anyhow::Result<Option<Box<dyn Write + Send>>> {
    if let Some(path) = &args.json_file {
        let file = open_private(path, Create::Replace)
            .with_context(|| format!("cannot create {}", path.display()))?;
        return Ok(Some(Box::new(file)));
    }
    if args.json {
        return Ok(Some(Box::new(std::io::stderr())));
    }
    Ok(None)
}

async fn run(args: StdioArgs) -> anyhow::Result<i32> {
    let redactor = if args.no_redact {
        Redactor::disabled()
    } else {
        Redactor::new()
    };
    let output = notice_output(&args)?;
    let recorder = recording(&args, redactor.enabled())?;
    // The command line as viewers see it (hello, `attach --list`, status bar): redacted by the
    // rule the recording's `process_started` uses.
    let mut shown_command = args.command.clone();
    redactor.command(&mut shown_command);
    let mut hub = Hub::start(recorder, redactor)?;
    let sink = EventSink::new(hub.input.clone()).with_backlog(hub.backlog.clone());
    // Published until the run ends (dropping it removes the socket).
    let published = (!args.no_publish)
        .then(|| {
            let keep = mcpscope_engine::model::Retention::DEFAULT_KEEP_CALLS;
            let mut session = crate::attach::session_info("stdio", args.name.clone(), &hub, keep);
            session.command = Some(shown_command);
            crate::attach::publish(&hub, session)
        })
        .flatten();
    let notices = match (output, hub.take_output()) {
        (Some(mut out), Some(feed)) => {
            let pace = Some(hub.pace_view());
            Some(tokio::spawn(async move {
                crate::headless::run_to(feed, Style::Json, pace, &mut *out).await;
            }))
        }
        _ => None,
    };
    let options = Options {
        command: args.command.clone(),
        name: args.name.clone(),
    };
    let outcome = mcpscope_proxy::stdio::run(options, sink.clone()).await;
    let code = match outcome {
        Ok(outcome) => outcome.exit_code(),
        Err(SpawnError { error, exit_code }) => {
            crate::say!(
                "mcpscope: cannot start {}: {error}",
                mcpscope_engine::model::process::shell_words(&args.command)
            );
            exit_code
        }
    };
    sink.seal();
    drop(sink);
    let recording = hub.recording.clone();
    if hub.finish_within(FINISH_PATIENCE).is_none()
        && let Some(path) = recording
    {
        crate::say!(
            "mcpscope: the recording {} was not finished within {FINISH_PATIENCE:?}",
            path.display()
        );
    }
    if let Some(task) = notices {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    if let Some(published) = published {
        published.finish(Duration::from_secs(2)).await;
    }
    Ok(code)
}
