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
use mcpscope_session::Session;
use mcpscope_testserver as testserver;

use super::activity::{self, ActivityLog};
use super::cases::{self, Case, Expect};
use super::client::{self, ClientRun, Stop};
use super::evidence::Evidence;
use super::judge::{self, Judgement, Target};
use mcpscope_engine::event::EventKind;

/// How long the proxy goes on after the client ended, so that the last events arrive.
const SETTLE: Duration = Duration::from_millis(150);

/// How long a stall is watched after it fires: any reaction is correct, so once a prompt give-up
/// is ruled out the cell has seen what it needs.
const STALL_WATCH: Duration = Duration::from_millis(judge::PROMPT_MS as u64 + 1_000);

/// The longest a starting client holds its start-up permit without sending a request.
pub const START_WINDOW: Duration = Duration::from_secs(2);

/// The note recorded just before the matrix kills a client at its timeout: what the proxy sees
/// from then on (a closed stream, a cancelled call) is the kill, not the client's reaction, and
/// the cell's judgement never sees it.
pub const KILL_NOTE: &str =
    "matrix: the client is killed at its timeout; what follows is the kill, not the client";

/// How long the end of a cell waits for its recording to be written.
const FINISH_PATIENCE: Duration = Duration::from_secs(5);

/// What every cell shares.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The client command, with `{url}` placeholders.
    pub command: Vec<String>,
    /// How long the client may take, in its phases.
    pub bounds: Bounds,
    /// Which requests the fault hits.
    pub target: Target,
    /// The upstream to use instead of a built-in test server per cell.
    pub upstream: Option<Uri>,
    /// The user's server to start for each cell instead of the built-in one.
    pub server_command: Option<super::server::ServerCommand>,
    /// Where each cell's recording goes.
    pub record_dir: Option<PathBuf>,
    /// Run the proxy with `--rescue`.
    pub rescue: bool,
    /// Clients starting at once are held to the machine's cores: a client holds a permit from
    /// its spawn until its first request (or [`START_WINDOW`]).
    pub starting: Arc<tokio::sync::Semaphore>,
    /// The agent host run instead of a client command.
    pub host: Option<Arc<super::host::HostPlan>>,
    /// Each cell's proxy is a forward proxy (`--forward`).
    pub forward: Option<Forward>,
}

/// How the cells run as forward proxies.
#[derive(Debug, Clone)]
pub struct Forward {
    /// The forward-proxy mode every cell's proxy gets (the local CA).
    pub mode: Arc<mcpscope_proxy::ForwardMode>,
    /// The variables that make the client trust the local CA.
    pub trust: Vec<(String, String)>,
    /// Certificates trusted for upstream TLS besides the Web PKI roots (`--ca-file`).
    pub ca_roots: Vec<mcpscope_proxy::ca::Certificate>,
}

/// Why a forward cell that saw no request is not judged: a client that ignores the proxy
/// variables reaches its server past the proxy, and that is not a reaction to any death.
pub const FORWARD_UNSEEN: &str = "no request came through the forward proxy (the client did not use HTTP_PROXY/HTTPS_PROXY, or sent nothing)";

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
    /// What an agent host did, when the matrix ran one.
    pub host: Option<HostCell>,
    /// When the provoked call broke (its stream's death, its error, or the fault).
    pub broke_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The built-in server's tool the slow cases time.
const SLOW_TOOL: &str = "slow";

impl CellResult {
    /// A cell not run, for `reason`.
    fn skipped(case: &'static Case, reason: &str) -> Self {
        CellResult {
            case,
            judgement: Judgement::skipped(case.expect, reason, None),
            client: ClientRun::default(),
            elapsed_ms: 0,
            recording: None,
            host: None,
            broke_at: None,
        }
    }
}

/// What a cell's agent host did.
#[derive(Debug, Clone)]
pub struct HostCell {
    /// The host and its version, e.g. `claude-code 2.1.332`.
    pub label: String,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: Option<String>,
    /// Its program.
    pub bin: String,
    /// The first tool result that reached the model.
    pub result: Option<mcpscope_hosts::stub::ToolResult>,
    /// Milliseconds from the call's death (or end) to its result at the model.
    pub tool_result_ms: Option<i64>,
    /// With `--rescue`: milliseconds from the death to the proxy's rescue answer (the proxy's
    /// part of `tool_result_ms`).
    pub rescue_ms: Option<i64>,
    /// With `--rescue`: milliseconds from the rescue answer to the result at the model (the
    /// host's part).
    pub rescued_to_model_ms: Option<i64>,
    /// Milliseconds from the host's start to its first MCP request.
    pub startup_ms: Option<i64>,
    /// Requests the model saw.
    pub model_requests: usize,
}

