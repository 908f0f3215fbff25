//! `mcpscope matrix`: runs a client command once per stream-death case, each against its own
//! proxy with the case's fault armed, and judges how the client reacted.

pub mod activity;
pub mod args;
pub mod cases;
pub mod cell;
pub mod client;
pub mod evidence;
pub mod grid;
pub mod host;
pub mod judge;
pub mod report;
pub mod server;

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::Semaphore;

pub use args::MatrixArgs;
use cell::{CellResult, Plan};
use judge::Target;
use mcpscope_engine::UsageError;

/// Some cell found a defect (exit status 1).
#[derive(Debug)]
pub struct DefectsFound(pub usize);

impl std::fmt::Display for DefectsFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "matrix: {} cell(s) found a defect", self.0)
    }
}

impl std::error::Error for DefectsFound {}

/// No cell found a defect, but some could not be judged (exit status 3): the run did not show
/// how the client behaves there.
#[derive(Debug)]
pub struct Inconclusive(pub usize);

impl std::fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "matrix: inconclusive: {} cell(s) could not be judged (see their reasons)",
            self.0
        )
    }
}

impl std::error::Error for Inconclusive {}

/// Cells at a time when `--jobs` is not given: the machine's cores, for a client command and
/// an agent host alike. Starts are held to the cores apart from this (a cell holds a start-up
/// permit until its client's first request), and a hang is judged from idle time alone, so
/// cells side by side judge as cells one by one (Claude Code's 17 cells: the same verdicts at
/// one and two at a time, in 180 s and 90 s on 2 cores).
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The `--list` text: one line per case.
pub fn list() -> String {
    let width = cases::CASES.iter().map(|c| c.name.len()).max().unwrap_or(0);
    cases::CASES
        .iter()
        .map(|c| {
            let fault = c.fault.unwrap_or("(none)");
            format!("{:<width$}  {:<32}  {}\n", c.name, fault, c.about)
        })
        .collect()
}

fn target(args: &MatrixArgs) -> Target {
    match (&args.tool, &args.method) {
        (Some(tool), _) => Target::Tool(tool.clone()),
        (None, Some(method)) => Target::Method(method.clone()),
        (None, None) => Target::AnyTool,
    }
}

/// Refuses a run that cannot start: no client, or a client command that cannot run.
fn check_client(args: &MatrixArgs) -> Result<(), UsageError> {
    let agent_host = args.host.is_some() || args.host_file.is_some();
    if args.command.is_empty() && !agent_host {
        return Err(UsageError(
            "matrix needs a client command after `--`, or --host".into(),
        ));
    }
    if let (false, Some(program)) = (agent_host, args.command.first())
        && !client::can_run(program)
    {
        return Err(UsageError(format!(
            "cannot run the client command {program:?}: not found, or not executable"
        )));
    }
    Ok(())
}

/// What every cell of every column shares, from the arguments (no host yet).
fn base_plan(args: &MatrixArgs) -> anyhow::Result<Plan> {
    let forward = match args.forward {
        true => {
            let ca = mcpscope_proxy::forward_env::load_ca()?;
            let trust = mcpscope_proxy::forward_env::trust_vars(&ca)?;
            Some(cell::Forward {
                mode: Arc::new(mcpscope_proxy::ForwardMode::new(Arc::new(ca), Vec::new())),
                trust,
                ca_roots: mcpscope_proxy::forward_env::ca_roots(&args.ca_files)?,
            })
        }
        false => None,
    };
    Ok(Plan {
        forward,
        command: args.command.clone(),
        bounds: cell::Bounds::new(args.timeout, args.startup_timeout),
        target: target(args),
        upstream: args
            .upstream
            .as_deref()
            .map(mcpscope_proxy::parse_upstream)
            .transpose()?,
        server_command: args
            .server_command
            .as_deref()
            .map(|command| server::ServerCommand::parse(command, &args.server_path))
            .transpose()
            .map_err(UsageError)?,
        record_dir: args.record_dir.clone(),
        rescue: args.rescue,
        host: None,
        starting: Arc::new(Semaphore::new(
            std::thread::available_parallelism().map_or(2, |n| n.get()),
        )),
    })
}

