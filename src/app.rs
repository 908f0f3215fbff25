//! Wiring: the proxy, the hub (recorder) and a view, started from parsed arguments.

use std::sync::Arc;

use anyhow::{Context, bail};
use http::Uri;

use crate::cli::{Listen, ProxyArgs, RecordArgs, ServeTestArgs};
use crate::signals::Shutdown;
use mcpscope_engine::record::Recorder;
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::{Config, Timeouts};
pub use mcpscope_session::recording::DefaultPlace;
use mcpscope_session::recording::{self, Wanted};
use mcpscope_session::{Session, SessionBuilder};
use mcpscope_tui::headless::{self, View};

pub use mcpscope_engine::UsageError;
pub use mcpscope_proxy::parse_upstream;

/// Refuses a non-loopback listen address unless allowed.
pub fn check_listen(listen: Listen, allow_remote: bool) -> Result<(), UsageError> {
    if !listen.is_loopback() && !allow_remote {
        return Err(UsageError(format!(
            "--listen {} is not a loopback address; add --allow-remote to expose the proxy to the network",
            listen.0
        )));
    }
    Ok(())
}

/// The proxy's configuration from the arguments (timeouts not given keep their defaults).
pub fn proxy_config(args: &ProxyArgs, upstream: Uri) -> Config {
    let defaults = Timeouts::default();
    Config {
        listen: args.listen.0,
        upstream,
        insecure: args.insecure,
        allow_remote: args.allow_remote,
        allow_origins: args.allow_origins.clone(),
        allow_hosts: args.allow_hosts.clone(),
        timeouts: Timeouts {
            request_head: args.request_head_timeout.unwrap_or(defaults.request_head),
            request_body: args.request_body_timeout.unwrap_or(defaults.request_body),
            idle: args.idle_timeout.unwrap_or(defaults.idle),
            connect: args.connect_timeout.unwrap_or(defaults.connect),
            response_head: args.response_head_timeout.unwrap_or(defaults.response_head),
        },
        rescue: args.rescue,
        pass_host: args.pass_host,
        forward: None,
        ca_roots: Vec::new(),
        limits: mcpscope_proxy::Limits {
            request_body: args.max_request_body,
            sse_event: args.max_sse_event,
        },
    }
}

/// The redaction policy the arguments ask for.
pub fn redactor(args: &ProxyArgs) -> Redactor {
    if args.no_redact {
        return Redactor::disabled();
    }
    Redactor::new()
        .with_headers(&args.redact_headers)
        .with_query(&args.redact_query)
        .with_json_keys(&args.redact_json)
}

/// Creates the recording the arguments ask for: the `--record` file (refused if it exists,
/// unless `--overwrite`), a new uniquely named file in `recordings/` (its failure handled as
/// `default` says), or none.
pub fn create_recording(
    args: &RecordArgs,
    redacted: bool,
    default: DefaultPlace,
) -> anyhow::Result<Option<Recorder>> {
    let wanted = match (&args.record, args.no_record) {
        (_, true) => Wanted::Off,
        (Some(path), false) => Wanted::File {
            path,
            overwrite: args.overwrite,
        },
        (None, false) => Wanted::Default(default),
    };
    recording::create(wanted, redacted)
}

