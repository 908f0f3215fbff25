//! The user's own MCP server, started for each cell (`--server-command`): inside the cell's
//! network namespace when the matrix runs an agent host, on a port of its own, and stopped with
//! the cell.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::client::{self, ClientRun};

/// How the user's server is started and reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    /// Its command line; `{port}` is replaced by the cell's port.
    pub argv: Vec<String>,
    /// The MCP endpoint's path (`/mcp`).
    pub path: String,
}

impl ServerCommand {
    /// Parses `--server-command` (words as a POSIX shell splits them, without running one) and
    /// `--server-path`.
    pub fn parse(command: &str, path: &str) -> Result<Self, String> {
        let argv = shlex::split(command)
            .filter(|argv| !argv.is_empty())
            .ok_or_else(|| format!("--server-command: cannot split {command:?} into words"))?;
        if !argv.iter().any(|a| a.contains("{port}")) {
            return Err(
                "--server-command must name {port}: the port each cell's server listens on".into(),
            );
        }
        if !client::can_run(&argv[0]) {
            return Err(format!(
                "--server-command: cannot run {:?}: not found, or not executable",
                argv[0]
            ));
        }
        if !path.starts_with('/') {
            return Err(format!("--server-path must start with /: {path:?}"));
        }
        Ok(ServerCommand {
            argv,
            path: path.to_string(),
        })
    }
}

/// A running user server.
pub struct UserServer {
    /// Its MCP endpoint.
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<ClientRun>,
}

/// How often the port is tried while the server starts.
const POLL: Duration = Duration::from_millis(50);

impl UserServer {
    /// Starts it on a free loopback port and waits, at most `bound`, for the port to accept;
    /// `Err` says why it is not serving (it exited, or did not listen in time), with its last
    /// output lines.
    pub async fn start(command: &ServerCommand, bound: Duration) -> Result<UserServer, String> {
        let port = free_port().map_err(|e| format!("no free port for the server: {e}"))?;
        let argv: Vec<String> = command
            .argv
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            client::run(&argv, async {
                let _ = stopped.await;
            })
            .await
        });
        let mut server = UserServer {
            url: format!("http://127.0.0.1:{port}{}", command.path),
            stop: Some(stop),
            task,
        };
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Ok(server);
            }
            if server.task.is_finished() || tokio::time::Instant::now() >= deadline {
                let exited = server.task.is_finished();
                let run = server.stop().await;
                let why = match (exited, run.spawn_error.clone()) {
                    (_, Some(e)) => e,
                    (true, None) => format!(
                        "the server command exited ({}) before listening on port {port}",
                        run.code.map_or_else(|| "killed".into(), |c| c.to_string())
                    ),
                    (false, None) => {
                        format!("the server command did not listen on port {port} within {bound:?}")
                    }
                };
                let lines = run.last_lines(3);
                return Err(match lines.is_empty() {
                    true => why,
                    false => format!("{why}; it said: {}", lines.join(" / ")),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops it (its whole process group) and returns how it ran.
    pub async fn stop(&mut self) -> ClientRun {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap_or_default()
    }
}

/// A port free on 127.0.0.1 now (the server binds it a moment later).
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_must_name_its_port_and_run() {
        assert!(
            ServerCommand::parse("python3 -m http.server", "/mcp")
                .is_err_and(|e| e.contains("{port}"))
        );
        assert!(
            ServerCommand::parse("no-such-server-program {port}", "/mcp")
                .is_err_and(|e| e.contains("cannot run"))
        );
        assert!(ServerCommand::parse("sh -c 'echo \"unclosed", "/mcp").is_err());
        let ok = ServerCommand::parse("sh -c 'exec server --port {port}'", "/mcp").expect("parses");
        assert_eq!(ok.argv, ["sh", "-c", "exec server --port {port}"]);
        assert!(
            ServerCommand::parse("sh {port}", "mcp").is_err_and(|e| e.contains("--server-path"))
        );
    }

    #[tokio::test]
    async fn a_server_that_exits_or_never_listens_says_so_with_its_output() {
        let exits = ServerCommand::parse("sh -c 'echo bad flag {port} >&2; exit 2'", "/mcp")
            .expect("parses");
        let err = UserServer::start(&exits, Duration::from_secs(5))
            .await
            .err()
            .expect("fails");
        assert!(
            err.contains("exited (2)") && err.contains("bad flag"),
            "{err}"
        );
        let silent = ServerCommand::parse("sleep 30 {port}", "/mcp").expect("parses");
        let err = UserServer::start(&silent, Duration::from_millis(300))
            .await
            .err()
            .expect("fails");
        assert!(err.contains("did not listen"), "{err}");
    }
}
