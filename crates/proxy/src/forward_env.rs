//! What a program needs to go through the forward proxy and trust its local CA: the proxy
//! variables, the trust variables (with the CA bundle they name), and the local CA itself.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use mcpscope_engine::UsageError;

use crate::ca::{self, Ca};

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

/// The certificates of the `--ca-file` files.
pub fn ca_roots(files: &[PathBuf]) -> Result<Vec<ca::Certificate>, UsageError> {
    ca::read_roots(files).map_err(|e| UsageError(format!("--ca-file {e}")))
}