/// One plan per column: per host program (a version sweep), else the one client command; the
/// recordings go to `scratch` when the plan keeps none (the grid opens them), a folder per
/// program when there are several.
fn columns(
    base: Plan,
    hosts: &[Arc<host::HostPlan>],
    scratch: Option<&std::path::Path>,
) -> Vec<Plan> {
    let several = hosts.len() > 1;
    let plans: Vec<Plan> = match hosts {
        [] => vec![base],
        _ => hosts
            .iter()
            .map(|h| Plan {
                host: Some(Arc::clone(h)),
                ..base.clone()
            })
            .collect(),
    };
    plans
        .into_iter()
        .map(|plan| {
            let folder = |dir: &std::path::Path| match (&plan.host, several) {
                (Some(host), true) => dir.join(file_label(&host.label())),
                _ => dir.to_path_buf(),
            };
            let record_dir = plan.record_dir.as_deref().or(scratch).map(folder);
            Plan { record_dir, ..plan }
        })
        .collect()
}

/// The exit the cells call for: a defect (1), else cells not judged (3), else none.
fn verdict(columns: &[Vec<CellResult>]) -> anyhow::Result<()> {
    let cells: Vec<&CellResult> = columns.iter().flatten().collect();
    let defects = cells
        .iter()
        .filter(|c| c.judgement.defect.is_some())
        .count();
    let inconclusive = cells
        .iter()
        .filter(|c| c.judgement.inconclusive.is_some())
        .count();
    match (defects, inconclusive) {
        (0, 0) => Ok(()),
        (0, n) => Err(Inconclusive(n).into()),
        (n, _) => Err(DefectsFound(n).into()),
    }
}

/// Runs the matrix; `Err(DefectsFound)` when a cell found a defect.
pub async fn run(args: &MatrixArgs) -> anyhow::Result<()> {
    if args.list {
        print!("{}", list());
        return Ok(());
    }
    if args.hosts {
        print!("{}", host::list());
        return Ok(());
    }
    check_client(args)?;
    let hosts = host::HostPlan::from_args(args).await?;
    let selected = cases::select(args.cases.as_deref(), args.quick).map_err(UsageError)?;
    let base = base_plan(args)?;
    let jobs = args.jobs.unwrap_or_else(default_jobs).max(1);
    // On a terminal, the grid fills in live; its cells' recordings are kept for Enter (in a
    // folder of the run's own unless --record-dir names one).
    let interactive = !args.json
        && !args.plain
        && std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal();
    let scratch = match (interactive, &args.record_dir) {
        (true, None) => Some(tempfile::tempdir().context("a folder for the cells' recordings")?),
        _ => None,
    };
    let columns = columns(base, &hosts, scratch.as_ref().map(|d| d.path()));
    let labels: Vec<String> = columns
        .iter()
        .map(|plan| match &plan.host {
            Some(host) => host.label(),
            None => args.command.join(" "),
        })
        .collect();
    let grid = interactive.then(|| {
        grid::start(
            &labels,
            &selected,
            columns
                .first()
                .map(|plan| announce_text(args, plan, selected.len(), jobs)),
        )
    });
    let mut columns_done = Vec::new();
    let mut failed = None;
    for (col, plan) in columns.into_iter().enumerate() {
        if let Some(dir) = &plan.record_dir
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            failed =
                Some(anyhow::Error::new(e).context(format!("cannot create {}", dir.display())));
            break;
        }
        mcpscope_tui::say!("{}", announce_text(args, &plan, selected.len(), jobs));
        let feed = grid.as_ref().map(|g| (g.updates.clone(), col));
        match run_column(Arc::new(plan), &selected, jobs, feed).await {
            Ok(cells) => columns_done.push(cells),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let all: Vec<CellResult> = columns_done.iter().flatten().cloned().collect();
    match (grid, failed) {
        // The terminal and stderr go back before the error is said.
        (Some(grid), Some(e)) => {
            grid.abort().await;
            return Err(e);
        }
        (None, Some(e)) => return Err(e),
        (Some(grid), None) => grid.finish(report::summary(&all)).await,
        (None, None) => {}
    }
    write_outputs(args, &columns_done)?;
    verdict(&columns_done)
}

/// A host's label as a file name: `claude-code 2.1.332` → `claude-code-2.1.332`.
fn file_label(label: &str) -> String {
    label
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                true => c,
                false => '-',
            },
        )
        .collect()
}

