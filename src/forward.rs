//! Forward-proxy mode's commands and wiring: `mcpscope ca` (the local CA's path and
//! fingerprint), `mcpscope env` (the environment that sends a shell's programs through
//! `mcpscope --forward`), `mcpscope run -- COMMAND` (both at once), and the proxy's
//! forward-mode configuration from its arguments.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use crate::cli::{CaArgs, EnvArgs, ProxyArgs};
use mcpscope_engine::UsageError;
use mcpscope_proxy::ForwardMode;
use mcpscope_proxy::ca::{self, Ca};

/// The command run by `mcpscope run` ended with a failure status: it becomes ours.
#[derive(Debug)]
pub struct CommandExit(pub u8);

impl std::fmt::Display for CommandExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the command exited with status {}", self.0)
    }
}

impl std::error::Error for CommandExit {}

/// The bundle file (the CA, then the system's roots) that `SSL_CERT_FILE` and
/// `REQUESTS_CA_BUNDLE` name: a tunnel left blind still verifies against the system's roots.
const BUNDLE_FILE: &str = "ca-bundle.pem";

/// Where the system's roots usually are (the first that exists is appended to the bundle).
const SYSTEM_ROOTS: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// The local CA, made on first use.
pub fn load_ca() -> anyhow::Result<Ca> {
    let dir = ca::data_dir();
    Ca::load_or_create(&dir).with_context(|| format!("the local CA in {}", dir.display()))
}

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

/// The environment a program needs to go through the forward proxy at `listen` trusting `ca`.
pub fn env_vars(listen: SocketAddr, ca: &Ca) -> anyhow::Result<Vec<(String, String)>> {
    let mut vars = proxy_vars(listen);
    vars.extend(trust_vars(ca)?);
    Ok(vars)
}

/// The variables that name the forward proxy at `listen` (and exempt nothing from it).
pub fn proxy_vars(listen: SocketAddr) -> Vec<(String, String)> {
    let proxy = format!("http://{listen}");
    let mut vars = Vec::new();
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        vars.push((name.to_string(), proxy.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        vars.push((name.to_string(), String::new()));
    }
    vars
}

/// The variables that make Node, Python and OpenSSL programs trust `ca` (the bundle file they
/// name is written next to the CA's certificate).
pub fn trust_vars(ca: &Ca) -> anyhow::Result<Vec<(String, String)>> {
    let cert = ca.cert_path().display().to_string();
    let bundle = write_bundle(ca)?.display().to_string();
    Ok(vec![
        ("NODE_EXTRA_CA_CERTS".into(), cert),
        ("SSL_CERT_FILE".into(), bundle.clone()),
        ("REQUESTS_CA_BUNDLE".into(), bundle),
        ("NODE_USE_ENV_PROXY".into(), "1".into()),
    ])
}

/// Writes the bundle (the CA's certificate, then the system's roots when found) next to it.
fn write_bundle(ca: &Ca) -> anyhow::Result<PathBuf> {
    let dir = ca.cert_path().parent().unwrap_or(Path::new("."));
    let path = dir.join(BUNDLE_FILE);
    let mut text = std::fs::read_to_string(ca.cert_path())
        .with_context(|| format!("cannot read {}", ca.cert_path().display()))?;
    if let Some(system) = SYSTEM_ROOTS
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
    {
        text.push('\n');
        text.push_str(&system);
    }
    mcpscope_engine::record::write_private(&path, &text)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
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

/// The certificates of the `--ca-file` files.
pub fn ca_roots(files: &[PathBuf]) -> Result<Vec<mcpscope_proxy::ca::Certificate>, UsageError> {
    ca::read_roots(files).map_err(|e| UsageError(format!("--ca-file {e}")))
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
