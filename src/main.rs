//! The `mcpscope` command: parse, dispatch, report errors in one line.

use std::process::ExitCode;

/// Events are allocated on the proxy's threads and freed on the hub's and the view's: mimalloc
/// handles that cross-thread churn far better than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use mcpscope::app::{self, UsageError};
use mcpscope::cli::{Cli, Command};

fn init_tracing() {
    let opened = mcpscope_session::log::open();
    let file = match opened {
        Ok(file) => file,
        Err(e) => {
            mcpscope::say!("mcpscope: not logging diagnostics ({e})");
            return;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            // One clear line (clap's first), not the whole usage block.
            mcpscope::say!(
                "mcpscope: {} (see mcpscope --help)",
                usage_line(&e.to_string())
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    match &cli.command {
        Some(Command::Check(args)) => return check(args),
        Some(Command::Export(args)) => return export(args),
        Some(Command::Convert(args)) => return convert(args),
        Some(Command::Index(args)) => return mcpscope::index::main(args),
        Some(Command::Diff(args)) => return diff(args),
        Some(Command::Wrap(args)) => return mcpscope::wrap::wrap(args),
        Some(Command::Unwrap(args)) => return mcpscope::wrap::unwrap(args),
        Some(Command::Completions(args)) => return completions(args.shell),
        Some(Command::Man) => return man_page(),
        Some(Command::Reference(args)) => return reference(args.chapter),
        _ => {}
    }
    init_tracing();
    if let Some(Command::Stdio(args)) = &cli.command {
        return mcpscope::stdio::main(args);
    }
    // An agent host runs only in a loopback-only network namespace, entered while this process
    // is still single-threaded: the runtime, stub, servers, proxies and host all start inside.
    if let Some(Command::Matrix(args)) = &cli.command
        && (args.host.is_some() || args.host_file.is_some())
        && !args.list
        && !args.hosts
        && let Err(refused) = mcpscope_hosts::sandbox::enter()
    {
        mcpscope::say!("mcpscope: {refused}");
        return ExitCode::FAILURE;
    }
    let runtime = match runtime_builder().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            mcpscope::say!("mcpscope: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            None => app::run_proxy(cli.proxy).await,
            Some(Command::ServeTest(args)) => app::serve_test(&args).await,
            Some(Command::Replay(args)) => mcpscope::replay::run(&args).await,
            Some(Command::Demo(args)) => mcpscope::demo::run(&args).await,
            Some(Command::Matrix(args)) => mcpscope_matrix::run(&args).await,
            Some(Command::ModelStub(args)) => mcpscope::model_stub::run(&args).await,
            Some(Command::Attach(args)) => mcpscope::attach::run(&args).await,
            Some(Command::Check(_) | Command::Export(_) | Command::Convert(_)) => Ok(()),
            Some(Command::Stdio(_) | Command::Index(_)) => Ok(()),
            Some(Command::Diff(_) | Command::Wrap(_) | Command::Unwrap(_)) => Ok(()),
            Some(Command::Completions(_) | Command::Man | Command::Reference(_)) => Ok(()),
            Some(Command::Ca(args)) => mcpscope::forward::ca(&args),
            Some(Command::Env(args)) => mcpscope::forward::env(&args),
            Some(Command::Run(args)) => mcpscope::app::run_command(&args).await,
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.chain().any(mcpscope::is_broken_pipe) => mcpscope::end_of_pipe(),
        Err(ref e) if let Some(exit) = e.downcast_ref::<mcpscope::forward::CommandExit>() => {
            ExitCode::from(exit.0)
        }
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            mcpscope::say!("mcpscope: {e}");
            ExitCode::from(2)
        }
        Err(e) if e.downcast_ref::<mcpscope_matrix::Inconclusive>().is_some() => {
            mcpscope::say!("mcpscope: {e}");
            ExitCode::from(3)
        }
        Err(e) => {
            mcpscope::say!("mcpscope: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Clap's message in one line: its first line, with what a line ending in `:` introduces (the
/// missing arguments' names) joined to it.
fn usage_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("bad arguments");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if line.ends_with(':') {
        let named: Vec<&str> = lines
            .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
            .collect();
        if !named.is_empty() {
            line.push(' ');
            line.push_str(&named.join(", "));
        }
    }
    line
}

/// An error and its causes joined by `: `, each cause once (a message that already ends with
/// its cause's text does not repeat it).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `mcpscope check`: 0 when every recording passes, 1 when one fails, 2 for bad arguments or an
/// unreadable recording.
fn check(args: &mcpscope::cli::CheckArgs) -> ExitCode {
    use mcpscope_analysis::check::Rule;
    use mcpscope_export::check_files::{Options, run};
    let outcome = Rule::parse_list(&args.fail_on).and_then(|rules| {
        let options = Options {
            rules,
            junit: args.junit.clone(),
            json: args.json,
            sarif: args.sarif.clone(),
        };
        run(
            &args.files,
            &options,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        )
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => export_error(&e),
    }
}

/// `mcpscope diff`: 0 (or 1 with `--exit-code` when the server drifted), 2 for bad arguments
/// or an unreadable recording or baseline.
fn diff(args: &mcpscope::cli::DiffArgs) -> ExitCode {
    let options = mcpscope_analysis::diff::Options {
        files: args.files.clone(),
        baseline: args.baseline.clone(),
        save_baseline: args.save_baseline.clone(),
        json: args.json,
        markdown: args.markdown,
    };
    match mcpscope_analysis::diff::run(
        &options,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    ) {
        Ok(true) if args.exit_code => ExitCode::FAILURE,
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => export_error(&e),
    }
}

/// `mcpscope export`: the recording in the chosen format on stdout.
fn export(args: &mcpscope::cli::ExportArgs) -> ExitCode {
    use mcpscope_export::{Format, export, load};
    let outcome = Format::parse(&args.format).and_then(|format| {
        let folded = load(&args.file, &mut std::io::stderr())?;
        export(&folded, format, args.call, &mut std::io::stdout().lock())
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => export_error(&e),
    }
}

/// `mcpscope convert`: 0 when the recording was rewritten, 1 when it could not be.
fn convert(args: &mcpscope::cli::ConvertArgs) -> ExitCode {
    use mcpscope_engine::record::{self, Create};
    let how = if args.overwrite {
        Create::Replace
    } else {
        Create::New
    };
    match record::convert(&args.input, &args.output, how) {
        Ok(done) => {
            for warning in &done.warnings {
                mcpscope::say!("mcpscope: warning: {warning}");
            }
            use std::io::Write as _;
            let said = writeln!(
                std::io::stdout(),
                "converted {} events (version {} → {}): {} bytes → {} bytes ({:.2}×), {}",
                done.events,
                done.from_version,
                mcpscope_engine::event::FORMAT_VERSION,
                done.bytes_in,
                done.bytes_out,
                done.bytes_out as f64 / done.bytes_in.max(1) as f64,
                args.output.display()
            );
            if said
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                mcpscope::end_of_pipe();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            mcpscope::say!("mcpscope: {e}");
            ExitCode::FAILURE
        }
    }
}

fn export_error(e: &mcpscope_export::Error) -> ExitCode {
    if let mcpscope_export::Error::Io(io) = e
        && io.kind() == std::io::ErrorKind::BrokenPipe
    {
        mcpscope::end_of_pipe();
    }
    mcpscope::say!("mcpscope: {e}");
    match e {
        mcpscope_export::Error::Usage(_) => ExitCode::from(2),
        mcpscope_export::Error::Io(_) => ExitCode::FAILURE,
    }
}

/// The runtime's builder: its workers take half the cores (at least one), leaving the rest to
/// the threads beside it (the hub and recorder, the record index, the view). On a small
/// machine the proxy's exchanges then stay on one worker with their upstream connections, no
/// wake-up crossing threads inside an exchange. `TOKIO_WORKER_THREADS` still decides when set.
fn runtime_builder() -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        builder.worker_threads((cores / 2).max(1));
    }
    builder
}

/// `mcpscope completions SHELL`: the completion script, from the clap definitions.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "mcpscope", &mut out);
    write_stdout(&out)
}

/// `mcpscope man`: the manual page (roff), from the clap definitions.
fn man_page() -> ExitCode {
    let command = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(command).render(&mut out) {
        mcpscope::say!("mcpscope: cannot render the manual page: {e}");
        return ExitCode::FAILURE;
    }
    write_stdout(&out)
}

/// `mcpscope reference cli|keys`: a generated chapter of the book (docs/reference/).
fn reference(chapter: mcpscope::cli::ReferenceChapter) -> ExitCode {
    let text = match chapter {
        mcpscope::cli::ReferenceChapter::Cli => {
            let options = clap_markdown::MarkdownOptions::new()
                .title("Command-line reference".to_owned())
                .show_footer(false)
                .show_table_of_contents(true);
            clap_markdown::help_markdown_custom::<Cli>(&options)
        }
        mcpscope::cli::ReferenceChapter::Keys => mcpscope_tui::keys_markdown(),
    };
    write_stdout(text.as_bytes())
}

fn write_stdout(bytes: &[u8]) -> ExitCode {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => mcpscope::end_of_pipe(),
        Err(e) => {
            mcpscope::say!("mcpscope: {e}");
            ExitCode::FAILURE
        }
    }
}