/// How long the end of a run waits for the hub to write what it was sent.
const FINISH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Turns transparent huge pages off for this process (Linux): the live proxy's threads
/// allocate and free in small bursts (events, growing model stores, the live index's
/// checkpoints), and a huge page the allocator gives back and takes again is zeroed whole
/// (2 MiB) each time. Measured on the record index thread: about a third of its CPU per
/// exchange. Nothing else changes if the kernel refuses.
fn without_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes one integer flag and changes only this process's
        // memory policy for pages faulted in from now on.
        let refused = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0;
        if refused {
            tracing::debug!(
                "transparent huge pages left on: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// `mcpscope --listen … --upstream …`: runs until Ctrl-C (headless) or quit (TUI).
pub async fn run_proxy(args: ProxyArgs) -> anyhow::Result<()> {
    run_proxy_with(args, None).await.map(|_| ())
}

/// A view that prints the feed's notices (or only drains the feed) until it closes.
type Shown = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The upstream the arguments name: `--upstream`, or none in forward mode.
fn upstream_of(args: &ProxyArgs, forwarding: bool) -> anyhow::Result<Uri> {
    match args.upstream.as_deref() {
        Some(upstream) => Ok(parse_upstream(upstream)?),
        None if forwarding => Ok(Uri::from_static("http://127.0.0.1/")),
        None => bail!(UsageError(
            "--upstream URL is required, or --forward (or run `mcpscope demo`)".into()
        )),
    }
}

/// Refuses what must not listen, and warns of what is allowed but unsafe.
fn check_exposure(args: &ProxyArgs) -> anyhow::Result<()> {
    check_listen(args.listen, args.allow_remote)?;
    crate::pass_host::check(args)?;
    if args.insecure {
        crate::say!(
            "mcpscope: WARNING: --insecure: the upstream's TLS certificate is NOT verified"
        );
    }
    if !args.listen.is_loopback() {
        crate::say!(
            "mcpscope: WARNING: listening on {}, reachable from the network; only loopback Host names{} are accepted",
            args.listen.0,
            if args.allow_hosts.is_empty() {
                " (add --allow-host NAME for the names remote clients use)".to_string()
            } else {
                format!(" and {}", args.allow_hosts.join(", "))
            }
        );
    }
    Ok(())
}

/// `--metrics-listen`: its listener, bound before anything else listens.
async fn metrics_listener(args: &ProxyArgs) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    let Some(addr) = args.metrics_listen else {
        return Ok(None);
    };
    check_listen(addr, args.allow_remote)
        .map_err(|e| UsageError(e.0.replace("--listen", "--metrics-listen")))?;
    let listener = tokio::net::TcpListener::bind(addr.0)
        .await
        .with_context(|| format!("cannot listen for --metrics-listen on {}", addr.0))?;
    Ok(Some(listener))
}

/// The metrics subscribed to the session and served on `listener`.
type Served = (
    mcpscope_telemetry::metrics::Running,
    tokio::task::JoinHandle<()>,
);

fn serve_metrics(
    session: &mut SessionBuilder,
    listener: tokio::net::TcpListener,
    allowed: Vec<String>,
) -> Served {
    let metrics = mcpscope_telemetry::metrics::subscribe(session);
    let guard: mcpscope_telemetry::metrics::serve::HostGuard =
        Arc::new(move |host| mcpscope_proxy::host_allowed(&allowed, host));
    if let Ok(addr) = listener.local_addr() {
        crate::say!("mcpscope: metrics at http://{addr}/metrics");
    }
    let server = tokio::spawn(mcpscope_telemetry::metrics::serve::serve(
        listener,
        metrics.metrics.clone(),
        guard,
    ));
    (metrics, server)
}

/// What a proxy run holds besides its session: the proxy, its fault rules, how the upstream is
/// shown and the exporters.
struct ProxyRun {
    proxy: mcpscope_proxy::Proxy,
    engine: Arc<mcpscope_engine::fault::RuleEngine>,
    upstream_shown: String,
    forward: Option<Arc<mcpscope_proxy::ForwardMode>>,
    telemetry: Option<mcpscope_telemetry::Telemetry>,
    metrics: Option<Served>,
}

/// The proxy, and with `command` (`mcpscope run`) that command started through it (forward
/// mode) with the terminal its own: the run ends when the command does, with its status.
pub async fn run_proxy_with(
    args: ProxyArgs,
    command: Option<Vec<String>>,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    without_huge_pages();
    let forward = crate::forward::mode(&args)?;
    let upstream = upstream_of(&args, forward.is_some())?;
    // Before anything listens: a signal during start-up still ends the run cleanly.
    let mut shutdown = Shutdown::install().context("cannot register signal handlers")?;
    let upstream_shown = match &forward {
        Some(_) => mcpscope_proxy::UPSTREAM_LABEL.to_string(),
        None => Redactor::disabled().url(&upstream.to_string()),
    };
    check_exposure(&args)?;
    let mut config = proxy_config(&args, upstream.clone());
    config.ca_roots = crate::forward::ca_roots(&args.ca_files)?;
    config.forward = forward.clone();
    // Bad rules or a bad theme fail before anything listens or a recording is created.
    let engine = Arc::new(mcpscope_engine::fault::load(
        &args.faults,
        args.faults_file.as_deref(),
    )?);
    if let Some(theme) = &args.theme {
        mcpscope_tui::theme::Theme::load(theme).map_err(|e| UsageError(e.to_string()))?;
    }
    let otlp = args
        .otlp_endpoint
        .as_deref()
        .map(mcpscope_telemetry::Options::from_endpoint)
        .transpose()?;
    let metrics_listener = metrics_listener(&args).await?;
    // The upstream's password is scrubbed wherever it reappears (an upstream echoing it).
    let redactor = redactor(&args).with_url_secrets(&upstream.to_string());
    if !redactor.enabled() {
        crate::say!(
            "mcpscope: WARNING: --no-redact: secrets are kept in the recording and shown on screen"
        );
    }
    let recorder = create_recording(&args.recording, redactor.enabled(), DefaultPlace::Required)?;
    let mut builder = Session::builder("http", redactor)
        .name(args.name.clone())
        .keep(args.keep)
        .upstream(upstream_shown.clone())
        .record(recorder)
        .published(!args.no_publish);
    let telemetry = otlp.map(|options| mcpscope_telemetry::subscribe(&mut builder, options));
    let metrics = metrics_listener
        .map(|listener| serve_metrics(&mut builder, listener, args.allow_hosts.clone()));
    let mut session = builder.start()?;
    let proxy = mcpscope_proxy::start(config, session.sink()).await?;
    proxy.shared.set_planner(engine.clone());
    let run = ProxyRun {
        proxy,
        engine,
        upstream_shown,
        forward,
        telemetry,
        metrics,
    };
    say_started(&args, &run, &session);
    session.publish(Some(run.proxy.addr.to_string()));
    // The check runs beside the proxy: start-up (and a signal during it) does not wait on it.
    let probe = tokio::spawn(probe_unless_forwarding(
        upstream,
        run.upstream_shown.clone(),
        run.forward.is_some(),
    ));
    let (status, notices) = match command {
        Some(command) => watch_command(&args, &run, &mut session, &mut shutdown, command).await?,
        None => (
            None,
            watch(&args, &run, &mut session, &mut shutdown, probe).await?,
        ),
    };
    end(run, session, notices).await;
    Ok(status)
}

/// What the proxy says once it listens.
fn say_started(args: &ProxyArgs, run: &ProxyRun, session: &Session) {
    crate::pass_host::warn(args);
    for label in run.engine.armed() {
        crate::say!("mcpscope: fault rule armed: {label}");
    }
    if args.rescue {
        crate::say!(
            "mcpscope: --rescue: calls whose stream dies unresumable are answered with a JSON-RPC error"
        );
    }
    match &run.forward {
        Some(mode) => crate::forward::say_listening(run.proxy.addr, mode),
        None => crate::say!(
            "mcpscope: listening on http://{} (upstream {})",
            run.proxy.addr,
            run.upstream_shown
        ),
    }
    if let Some(path) = session.recording() {
        crate::say!("mcpscope: recording to {}", path.display());
    }
}

/// Warns at start when nothing listens at the upstream (not in forward mode).
async fn probe_unless_forwarding(upstream: Uri, shown: String, forwarding: bool) {
    if forwarding {
        return;
    }
    if let Err(e) = mcpscope_proxy::probe(&upstream).await {
        crate::say!(
            "mcpscope: WARNING: the upstream {shown} cannot be reached now ({e}); \
             requests get 502 until it can"
        );
    }
}

/// `mcpscope run`: the command with the terminal its own, until it ends or a signal comes; the
/// session's notices go to stderr (`--headless`, `--json`) or are only drained (watched with
/// `mcpscope attach`). Returns the command's status and the notices still to print.
async fn watch_command(
    args: &ProxyArgs,
    run: &ProxyRun,
    session: &mut Session,
    shutdown: &mut Shutdown,
    command: Vec<String>,
) -> anyhow::Result<(Option<std::process::ExitStatus>, Option<Shown>)> {
    let mut child = crate::forward::spawn(&command, run.proxy.addr, run.forward.as_deref())?;
    let view = View::chosen(args.headless, args.json);
    let mut shown: Shown = match (view, args.headless || args.json) {
        (View::Headless(style), true) => {
            let (feed, pace) = session.view().context("view feed already taken")?;
            // Stdout is the command's.
            Box::pin(async move {
                headless::run_to(feed, style, Some(pace), &mut std::io::stderr()).await;
            })
        }
        _ => Box::pin(crate::forward::drain(
            session.feed().context("view feed already taken")?,
        )),
    };
    let mut status = None;
    let mut shown_all = false;
    tokio::select! {
        ended = child.wait() => status = Some(ended.context("cannot wait for the command")?),
        _ = &mut shown => shown_all = true,
        signal = shutdown.wait() => tracing::info!("{signal}: shutting down"),
    }
    if !shown_all {
        return Ok((status, Some(shown)));
    }
    // The feed closed before the command ended (the hub is gone): wait for the command.
    tokio::select! {
        ended = child.wait() => status = Some(ended.context("cannot wait for the command")?),
        signal = shutdown.wait() => tracing::info!("{signal}: shutting down"),
    }
    Ok((status, None))
}

/// The session's view until quit or a signal: the notices printed headless (returned unfinished
/// after a signal, to print what the shutdown ends too) or the TUI.
async fn watch(
    args: &ProxyArgs,
    run: &ProxyRun,
    session: &mut Session,
    shutdown: &mut Shutdown,
    probe: tokio::task::JoinHandle<()>,
) -> anyhow::Result<Option<Shown>> {
    let (feed, pace) = session.view().context("view feed already taken")?;
    if let View::Headless(style) = View::chosen(args.headless, args.json) {
        // Folded on this thread (the runtime's workers are the proxy's).
        let mut shown: Shown = Box::pin(async move {
            headless::run(feed, style, Some(pace)).await;
        });
        tokio::select! {
            _ = &mut shown => return Ok(None),
            signal = shutdown.wait() => tracing::info!("{signal}: shutting down"),
        }
        return Ok(Some(shown));
    }
    // Said before the screen is taken over (and left in the terminal's scrollback).
    let _ = probe.await;
    let mut info = mcpscope_tui::Info::live(session.info(), Some(pace));
    info.theme = args.theme.clone();
    info.ca_cert = run
        .forward
        .as_ref()
        .map(|mode| mode.ca.cert_path().to_path_buf());
    info.telemetry = crate::pass_host::status(
        run.telemetry
            .as_ref()
            .map(|t| mcpscope_tui::StatusText(t.status_text())),
        args.pass_host,
    );
    let faults = mcpscope_proxy::controller::controller(&run.proxy, run.engine.clone());
    // A signal ends the TUI like `q` does: the view is dropped, which restores the terminal.
    tokio::select! {
        result = mcpscope_tui::run_live(feed, info, Some(faults)) => result?,
        signal = shutdown.wait() => tracing::info!("{signal}: shutting down"),
    }
    Ok(None)
}

/// Ends the run: the proxy stops accepting and ends every open exchange (detail `shutdown`);
/// the session records everything sent so far while `notices` prints what it hands the view;
/// then the exporters finish.
async fn end(run: ProxyRun, session: Session, notices: Option<Shown>) {
    let ended = run.proxy.shutdown();
    tracing::info!("{ended} open exchanges ended at shutdown");
    drop(run.proxy);
    let recording = session.recording().map(std::path::Path::to_path_buf);
    let finishing = session.finish(FINISH_PATIENCE);
    let tally = match notices {
        // The feed closes once the hub has ended and the view has taken what is queued.
        Some(notices) => tokio::join!(finishing, tokio::time::timeout(FINISH_PATIENCE, notices)).0,
        None => finishing.await,
    };
    if let Some(path) = recording {
        match tally {
            Some(t) => crate::say!(
                "mcpscope: recorded {} of {} events to {}",
                t.written,
                t.seen,
                path.display()
            ),
            None => crate::say!(
                "mcpscope: the recording {} was not finished within {:?} (every line written so far is on disk)",
                path.display(),
                FINISH_PATIENCE
            ),
        }
    }
    if let Some((metrics, server)) = run.metrics {
        server.abort();
        metrics.stop();
    }
    if let Some(telemetry) = run.telemetry {
        telemetry
            .finish_within(std::time::Duration::from_secs(2))
            .await;
    }
}

/// Resolves on SIGINT, SIGTERM, SIGHUP or SIGQUIT (registered when first polled; a run that
/// must not miss one during start-up uses [`Shutdown::install`] first).
pub async fn shutdown_signal() {
    match Shutdown::install() {
        Ok(mut shutdown) => {
            shutdown.wait().await;
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `mcpscope serve-test`: serves until a shutdown signal.
pub async fn serve_test(args: &ServeTestArgs) -> anyhow::Result<()> {
    let server = mcpscope_testserver::start(mcpscope_testserver::Options {
        listen: args.listen.0,
        json_responses: args.json_responses,
        event_ids: !args.no_event_ids,
        retry_ms: (args.retry_ms > 0).then_some(args.retry_ms),
        keepalive: (args.keepalive > 0).then(|| std::time::Duration::from_secs(args.keepalive)),
        slow: None,
    })
    .await?;
    crate::say!("mcpscope serve-test: listening on {}", server.url());
    shutdown_signal().await;
    server.shutdown().await;
    Ok(())
}

/// `mcpscope run [OPTIONS] -- COMMAND…`: the forward proxy and the command; the command's exit
/// status is ours.
pub async fn run_command(args: &crate::cli::RunArgs) -> anyhow::Result<()> {
    let mut proxy = args.proxy.clone();
    proxy.forward = true;
    let status = run_proxy_with(proxy, Some(args.command.clone())).await?;
    match status {
        None => Ok(()),
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(crate::forward::CommandExit(shell_status(status)).into()),
    }
}

/// The exit code a shell gives for a command's status: its own code, or 128 + the signal that
/// ended it.
fn shell_status(status: std::process::ExitStatus) -> u8 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(u8::MAX);
        }
    }
    status
        .code()
        .and_then(|code| u8::try_from(code).ok())
        .unwrap_or(1)
}