/// The line that says what a column of the matrix runs.
fn announce_text(args: &MatrixArgs, plan: &Plan, cells: usize, jobs: usize) -> String {
    format!(
        "mcpscope matrix: {}{cells} cells, {jobs} at a time{}, start-up {:?} at most, hung after {:?} \
         idle{}{}",
        plan.host.as_ref().map_or_else(String::new, |h| format!(
            "{} in a loopback-only network namespace, ",
            h.label()
        )),
        if args.jobs.is_none() { " (--jobs)" } else { "" },
        args.startup_timeout,
        args.timeout,
        if args.rescue {
            ", proxies with --rescue"
        } else {
            ""
        },
        if args.forward {
            ", forward proxies (the client gets the server's URL and HTTPS_PROXY)"
        } else {
            ""
        }
    )
}

/// Runs every selected case for one client (`jobs` cells at a time), in case order.
async fn run_column(
    plan: Arc<Plan>,
    selected: &[&'static cases::Case],
    jobs: usize,
    grid: Option<(grid::Feed, usize)>,
) -> anyhow::Result<Vec<CellResult>> {
    let gate = Arc::new(Semaphore::new(jobs));
    let total = selected.len();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = selected
        .iter()
        .enumerate()
        .map(|(row, &case)| {
            let (plan, gate, done) = (Arc::clone(&plan), Arc::clone(&gate), Arc::clone(&done));
            let grid = grid.clone();
            tokio::spawn(async move {
                let _permit = gate.acquire_owned().await;
                mcpscope_tui::say!("mcpscope matrix: {} running", case.name);
                if let Some((feed, col)) = &grid {
                    grid::running(feed, row, *col);
                }
                let result = cell::run(case, &plan).await;
                if let (Some((feed, col)), Ok(cell)) = (&grid, &result) {
                    grid::done(feed, row, *col, cell);
                }
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                match &result {
                    Ok(cell) => mcpscope_tui::say!(
                        "mcpscope matrix: [{n}/{total}] {}: {} ({}) {}",
                        case.name,
                        cell.judgement.outcome.word(),
                        cell.judgement
                            .reaction_ms
                            .map_or_else(|| "no reaction".into(), |ms| format!("{ms} ms")),
                        cell.judgement.verdict
                    ),
                    Err(e) => {
                        mcpscope_tui::say!("mcpscope matrix: [{n}/{total}] {}: {e:#}", case.name)
                    }
                }
                result
            })
        })
        .collect();
    let mut cells = Vec::new();
    for task in tasks {
        cells.push(task.await.context("a matrix cell panicked")??);
    }
    Ok(cells)
}

fn write_outputs(args: &MatrixArgs, columns: &[Vec<CellResult>]) -> anyhow::Result<()> {
    let labels: Vec<String> = columns
        .iter()
        .map(|cells| match cells.iter().find_map(|c| c.host.as_ref()) {
            Some(host) => host.label.clone(),
            None => args.command.join(" "),
        })
        .collect();
    let command = labels.join(", ");
    let cells: Vec<CellResult> = columns.iter().flatten().cloned().collect();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        for cell in &cells {
            writeln!(stdout, "{}", report::json(cell))?;
        }
    } else if columns.len() > 1 {
        write!(stdout, "{}", report::sweep(&labels, columns))?;
    } else {
        write!(stdout, "{}", report::table(&cells))?;
    }
    stdout.flush()?;
    if let Some(path) = &args.junit {
        mcpscope_engine::record::write_private(path, &report::junit(&cells, &command))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.markdown {
        mcpscope_engine::record::write_private(path, &report::markdown(&cells, &command))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