/// What the cell's proxy has seen so far, for the client's deadline.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// The client's first request arrived.
    request: bool,
    /// The request the case is about (the target's first call) was sent.
    call: bool,
    /// The case's fault fired.
    fault: bool,
    /// The call the case is about ended at the proxy: answered, failed, cancelled, or its
    /// stream closed.
    call_done: bool,
}

/// What a cell watches for before its idle timeout starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// The fault firing.
    Fault,
    /// The call being sent.
    Call,
    /// A stall firing, then [`STALL_WATCH`].
    Stall,
    /// The call ending (a slow call: waiting for it is no hang), for at most this long after
    /// it was sent.
    CallDone(Duration),
}

impl Watch {
    fn of(case: &Case, bounds: Bounds) -> Self {
        match (case.expect, case.fault, case.server.slow) {
            (Expect::Stall, _, _) => Watch::Stall,
            (Expect::SlowAnswer | Expect::Silent, _, Some(slow)) => Watch::CallDone(
                Duration::from_millis(slow.steps.saturating_mul(slow.interval_ms)) + bounds.cap,
            ),
            (_, Some(_), _) => Watch::Fault,
            (_, None, _) => Watch::Call,
        }
    }
}

/// How long a client may take, in its phases.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// From its start until the call is sent (and its fault fires): start-up, however slow the
    /// machine, is not the reaction.
    pub startup: Duration,
    /// How long it may sit idle after the fault (or, without one, after the call) before it is
    /// taken for hung.
    pub timeout: Duration,
    /// The longest a busy client is watched after the fault before the cell is left
    /// inconclusive.
    pub cap: Duration,
}

impl Bounds {
    /// The bounds for `timeout`: start-up `startup`, a busy client watched up to four timeouts.
    pub fn new(timeout: Duration, startup: Duration) -> Self {
        Bounds {
            startup,
            timeout,
            cap: timeout * 4,
        }
    }
}

/// Stops the client (returns) when, and says why: the start-up bound passed before the call
/// (and its fault); the client sat idle for `timeout` after the fault (or the call, or a slow
/// call's end); it was still busy at the cap; or, for a stall, [`STALL_WATCH`] passed after it
/// fired.
async fn stop_when(
    mut seen: tokio::sync::watch::Receiver<Seen>,
    bounds: Bounds,
    watch: Watch,
    activity: ActivityLog,
) -> Stop {
    let armed = seen.wait_for(|s| {
        if watch == Watch::Fault {
            s.fault
        } else {
            s.call
        }
    });
    if !matches!(tokio::time::timeout(bounds.startup, armed).await, Ok(Ok(_))) {
        return Stop::Startup;
    }
    match watch {
        Watch::Stall => {
            tokio::time::sleep(STALL_WATCH).await;
            return Stop::Watched;
        }
        Watch::CallDone(longest) => {
            let done = seen.wait_for(|s| s.call_done);
            if !matches!(tokio::time::timeout(longest, done).await, Ok(Ok(_))) {
                return Stop::Busy;
            }
        }
        Watch::Fault | Watch::Call => {}
    }
    let from = chrono::Utc::now();
    let began = tokio::time::Instant::now();
    let idle_needed = i64::try_from(bounds.timeout.as_millis()).unwrap_or(i64::MAX);
    loop {
        tokio::time::sleep(activity::SAMPLE).await;
        if activity.idle_ms_since(from) >= idle_needed {
            return Stop::Idle;
        }
        if began.elapsed() >= bounds.cap {
            return Stop::Busy;
        }
    }
}

/// Why a cell is not run at all, when its case cannot happen with this plan's server.
fn not_run(case: &'static Case, plan: &Plan) -> Option<CellResult> {
    let own_server = match (&plan.upstream, &plan.server_command) {
        (Some(_), _) => Some("--upstream"),
        (None, Some(_)) => Some("--server-command"),
        (None, None) => None,
    };
    if let (Some(flag), Some(reason)) = (own_server, case.needs_server) {
        // Another server cannot be set up for the case: what it describes cannot happen.
        return Some(CellResult::skipped(
            case,
            &format!("{reason} (not available with {flag})"),
        ));
    }
    if case.server.slow.is_some() && matches!(&plan.target, Target::Tool(tool) if tool != SLOW_TOOL)
    {
        return Some(CellResult::skipped(
            case,
            &format!("times the built-in server's `{SLOW_TOOL}` tool; --tool names another"),
        ));
    }
    None
}

