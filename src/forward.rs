//! Forward-proxy mode's commands and wiring: `mcpscope ca` (the local CA's path and
//! fingerprint), `mcpscope env` (the environment that sends a shell's programs through
//! `mcpscope --forward`), `mcpscope run -- COMMAND` (both at once), and the proxy's
//! forward-mode configuration from its arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::{CaArgs, EnvArgs, ProxyArgs};
use mcpscope_engine::UsageError;
use mcpscope_proxy::ForwardMode;
use mcpscope_proxy::ca::{self, Ca};
pub use mcpscope_proxy::forward_env::{ca_roots, env_vars, load_ca, proxy_vars, trust_vars};

/// The command run by `mcpscope run` ended with a failure status: it becomes ours.
#[derive(Debug)]
pub struct CommandExit(pub u8);

impl std::fmt::Display for CommandExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the command exited with status {}", self.0)
    }
}

impl std::error::Error for CommandExit {}

/// The local CA's certificate when one was made (for a view of a recorded or published forward
/// session); nothing is created.
pub fn known_ca_cert() -> Option<PathBuf> {
    let path = ca::data_dir().join(ca::CERT_FILE);
    path.is_file().then_some(path)
}

/// `mcpscope ca`: prints the certificate's path and its SHA-256 fingerprint.
pub fn ca(args: &CaArgs) -> anyhow::Result<()> {
    let ca = if args.regenerate {
        let dir = ca::data_dir();
        Ca::create(&dir).with_context(|| format!("the local CA in {}", dir.display()))?
    } else {
        load_ca()?
    };
    println!("{}", ca.cert_path().display());
    println!("SHA-256 {}", ca.fingerprint());
    Ok(())
}

/// `mcpscope env`: `export NAME=VALUE` lines for a POSIX shell.
pub fn env(args: &EnvArgs) -> anyhow::Result<()> {
    let ca = load_ca()?;
    for (name, value) in env_vars(args.listen.0, &ca)? {
        println!("export {name}={}", shell_quote(&value));
    }
    Ok(())
}

/// `value` quoted for a POSIX shell (as is when it needs no quoting).
fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=@+,%".contains(c));
    if plain {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// Forward-proxy mode as the arguments ask for it (none without `--forward`).
pub fn mode(args: &ProxyArgs) -> anyhow::Result<Option<Arc<ForwardMode>>> {
    if !args.forward {
        return Ok(None);
    }
    let ca = Arc::new(load_ca()?);
    let mode = ForwardMode::new(ca, args.intercept.clone())
        .remote_may_reach_loopback(args.allow_remote_loopback);
    Ok(Some(Arc::new(mode)))
}

/// Says where the forward proxy listens and how to use it.
pub fn say_listening(addr: SocketAddr, mode: &ForwardMode) {
    crate::say!(
        "mcpscope: listening on http://{addr} (forward proxy: set HTTPS_PROXY and HTTP_PROXY to it and trust the CA {}, SHA-256 {}; `mcpscope env --listen {addr}` prints the lines)",
        mode.ca.cert_path().display(),
        mode.ca.fingerprint()
    );
    if !mode.intercept.is_empty() {
        crate::say!(
            "mcpscope: intercepting TLS to {} only; other CONNECTs are tunnelled blind",
            mode.intercept.join(", ")
        );
    }
}

/// Starts `command` with the forward proxy's environment, the terminal its own.
pub fn spawn(
    command: &[String],
    addr: SocketAddr,
    mode: Option<&ForwardMode>,
) -> anyhow::Result<tokio::process::Child> {
    let mode = mode.context("mcpscope run needs the forward proxy")?;
    let (program, rest) = command
        .split_first()
        .ok_or_else(|| UsageError("mcpscope run needs a command after --".into()))?;
    let mut child = tokio::process::Command::new(program);
    child.args(rest).kill_on_drop(true);
    for (name, value) in env_vars(addr, &mode.ca)? {
        child.env(name, value);
    }
    child.spawn().map_err(|e| {
        // As a shell says it: 127 for a command not found, 126 for one that cannot be run.
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        crate::say!("mcpscope: cannot run {program:?}: {e}");
        CommandExit(code).into()
    })
}

/// Takes the view feed without showing it (the terminal is the command's).
pub async fn drain(mut feed: tokio::sync::mpsc::UnboundedReceiver<mcpscope_engine::event::Event>) {
    while feed.recv().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(
            shell_quote("http://127.0.0.1:9000"),
            "http://127.0.0.1:9000"
        );
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
