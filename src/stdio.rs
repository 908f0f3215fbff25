//! `mcpscope stdio -- COMMAND ARGS…`: a transparent shim for a stdio MCP server. The server
//! runs as our child; its standard streams pass through unchanged (see
//! `mcpscope_proxy::stdio`); its events go through the same hub, redactor and recorder as the
//! HTTP proxy's. Nothing of ours is ever written to stdout: notices (`--json`) go to stderr or
//! a file, and diagnostics to stderr only when something is wrong. The exit code is the
//! child's (128 + the signal that killed it).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::app::DefaultPlace;
use crate::cli::StdioArgs;
use mcpscope_engine::record::{Create, open_private};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::stdio::{Options, SpawnError};
use mcpscope_session::Session;
use mcpscope_tui::headless::Style;

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
    let recorder = crate::app::create_recording(
        &args.recording,
        redactor.enabled(),
        DefaultPlace::BestEffort,
    )?;
    // The command line as viewers see it (hello, `attach --list`, status bar): redacted by the
    // rule the recording's `process_started` uses.
    let mut session = Session::builder("stdio", redactor)
        .name(args.name.clone())
        .command(args.command.clone())
        .record(recorder)
        .published(!args.no_publish)
        .start()?;
    session.publish(None);
    let notices = match (output, session.view()) {
        (Some(mut out), Some((feed, pace))) => Some(tokio::spawn(async move {
            mcpscope_tui::headless::run_to(feed, Style::Json, Some(pace), &mut *out).await;
        })),
        _ => None,
    };
    let sink = session.sink();
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
    let recording = session.recording().map(std::path::Path::to_path_buf);
    if session.finish(FINISH_PATIENCE).await.is_none()
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
    Ok(code)
}