/// The cell's server: the built-in one set up for its case, the user's (`--server-command`),
/// or none (`--upstream`).
enum CellServer {
    BuiltIn(testserver::TestServer),
    User(super::server::UserServer),
    Upstream,
}

impl CellServer {
    /// Starts it; `Err(cell)` when the user's server cannot start (the cell is inconclusive).
    async fn start(case: &'static Case, plan: &Plan) -> anyhow::Result<Result<Self, CellResult>> {
        if let Some(command) = &plan.server_command {
            return Ok(
                match super::server::UserServer::start(command, plan.bounds.startup).await {
                    Ok(server) => Ok(CellServer::User(server)),
                    Err(why) => {
                        let mut cell = CellResult::skipped(case, &why);
                        cell.judgement = Judgement::inconclusive(case.expect, &why, None);
                        Err(cell)
                    }
                },
            );
        }
        if plan.upstream.is_some() {
            return Ok(Ok(CellServer::Upstream));
        }
        let server = testserver::start_refusing(
            testserver::Options {
                json_responses: case.server.json,
                event_ids: case.server.event_ids,
                retry_ms: case.server.retry_ms,
                keepalive: case.server.keepalive.then_some(testserver::KEEPALIVE),
                slow: case.server.slow,
                ..testserver::Options::default()
            },
            case.server.refusal,
        )
        .await
        .context("cannot start the test server")?;
        Ok(Ok(CellServer::BuiltIn(server)))
    }

    /// The URL the cell's proxy forwards to.
    fn upstream(&self, plan: &Plan) -> anyhow::Result<Uri> {
        match (self, &plan.upstream) {
            (CellServer::BuiltIn(server), _) => server.url().parse().context("test server URL"),
            (CellServer::User(user), _) => user.url.parse().context("--server-command URL"),
            (CellServer::Upstream, Some(uri)) => Ok(uri.clone()),
            (CellServer::Upstream, None) => anyhow::bail!("no upstream"),
        }
    }

    async fn stop(self) {
        match self {
            CellServer::BuiltIn(server) => server.shutdown().await,
            CellServer::User(mut user) => {
                user.stop().await;
            }
            CellServer::Upstream => {}
        }
    }
}

/// The cell's recording, when the plan keeps them.
fn recorder(case: &Case, plan: &Plan) -> anyhow::Result<Option<Recorder>> {
    let Some(dir) = &plan.record_dir else {
        return Ok(None);
    };
    let path = dir.join(format!("{}.jsonl", case.name));
    Recorder::create(&path, Create::Replace, true)
        .map(Some)
        .with_context(|| format!("cannot create the recording {}", path.display()))
}

/// The cell's proxy: forwarding to `upstream`, or a forward proxy (the client is then given
/// the server's own URL and reaches the proxy through its environment).
fn proxy_config(plan: &Plan, upstream: Uri) -> Config {
    match &plan.forward {
        Some(forward) => Config {
            rescue: plan.rescue,
            forward: Some(Arc::clone(&forward.mode)),
            ca_roots: forward.ca_roots.clone(),
            ..Config::default()
        },
        None => Config {
            upstream,
            rescue: plan.rescue,
            ..Config::default()
        },
    }
}

/// Arms the case's fault on the cell's proxy.
fn arm(case: &Case, plan: &Plan, shared: &mcpscope_proxy::Shared) -> anyhow::Result<()> {
    let Some(fault) = case.fault else {
        return Ok(());
    };
    let rule = mcpscope_engine::fault::spec::parse_rule(&cases::rule(
        fault,
        &case.matchers(&plan.target.matchers()),
    ))
    .map_err(|e| mcpscope_engine::UsageError(format!("--tool/--method: {e}")))?;
    let engine = mcpscope_engine::fault::RuleEngine::new();
    engine.add(rule);
    shared.set_planner(Arc::new(engine));
    Ok(())
}

/// What the cell's fold hands back: the model, what the fault hit, when the proxy rescued.
type Folded = (Model, Evidence, Option<chrono::DateTime<chrono::Utc>>);

