//! The forward proxy's test setting: an HTTPS MCP server (the built-in test server behind a TLS
//! front on 127.0.0.2, its certificate from a test CA with IP SAN 127.0.0.2) and a running
//! `mcpscope --forward --json` with its own data directory (its CA made there).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types::PrivatePkcs8KeyDer};

use super::peers::{Lines, Proc, root, wait_line};

/// The test CA (PEM file in `dir`) and a TLS front on 127.0.0.2 relaying every connection's
/// decrypted bytes to `backend`; returns the front's address and the leaf's DER.
pub async fn tls_front(dir: &Path, backend: SocketAddr) -> (SocketAddr, PathBuf, Vec<u8>) {
    let ca_key = rcgen::KeyPair::generate().expect("ca key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "forward-proxy test CA");
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let leaf_params = rcgen::CertificateParams::new(vec!["127.0.0.2".to_string()]).expect("leaf");
    let leaf = leaf_params
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("signed");
    let ca_path = dir.join("test-ca.pem");
    std::fs::write(&ca_path, ca.pem()).expect("write ca");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
        )
        .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind 127.0.0.2");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (addr, ca_path, leaf.der().to_vec())
}

/// A running `mcpscope --forward --json` (or `--headless`), its data directory a temporary one.
pub struct Forward {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub stdout: Lines,
    pub stderr: Lines,
    pub data: PathBuf,
}

impl Forward {
    /// `mcpscope --forward --json` with `extra` arguments.
    pub fn start(data: &Path, extra: &[&str]) -> Forward {
        Self::spawn(data, &["--json", "--no-publish"], extra, None)
    }

    /// `mcpscope --forward --headless` (readable lines) with `extra` arguments.
    pub fn start_readable(data: &Path, extra: &[&str]) -> Forward {
        Self::spawn(data, &["--headless", "--no-publish"], extra, None)
    }

    /// `mcpscope --forward --json` publishing its session for `mcpscope attach` in `runtime`
    /// (its `XDG_RUNTIME_DIR`, private to the user).
    pub fn start_published(data: &Path, runtime: &Path, extra: &[&str]) -> Forward {
        Self::spawn(data, &["--json"], extra, Some(runtime))
    }

    fn spawn(data: &Path, view: &[&str], extra: &[&str], runtime: Option<&Path>) -> Forward {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpscope"));
        if let Some(runtime) = runtime {
            command.env("XDG_RUNTIME_DIR", runtime);
        }
        let mut child = command
            .args(["--forward", "--listen", "127.0.0.1:0"])
            .args(view)
            .args(extra)
            .env("XDG_DATA_HOME", data)
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcpscope --forward");
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let proc = Proc {
            child,
            name: "mcpscope --forward".into(),
        };
        let (stdout, _rx) = Lines::spawn(out);
        let (stderr, erx) = Lines::spawn(err);
        const PREFIX: &str = "listening on http://";
        let line = wait_line(&erx, Duration::from_secs(20), |l| l.contains(PREFIX))
            .unwrap_or_else(|| panic!("no listening line\n{}", stderr.text()));
        let rest = &line[line.find(PREFIX).map_or(0, |i| i + PREFIX.len())..];
        let addr = rest
            .split_whitespace()
            .next()
            .unwrap_or("")
            .parse()
            .unwrap_or_else(|e| panic!("bad address in {line:?}: {e}"));
        Forward {
            proc,
            addr,
            stdout,
            stderr,
            data: data.join("mcpscope"),
        }
    }

    pub fn ca_pem(&self) -> PathBuf {
        self.data.join("ca.pem")
    }

    pub fn notices(&self) -> Vec<Value> {
        self.stdout
            .snapshot()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits (generously) until `done` holds for the notices so far; returns them.
    pub fn wait(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let notices = self.notices();
            if done(&notices) || std::time::Instant::now() > deadline {
                return notices;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn dump(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.stdout.text(),
            self.stderr.text()
        )
    }
}

/// One absolute-form POST through the proxy at `proxy` to `server` (`host:port`, plain HTTP),
/// as a client that has the proxy set sends it; returns the response head and body as text
/// (what arrived, when the connection was cut).
pub fn post(
    proxy: SocketAddr,
    server: &str,
    session: Option<&str>,
    body: &Value,
) -> (String, String) {
    let body = body.to_string();
    let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    let request = format!(
        "POST http://{server}/mcp HTTP/1.1\r\nHost: {server}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-06-18\r\n\
         {session}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = std::net::TcpStream::connect(proxy).expect("connect to the proxy");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    tcp.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = tcp.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) => (head.to_string(), body.to_string()),
        None => (text, String::new()),
    }
}

/// `initialize` and `notifications/initialized` with one server through the proxy; returns
/// its session id.
pub fn initialize(proxy: SocketAddr, server: &str) -> String {
    let (head, body) = post(
        proxy,
        server,
        None,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"through-forward","version":"1"}}}),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    let session = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id from {server}: {head}"));
    post(
        proxy,
        server,
        Some(&session),
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    session
}

/// One `curl --http2` POST of `body` to `url` (through `proxy` when given, trusting `cacert`),
/// with the session id when given; returns the HTTP version curl spoke, the response headers
/// and the body.
pub fn curl_post(
    proxy: Option<SocketAddr>,
    cacert: &Path,
    url: &str,
    session: Option<&str>,
    body: &str,
    dir: &Path,
) -> (String, String, Vec<u8>) {
    let (head_file, body_file) = (dir.join("curl-head"), dir.join("curl-body"));
    let mut cmd = Command::new("curl");
    cmd.args(["--http2", "-sS", "--max-time", "20", "--cacert"])
        .arg(cacert)
        .args(["-D"])
        .arg(&head_file)
        .args(["-o"])
        .arg(&body_file)
        .args(["-w", "%{http_version}", "-X", "POST"])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-H", "mcp-protocol-version: 2025-06-18"])
        .args(["--data-binary", body])
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    if let Some(session) = session {
        cmd.args(["-H", &format!("mcp-session-id: {session}")]);
    }
    match proxy {
        Some(proxy) => cmd.args(["--proxy", &format!("http://{proxy}")]),
        None => cmd.args(["--noproxy", "*"]),
    };
    let out = cmd.arg(url).output().expect("run curl");
    assert!(out.status.success(), "curl {url}: {out:?}");
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let head = std::fs::read_to_string(&head_file).expect("curl's headers");
    let body = std::fs::read(&body_file).expect("curl's body");
    (version, head, body)
}

/// The session id in a response head, any case.
pub fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

/// The recording at `record` once it holds an `unobserved` line (within `within`): its whole
/// text; the test fails with the proxy's output otherwise.
pub async fn recorded_unobserved(record: &Path, within: Duration, forward: &Forward) -> String {
    tokio::time::timeout(within, async {
        loop {
            let text = std::fs::read_to_string(record).unwrap_or_default();
            if text.contains(r#""kind":"unobserved""#) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no unobserved line\n{}", forward.dump()))
}
