//! The TypeScript SDK server (tests/peers/node/http_server.mjs) as a child process on an ephemeral
//! loopback port, and the Python SDK 1.x client's healthy scenario (tests/peers/py1_client.py).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::peers::{ClientRun, Lines, Proc, ServerMode, root, run_json, wait_ready};

/// A running tests/peers/node/http_server.mjs.
pub struct NodeServer {
    pub proc: Proc,
    pub port: u16,
    pub stdout: Lines,
    pub stderr: Lines,
}

impl NodeServer {
    /// Starts it on an ephemeral port and waits for `READY <port>`.
    pub fn start(mode: ServerMode) -> NodeServer {
        let sdk =
            root().join("tests/peers/node/node_modules/@modelcontextprotocol/sdk/package.json");
        assert!(
            sdk.exists(),
            "{} is missing: run scripts/setup-peers.sh first (npm ci in tests/peers/node)",
            sdk.display()
        );
        let mode = match mode {
            ServerMode::Healthy => "healthy",
            ServerMode::Dies => "dies",
        };
        let child = Command::new("node")
            .arg(root().join("tests/peers/node/http_server.mjs"))
            .arg("0")
            .args(["--mode", mode])
            .current_dir(root().join("tests/peers/node"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node http_server.mjs");
        let (proc, port, stdout, stderr) =
            wait_ready(child, format!("node http_server --mode {mode}"));
        NodeServer {
            proc,
            port,
            stdout,
            stderr,
        }
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// The Python SDK 1.x venv's interpreter, or a failing test that says how to get it.
pub fn venv1_python() -> PathBuf {
    let py = root().join(".venv-mcp1/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/setup-peers.sh first (it installs the Python MCP SDK 1.x)",
        py.display()
    );
    py
}

/// Runs tests/peers/py1_client.py (the healthy scenario with the Python SDK 1.x).
pub fn py1_client(url: &str) -> ClientRun {
    let mut cmd = Command::new(venv1_python());
    cmd.arg(root().join("tests/peers/py1_client.py"))
        .arg(url)
        .args(["--timeout", "30"]);
    run_json(
        cmd,
        &format!("py1_client healthy {url}"),
        Duration::from_secs(60),
    )
}
