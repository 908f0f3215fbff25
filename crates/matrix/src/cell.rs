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

/// Runs one cell.
pub async fn run(case: &'static Case, plan: &Plan) -> anyhow::Result<CellResult> {
    let own_server = match (&plan.upstream, &plan.server_command) {
        (Some(_), _) => Some("--upstream"),
        (None, Some(_)) => Some("--server-command"),
        (None, None) => None,
    };
    if let (Some(flag), Some(reason)) = (own_server, case.needs_server) {
        // Another server cannot be set up for the case: what it describes cannot happen.
        return Ok(CellResult::skipped(
            case,
            &format!("{reason} (not available with {flag})"),
        ));
    }
    if case.server.slow.is_some() && matches!(&plan.target, Target::Tool(tool) if tool != SLOW_TOOL)
    {
        return Ok(CellResult::skipped(
            case,
            &format!("times the built-in server's `{SLOW_TOOL}` tool; --tool names another"),
        ));
    }
    let mut user_server = match &plan.server_command {
        Some(command) => match super::server::UserServer::start(command, plan.bounds.startup).await
        {
            Ok(server) => Some(server),
            Err(why) => {
                let mut cell = CellResult::skipped(case, &why);
                cell.judgement = Judgement::inconclusive(case.expect, &why, None);
                return Ok(cell);
            }
        },
        None => None,
    };
    let server = match (&plan.upstream, &user_server) {
        (Some(_), _) | (None, Some(_)) => None,
        (None, None) => Some(
            testserver::start_refusing(
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
            .context("cannot start the test server")?,
        ),
    };
    let upstream = match (&plan.upstream, &server, &user_server) {
        (Some(uri), _, _) => uri.clone(),
        (None, Some(server), _) => server.url().parse().context("test server URL")?,
        (None, None, Some(user)) => user.url.parse().context("--server-command URL")?,
        (None, None, None) => anyhow::bail!("no upstream"),
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
    // Forward: the client is given the server's own URL, the proxy only through its
    // environment; the proxy's `upstream` is not used.
    let server_url = upstream.to_string();
    let config = match &plan.forward {
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
    };
    let mut running = start_proxy(config, recorder, Redactor::new()).await?;
    if let Some(fault) = case.fault {
        let rule = mcpscope_engine::fault::spec::parse_rule(&cases::rule(
            fault,
            &case.matchers(&plan.target.matchers()),
        ))
        .map_err(|e| mcpscope_engine::UsageError(format!("--tool/--method: {e}")))?;
        let engine = mcpscope_engine::fault::RuleEngine::new();
        engine.add(rule);
        running.proxy.shared.set_planner(Arc::new(engine));
    }
    let mut feed = running.hub.take_output().context("view feed taken")?;
    let (seen_tx, seen) = tokio::sync::watch::channel(Seen::default());
    let target = plan.target.clone();
    let fold = tokio::spawn(async move {
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
    });
    let permit = Arc::clone(&plan.starting).acquire_owned().await;
    let mut started = seen.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let _ = tokio::time::timeout(START_WINDOW, started.wait_for(|s| s.request)).await;
    });
    let shared = Arc::clone(&running.proxy.shared);
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
    let (url, mut extra_env) = match &plan.forward {
        Some(forward) => {
            let mut vars = mcpscope_proxy::forward_env::proxy_vars(running.proxy.addr);
            vars.extend(forward.trust.iter().cloned());
            (server_url, vars)
        }
        None => (format!("http://{}/mcp", running.proxy.addr), Vec::new()),
    };
    if let (Some(host), Some(ms)) = (&plan.host, case.host_idle_timeout_ms)
        && let Some(name) = &host.host.idle_timeout_env
    {
        extra_env.push((name.clone(), ms.to_string()));
    }
    let (run, host_run) = match &plan.host {
        Some(host) => {
            let (run, host_run) = super::host::run(host, &url, &extra_env, activity, stop).await?;
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
    let mut run = run;
    if run.killed {
        run.stop = why_stopped.lock().ok().and_then(|s| *s);
    }
    let ended_at = run.exited_at.unwrap_or_else(chrono::Utc::now);
    tokio::time::sleep(SETTLE).await;
    running.proxy.shutdown();
    drop(running.proxy);
    let recording = running.hub.recording.clone();
    let _ = tokio::task::spawn_blocking(move || running.hub.finish_within(FINISH_PATIENCE)).await;
    let (model, evidence, rescued_at) = fold.await.context("the cell's model")?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    if let Some(user) = &mut user_server {
        user.stop().await;
    }
    let elapsed_ms = run
        .started_at
        .map_or(0, |start| (ended_at - start).num_milliseconds());
    let host = match (&plan.host, host_run) {
        (Some(plan_host), Some(host_run)) => {
            let broke_at = judge::broke_at(&model, &plan.target);
            let first_request = model.streams.iter().map(|s| s.opened_at).min();
            Some(HostCell {
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
            })
        }
        _ => None,
    };
    // A host's reaction is what reached the model (`ClientRun::model_reaction`), a generic
    // client's what the proxy saw; no words of either's output are read.
    let judgement = if plan.forward.is_some() && model.streams.is_empty() {
        Judgement::skipped(case.expect, FORWARD_UNSEEN, None)
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