/// Folds the proxy's events into the cell's model, telling `seen_tx` when the client's first
/// request came, the call went out, the fault fired and the call ended; stops at the matrix's
/// own kill.
fn spawn_fold(
    mut feed: tokio::sync::mpsc::UnboundedReceiver<mcpscope_engine::event::Event>,
    seen_tx: tokio::sync::watch::Sender<Seen>,
    target: Target,
) -> tokio::task::JoinHandle<Folded> {
    tokio::spawn(async move {
        let mut model = Model::new();
        let mut evidence = Evidence::default();
        let mut rescued_at = None;
        let mut killed = false;
        while let Some(event) = feed.recv().await {
            // The model the cell judges stops where the client stopped being itself.
            killed |= matches!(&event.kind, EventKind::Note { text, .. } if text == KILL_NOTE);
            if killed {
                continue;
            }
            match event.kind {
                EventKind::StreamOpened { .. } => {
                    seen_tx.send_if_modified(|s| !std::mem::replace(&mut s.request, true));
                }
                EventKind::FaultInjected { .. } => {
                    seen_tx.send_if_modified(|s| !std::mem::replace(&mut s.fault, true));
                }
                EventKind::CallRescued { .. } => {
                    rescued_at.get_or_insert(event.t);
                }
                _ => {}
            }
            evidence.see(&event.kind);
            model.apply(&event);
            if !seen_tx.borrow().call_done
                && let Some(call) = judge::first_target(&model, &target)
            {
                let done = judge::call_done(&model, call);
                seen_tx.send_if_modified(|s| {
                    let changed = !s.call || (done && !s.call_done);
                    s.call = true;
                    s.call_done |= done;
                    changed
                });
            }
        }
        (model, evidence, rescued_at)
    })
}

/// The URL the client is given and what its environment gains: the proxy's URL; or, through
/// the forward proxy, the server's own URL with the proxy and trust variables; and a host's
/// idle timeout where the case sets one.
fn client_env(
    case: &Case,
    plan: &Plan,
    proxy: std::net::SocketAddr,
    server_url: String,
) -> (String, Vec<(String, String)>) {
    let (url, mut env) = match &plan.forward {
        Some(forward) => {
            let mut vars = mcpscope_proxy::forward_env::proxy_vars(proxy);
            vars.extend(forward.trust.iter().cloned());
            (server_url, vars)
        }
        None => (format!("http://{proxy}/mcp"), Vec::new()),
    };
    if let (Some(host), Some(ms)) = (&plan.host, case.host_idle_timeout_ms)
        && let Some(name) = &host.host.idle_timeout_env
    {
        env.push((name.clone(), ms.to_string()));
    }
    (url, env)
}

/// What a cell's agent host did, in figures measured from the model and the host's run.
fn host_cell(
    plan_host: &super::host::HostPlan,
    host_run: super::host::HostRun,
    (model, target): (&Model, &Target),
    run: &ClientRun,
    rescued_at: Option<chrono::DateTime<chrono::Utc>>,
) -> HostCell {
    let broke_at = judge::broke_at(model, target);
    let first_request = model.streams.iter().map(|s| s.opened_at).min();
    HostCell {
        label: plan_host.label(),
        name: plan_host.host.name.clone(),
        version: plan_host.version.clone(),
        bin: plan_host.bin.clone(),
        tool_result_ms: host_run
            .result
            .as_ref()
            .zip(broke_at)
            .map(|(r, at)| super::host::ms(at, r.at)),
        rescue_ms: rescued_at
            .zip(broke_at)
            .map(|(rescued, at)| super::host::ms(at, rescued)),
        rescued_to_model_ms: host_run
            .result
            .as_ref()
            .zip(rescued_at)
            .map(|(r, rescued)| super::host::ms(rescued, r.at)),
        startup_ms: run
            .started_at
            .zip(first_request)
            .map(|(from, to)| super::host::ms(from, to)),
        result: host_run.result,
        model_requests: host_run.model_requests,
    }
}

