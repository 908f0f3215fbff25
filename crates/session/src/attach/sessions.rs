//! The live sessions in the runtime directory: each socket probed for its hello; sockets of
//! processes that are gone are removed.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::UnixStream;

use crate::publish::place;
use crate::publish::wire::{Hello, Line, VERSION};

/// How long connecting to a session and reading its hello may take.
const PROBE_PATIENCE: Duration = Duration::from_secs(3);

/// One live session.
#[derive(Debug, Clone)]
pub struct LiveSession {
    /// Its socket.
    pub path: PathBuf,
    /// What it said when probed.
    pub hello: Hello,
}

impl LiveSession {
    /// What the session is about, in a few words: its name, addresses or command.
    pub fn label(&self) -> String {
        let s = &self.hello.session;
        let mut parts = Vec::new();
        if let Some(name) = &s.name {
            parts.push(format!("[{name}]"));
        }
        match (&s.listen, &s.upstream, &s.command) {
            (_, _, Some(command)) => parts.push(command.join(" ")),
            (listen, upstream, None) => parts.push(format!(
                "{} → {}",
                listen.as_deref().unwrap_or("?"),
                upstream.as_deref().unwrap_or("?")
            )),
        }
        parts.join(" ")
    }

    /// Whether `wanted` names this session: its pid, its name, its listen address or port.
    pub fn is_named(&self, wanted: &str) -> bool {
        let s = &self.hello.session;
        wanted == self.hello.pid.to_string()
            || s.name.as_deref() == Some(wanted)
            || s.listen.as_deref() == Some(wanted)
            || s.listen
                .as_deref()
                .and_then(|l| l.rsplit_once(':'))
                .is_some_and(|(_, port)| port == wanted)
    }
}

/// Whether a process with this id exists.
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Connects to a session's socket, checking that the session runs as this user.
pub async fn connect(path: &Path) -> anyhow::Result<UnixStream> {
    let stream = tokio::time::timeout(PROBE_PATIENCE, UnixStream::connect(path))
        .await
        .map_err(|_| anyhow::anyhow!("{}: no answer within {PROBE_PATIENCE:?}", path.display()))?
        .with_context(|| format!("cannot connect to {}", path.display()))?;
    let cred = stream
        .peer_cred()
        .with_context(|| format!("{}: whose session it is cannot be known", path.display()))?;
    place::check_peer(cred.uid(), place::own_uid()).map_err(|e| anyhow::anyhow!(e))?;
    Ok(stream)
}

/// Reads a session's hello line (or the reason it refuses).
pub async fn read_hello(reader: &mut BufReader<UnixStream>) -> anyhow::Result<Hello> {
    let mut line = String::new();
    let read = tokio::time::timeout(PROBE_PATIENCE, reader.read_line(&mut line))
        .await
        .map_err(|_| anyhow::anyhow!("the session said nothing within {PROBE_PATIENCE:?}"))??;
    if read == 0 {
        bail!("the session closed the connection without a word");
    }
    if let Ok(Line::End { end }) = serde_json::from_str::<Line>(&line) {
        bail!("the session refused: {end}");
    }
    let hello: Hello = serde_json::from_str(&line)
        .with_context(|| format!("not an mcpscope session: {}", line.trim_end()))?;
    if hello.mcpscope_attach != VERSION {
        bail!(
            "the session speaks attach protocol version {}, this mcpscope version {VERSION}",
            hello.mcpscope_attach
        );
    }
    Ok(hello)
}

async fn probe(path: &Path) -> anyhow::Result<Hello> {
    let stream = connect(path).await?;
    read_hello(&mut BufReader::new(stream)).await
}

/// The live sessions published in `dir`, by pid; sockets left by processes that are gone are
/// removed. A missing directory has none; one that is not the user's own is refused.
pub async fn list(dir: &Path) -> anyhow::Result<Vec<LiveSession>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    place::check_dir(dir).map_err(|e| anyhow::anyhow!(e))?;
    let mut found = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = place::socket_pid(&path) else {
            continue;
        };
        if !alive(pid) {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        match probe(&path).await {
            Ok(hello) => found.push(LiveSession { path, hello }),
            Err(e)
                if e.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused) =>
            {
                // Nobody listens: the pid was reused by another process.
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => crate::say!("mcpscope: skipping {}: {e:#}", path.display()),
        }
    }
    found.sort_by_key(|s| s.hello.pid);
    Ok(found)
}

/// The sessions as a table, one line each.
pub fn table(sessions: &[LiveSession]) -> String {
    let mut out = format!(
        "{:<8} {:<6} {:<24} {:>7}  SESSION\n",
        "PID", "KIND", "STARTED", "VIEWERS"
    );
    for s in sessions {
        out.push_str(&format!(
            "{:<8} {:<6} {:<24} {:>7}  {}\n",
            s.hello.pid,
            s.hello.session.kind,
            s.hello.session.started,
            s.hello.viewers,
            s.label()
        ));
    }
    out
}
