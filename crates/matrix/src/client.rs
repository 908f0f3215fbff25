//! Runs the client command once, bounded by the timeout, and keeps what it printed and when.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;

use super::activity::{Activity, ActivityLog};

/// Output lines with when each arrived, shared by the readers of stdout and stderr.
type Lines = Arc<Mutex<Vec<(DateTime<Utc>, String)>>>;

/// Lines of output kept per cell.
const KEPT_LINES: usize = 200;

/// What the client process did.
#[derive(Debug, Clone, Default)]
pub struct ClientRun {
    /// When it started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it exited (`None` when the timeout killed it).
    pub exited_at: Option<DateTime<Utc>>,
    /// Its exit code (`None` when killed or ended by a signal).
    pub code: Option<i32>,
    /// Whether the timeout killed it.
    pub killed: bool,
    /// When the matrix killed it (what the proxy sees from then on is the kill, not the client).
    pub killed_at: Option<DateTime<Utc>>,
    /// Its output lines (stdout and stderr), with when each arrived.
    pub lines: Vec<(DateTime<Utc>, String)>,
    /// Why it could not start, if it could not.
    pub spawn_error: Option<String>,
    /// An agent host's reaction: when the provoked tool's result (or error) reached the model.
    pub model_reaction: Option<DateTime<Utc>>,
    /// An agent host's model requests, when the matrix ran one: the tool names the model was
    /// offered (each once, in order), and whether it was asked at all.
    pub model_tools: Option<Vec<String>>,
    /// When its processes were busy (ran or waited for a CPU), sampled while it ran.
    pub activity: Activity,
    /// Why the matrix stopped it, when it did.
    pub stop: Option<Stop>,
}

/// Why the matrix stopped a client that had not exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The start-up bound passed before the call was sent (or its fault fired).
    Startup,
    /// It sat idle for the whole timeout after the fault (or the call): a hang.
    Idle,
    /// It was still busy (running, or waiting for a CPU) at the cap after the fault: not
    /// judged.
    Busy,
    /// A stall was watched for as long as it needs.
    Watched,
}

impl ClientRun {
    /// The last `n` output lines.
    pub fn last_lines(&self, n: usize) -> Vec<String> {
        let skip = self.lines.len().saturating_sub(n);
        self.lines
            .iter()
            .skip(skip)
            .map(|(_, l)| l.clone())
            .collect()
    }
}

/// `args` with every `{url}` replaced by `url`.
pub fn substitute(args: &[String], url: &str) -> Vec<String> {
    args.iter().map(|a| a.replace("{url}", url)).collect()
}

/// Where and with what environment a command runs (default: ours).
#[derive(Debug, Clone, Default)]
pub struct Setting {
    /// The whole environment, replacing ours.
    pub env: Option<Vec<(String, String)>>,
    /// The working directory.
    pub dir: Option<std::path::PathBuf>,
    /// Where the client's activity is sampled to while it runs (none: not sampled).
    pub activity: Option<ActivityLog>,
}

/// Runs `argv` until it exits or `stop` resolves (then kills its whole process group).
pub async fn run(argv: &[String], stop: impl std::future::Future<Output = ()>) -> ClientRun {
    run_in(argv, &Setting::default(), stop).await
}

/// [`run`] with its environment and working directory set.
pub async fn run_in(
    argv: &[String],
    setting: &Setting,
    stop: impl std::future::Future<Output = ()>,
) -> ClientRun {
    let mut out = ClientRun {
        started_at: Some(Utc::now()),
        ..ClientRun::default()
    };
    let Some((program, args)) = argv.split_first() else {
        out.spawn_error = Some("no command".into());
        return out;
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(env) = &setting.env {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    }
    if let Some(dir) = &setting.dir {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            out.spawn_error = Some(format!("cannot run {program}: {e}"));
            return out;
        }
    };
    let sampler = match (
        &setting.activity,
        child.id().and_then(|p| i32::try_from(p).ok()),
    ) {
        (Some(log), Some(pid)) => Some(tokio::spawn(super::activity::sample(pid, log.clone()))),
        _ => None,
    };
    let lines: Lines = Arc::new(Mutex::new(Vec::new()));
    let readers = [
        child
            .stdout
            .take()
            .map(|s| spawn_reader(s, Arc::clone(&lines))),
        child
            .stderr
            .take()
            .map(|s| spawn_reader(s, Arc::clone(&lines))),
    ];
    let waited = tokio::select! {
        waited = child.wait() => Some(waited),
        () = stop => None,
    };
    match waited {
        Some(Ok(status)) => {
            out.exited_at = Some(Utc::now());
            out.code = status.code();
        }
        Some(Err(e)) => out.spawn_error = Some(format!("waiting for the client: {e}")),
        None => {
            out.killed = true;
            out.killed_at = Some(Utc::now());
            kill_group(&mut child).await;
        }
    }
    if let Some(sampler) = sampler {
        sampler.abort();
    }
    if let Some(log) = &setting.activity {
        out.activity = log.snapshot();
    }
    // The output pipes close with the process group; never wait long for a stray holder.
    for reader in readers.into_iter().flatten() {
        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
    }
    out.lines = std::mem::take(&mut *lines.lock().unwrap_or_else(|p| p.into_inner()));
    out
}

/// Whether `program` names an executable file: a path (with a `/`) as it is, a bare name on
/// PATH. A client command that cannot start is no cell's verdict: the matrix refuses it up front.
pub fn can_run(program: &str) -> bool {
    let executable = |path: &std::path::Path| {
        std::fs::metadata(path).is_ok_and(|m| {
            #[cfg(unix)]
            let runs = {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode() & 0o111 != 0
            };
            #[cfg(not(unix))]
            let runs = true;
            m.is_file() && runs
        })
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| executable(&dir.join(program)))
    })
}

async fn kill_group(child: &mut tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals the process group we created for the child.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill().await;
}

fn spawn_reader(
    stream: impl AsyncRead + Unpin + Send + 'static,
    lines: Lines,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            let mut lines = lines.lock().unwrap_or_else(|p| p.into_inner());
            if lines.len() == KEPT_LINES {
                lines.remove(0);
            }
            lines.push((Utc::now(), line));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_is_substituted_everywhere() {
        let args = ["c".to_string(), "--server={url}".into(), "{url}".into()];
        assert_eq!(
            substitute(&args, "http://x/mcp"),
            ["c", "--server=http://x/mcp", "http://x/mcp"]
        );
    }

    #[tokio::test]
    async fn a_hanging_command_is_killed_at_the_timeout() {
        let argv: Vec<String> = ["sh", "-c", "echo up; sleep 30"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let started = std::time::Instant::now();
        let run = run(&argv, tokio::time::sleep(Duration::from_millis(500))).await;
        assert!(run.killed && run.code.is_none());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(run.last_lines(1), ["up"]);
    }

    #[tokio::test]
    async fn exit_code_and_output_are_kept() {
        let argv: Vec<String> = ["sh", "-c", "echo out; echo err >&2; exit 3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let run = run(&argv, tokio::time::sleep(Duration::from_secs(10))).await;
        assert_eq!(run.code, Some(3));
        assert!(!run.killed && run.exited_at.is_some());
        let mut lines = run.last_lines(5);
        lines.sort();
        assert_eq!(lines, ["err", "out"]);
    }
}