/// Why a case about the server's `retry:` hint is not judged: no hint reached the client (a
/// revision before 2025-11-25 has no priming event to carry one), so the case is only another
/// stream death.
fn no_retry_hint<'m>(
    case: &Case,
    model: &'m Model,
    target: &Target,
) -> Option<(String, &'m mcpscope_engine::model::Call)> {
    case.server.retry_ms?;
    let call = judge::first_target(model, target)?;
    if model
        .stream(call.request_stream)
        .is_some_and(|s| s.retry_ms.is_some())
    {
        return None;
    }
    Some((
        format!(
            "no retry hint reached the client (revision {} sends no priming event with retry:)",
            call.revision.as_deref().unwrap_or("unknown")
        ),
        call,
    ))
}

/// Runs one cell.
pub async fn run(case: &'static Case, plan: &Plan) -> anyhow::Result<CellResult> {
    if let Some(cell) = not_run(case, plan) {
        return Ok(cell);
    }
    let server = match CellServer::start(case, plan).await? {
        Ok(server) => server,
        Err(cell) => return Ok(cell),
    };
    let upstream = server.upstream(plan)?;
    let server_url = upstream.to_string();
    let mut session = Session::builder("cell", Redactor::new())
        .record(recorder(case, plan)?)
        .start()?;
    let proxy = mcpscope_proxy::start(proxy_config(plan, upstream), session.sink()).await?;
    arm(case, plan, &proxy.shared)?;
    let feed = session.feed().context("view feed taken")?;
    let (seen_tx, seen) = tokio::sync::watch::channel(Seen::default());
    let fold = spawn_fold(feed, seen_tx, plan.target.clone());
    let permit = Arc::clone(&plan.starting).acquire_owned().await;
    let mut started = seen.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let _ = tokio::time::timeout(START_WINDOW, started.wait_for(|s| s.request)).await;
    });
    let shared = Arc::clone(&proxy.shared);
    let activity = ActivityLog::default();
    let why_stopped = Arc::new(std::sync::Mutex::new(None));
    let stop = stop_when(
        seen,
        plan.bounds,
        Watch::of(case, plan.bounds),
        activity.clone(),
    );
    let stopped = Arc::clone(&why_stopped);
    let stop = async move {
        let why = stop.await;
        if let Ok(mut stopped) = stopped.lock() {
            *stopped = Some(why);
        }
        shared.note(None, KILL_NOTE);
    };
    let (url, extra_env) = client_env(case, plan, proxy.addr, server_url);
    let (mut run, host_run) = match &plan.host {
        Some(host) => {
            let (run, host_run) = super::host::run(
                host,
                &url,
                (&extra_env, case.host_idle_timeout_ms),
                activity,
                stop,
            )
            .await?;
            (run, Some(host_run))
        }
        None => {
            let argv = client::substitute(&plan.command, &url);
            let setting = client::Setting {
                env: (!extra_env.is_empty()).then(|| std::env::vars().chain(extra_env).collect()),
                dir: None,
                activity: Some(activity),
            };
            (client::run_in(&argv, &setting, stop).await, None)
        }
    };
    if run.killed {
        run.stop = why_stopped.lock().ok().and_then(|s| *s);
    }
    let ended_at = run.exited_at.unwrap_or_else(chrono::Utc::now);
    tokio::time::sleep(SETTLE).await;
    proxy.shutdown();
    drop(proxy);
    let recording = session.recording().map(std::path::Path::to_path_buf);
    session.finish(FINISH_PATIENCE).await;
    let (model, evidence, rescued_at) = fold.await.context("the cell's model")?;
    server.stop().await;
    let elapsed_ms = run
        .started_at
        .map_or(0, |start| (ended_at - start).num_milliseconds());
    let host = match (&plan.host, host_run) {
        (Some(plan_host), Some(host_run)) => Some(host_cell(
            plan_host,
            host_run,
            (&model, &plan.target),
            &run,
            rescued_at,
        )),
        _ => None,
    };
    // A host's reaction is what reached the model (`ClientRun::model_reaction`), a generic
    // client's what the proxy saw; no words of either's output are read.
    let judgement = if plan.forward.is_some() && model.streams.is_empty() {
        Judgement::skipped(case.expect, FORWARD_UNSEEN, None)
    } else if let Some((why, call)) = no_retry_hint(case, &model, &plan.target) {
        Judgement::skipped(case.expect, &why, Some(call))
    } else {
        judge::judge(
            &model,
            &plan.target,
            (case.fault, case.expect),
            &evidence,
            &run,
        )
    };
    Ok(CellResult {
        case,
        judgement,
        client: run,
        elapsed_ms,
        recording,
        host,
        broke_at: judge::broke_at(&model, &plan.target),
    })
}
