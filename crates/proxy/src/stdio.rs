//! The stdio transport (`mcpscope stdio`): runs a server process and stands in its place.
//! The client's stdin goes to the child's stdin and the child's stdout to our stdout, byte for
//! byte, each chunk written on as soon as it is read (the server's output observed after it is
//! written, the client's before: its answer is never observed first); the child's stderr goes
//! to our stderr. Every line is observed ([`LineObserver`]) and reported to the
//! [`EventSink`] like the HTTP taps report bodies: the process is one stream (`process_started`),
//! stdin its request direction, stdout its response direction, and its end a `process_exited`.
//! Signals sent to us are passed to the child's process group, the child dies with us (even when
//! we are SIGKILLed, on Linux), and the caller exits with the child's status.

use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::wire::lines::{LineObserver, LineSplitter};

use mcpscope_session::sink::EventSink;

/// How long the end of a run waits for the client's stdin to be seen closed.
const STDIN_GRACE: Duration = Duration::from_millis(200);
/// The stream id of the process (one per run).
pub const STREAM: StreamId = 1;

/// The longest JSON-RPC line observed whole (longer ones pass, reported invalid).
pub const LINE_CAP: usize = 16 * 1024 * 1024;

/// The longest stderr line kept in an event (longer ones are cut, ending with `…`).
pub const STDERR_LINE_CAP: usize = 8 * 1024;

/// How long after the child closes its stdout its exit is awaited before the closing alone is
/// reported (so that a process that dies reports its death as the cause, not the closing).
const EXIT_AFTER_STDOUT: Duration = Duration::from_millis(500);

/// How long after the child exits what it wrote is still passed on (a process it started may
/// hold its stdout open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Program and arguments.
    pub command: Vec<String>,
    /// A name for the session (`--name`).
    pub name: Option<String>,
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

impl Outcome {
    fn of(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self {
            code: status.code(),
            signal: status.signal(),
        }
    }

    /// The exit code a shell would give: the child's code, or 128 + the signal that killed it.
    pub fn exit_code(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 1,
        }
    }
}

/// A child that could not be started, with the exit code a shell gives for it (127: not
/// found, 126: not executable).
#[derive(Debug)]
pub struct SpawnError {
    /// The error.
    pub error: std::io::Error,
    /// 127 or 126.
    pub exit_code: i32,
}

/// The signals passed on to the child.
#[cfg(unix)]
fn forwarded_signals() -> std::io::Result<Vec<(i32, tokio::signal::unix::Signal)>> {
    use tokio::signal::unix::{SignalKind, signal};
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT]
        .into_iter()
        .map(|n| Ok((n, signal(SignalKind::from_raw(n))?)))
        .collect()
}

/// Waits for any of the signals; returns its number.
async fn next_signal(signals: &mut [(i32, tokio::signal::unix::Signal)]) -> i32 {
    let waits = signals.iter_mut().map(|(n, s)| {
        let n = *n;
        Box::pin(async move {
            s.recv().await;
            n
        })
    });
    futures_select_all(waits).await
}

/// The first of several futures to finish.
async fn futures_select_all<F: std::future::Future<Output = i32> + Unpin>(
    futures: impl Iterator<Item = F>,
) -> i32 {
    let mut futures: Vec<F> = futures.collect();
    std::future::poll_fn(move |cx| {
        for f in futures.iter_mut() {
            if let std::task::Poll::Ready(n) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(n);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Starts the child (in its own process group, so that a terminal's signals reach it once,
/// through us).
fn spawn(options: &Options) -> Result<Child, SpawnError> {
    let Some((program, args)) = options.command.split_first() else {
        return Err(SpawnError {
            error: std::io::Error::other("no command given"),
            exit_code: 127,
        });
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: runs in the forked child before exec; prctl(2) and getppid(2) are
        // async-signal-safe and touch no memory of the parent.
        unsafe {
            command.pre_exec(move || {
                // The server dies with the shim, even when the shim is SIGKILLed (the signal
                // follows the death of the thread that spawned it: the runtime's main thread,
                // which lives as long as the shim).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() as u32 != parent {
                    // The shim died before the signal was armed.
                    return Err(std::io::Error::other("the shim has exited"));
                }
                Ok(())
            });
        }
    }
    command.spawn().map_err(|error| {
        let exit_code = if error.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        SpawnError { error, exit_code }
    })
}

/// Runs the child until it ends, passing its standard streams and the signals we get; returns
/// how it ended.
pub async fn run(options: Options, sink: EventSink) -> Result<Outcome, SpawnError> {
    let mut signals = forwarded_signals().map_err(|error| SpawnError {
        error,
        exit_code: 126,
    })?;
    let mut child = spawn(&options)?;
    let pid = child.id().unwrap_or(0);
    sink.emit(EventKind::ProcessStarted {
        stream: STREAM,
        pid,
        command: options.command.clone(),
        name: options.name.clone(),
    });
    let (child_in, child_out, child_err) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let stdin_task =
        child_in.map(|w| tokio::spawn(pump_stdin(tokio::io::stdin(), w, sink.clone())));
    let stdout_bytes = Arc::new(AtomicU64::new(0));
    let client_gone = Arc::new(AtomicBool::new(false));
    let mut stdout_task = child_out.map(|r| {
        tokio::spawn(pump_stdout(
            r,
            tokio::io::stdout(),
            sink.clone(),
            stdout_bytes.clone(),
            client_gone.clone(),
        ))
    });
    let stderr_task = child_err.map(|r| tokio::spawn(pump_stderr(r, sink.clone())));

    let mut exit: Option<Outcome> = None;
    let mut stdout_closed = stdout_task.is_none();
    let mut stdout_reported = stdout_closed;
    let mut deadline: Option<Instant> = None;
    while exit.is_none() || !stdout_closed {
        tokio::select! {
            status = child.wait(), if exit.is_none() => {
                let outcome = match status {
                    Ok(status) => Outcome::of(status),
                    Err(e) => {
                        tracing::error!("waiting for the server process failed: {e}");
                        Outcome { code: None, signal: None }
                    }
                };
                // Reported once what it wrote before it ended has been read.
                exit = Some(outcome);
                if !stdout_closed {
                    deadline = Some(Instant::now() + DRAIN_AFTER_EXIT);
                }
            }
            _ = wait_task(&mut stdout_task), if !stdout_closed => {
                stdout_closed = true;
                if exit.is_none() {
                    deadline = Some(Instant::now() + EXIT_AFTER_STDOUT);
                }
            }
            signal = next_signal(&mut signals) => {
                if exit.is_none() && pid != 0 {
                    tracing::info!("passing signal {signal} to the server's process group {pid}");
                    // SAFETY: kill(2) of the process group of a child we spawned as its leader
                    // and have not reaped (every process a wrapper started gets it, as from a
                    // terminal); no memory is touched.
                    unsafe { libc::kill(-(pid as libc::pid_t), signal) };
                }
            }
            _ = sleep_until(deadline) => {
                deadline = None;
                if exit.is_none() {
                    // Stdout closed and the process lives on: the closing is what the calls saw.
                    report_stdout_end(&sink, &stdout_bytes, &client_gone);
                    stdout_reported = true;
                } else {
                    // The process is gone; whatever still holds its stdout is not waited for.
                    if let Some(task) = stdout_task.take() {
                        task.abort();
                    }
                    stdout_closed = true;
                }
            }
        }
    }
    if let Some(task) = stderr_task {
        let _ = tokio::time::timeout(EXIT_AFTER_STDOUT, task).await;
    }
    let outcome = exit.unwrap_or(Outcome {
        code: None,
        signal: None,
    });
    sink.emit(EventKind::ProcessExited {
        stream: STREAM,
        code: outcome.code,
        signal: outcome.signal,
    });
    if !stdout_reported {
        report_stdout_end(&sink, &stdout_bytes, &client_gone);
    }
    if let Some(mut task) = stdin_task {
        // A client that closed stdin as the server ended: its closing is still recorded. A
        // client that keeps stdin open is not waited for.
        if tokio::time::timeout(STDIN_GRACE, &mut task).await.is_err() {
            task.abort();
        }
    }
    Ok(outcome)
}

async fn wait_task(task: &mut Option<JoinHandle<()>>) {
    match task.as_mut() {
        Some(task) => {
            let _ = task.await;
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn report_stdout_end(sink: &EventSink, bytes: &AtomicU64, client_gone: &AtomicBool) {
    let (how, leg, detail) = if client_gone.load(Ordering::Relaxed) {
        (
            EndHow::Cancelled,
            Leg::Client,
            "the client closed its end of stdout",
        )
    } else {
        (EndHow::Eof, Leg::Upstream, "server closed stdout")
    };
    sink.emit(EventKind::StreamEnded {
        stream: STREAM,
        dir: Direction::ServerToClient,
        how,
        leg,
        bytes: bytes.load(Ordering::Relaxed),
        detail: Some(detail.into()),
    });
}

/// Waits while the hub is far behind (nothing observed is dropped; memory stays bounded).
async fn wait_for_hub(sink: &EventSink) {
    while sink.backlogged() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Client → server: our stdin observed, then written to the child's stdin. Its end (the client
/// closed it, or the child stopped reading) is reported and passed on by closing the child's
/// stdin.
async fn pump_stdin(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    sink: EventSink,
) {
    let mut observer = LineObserver::new(STREAM, Direction::ClientToServer, LINE_CAP);
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    let (how, leg, detail) = loop {
        wait_for_hub(&sink).await;
        let n = match from.read(&mut buf).await {
            Ok(0) => break (EndHow::Eof, Leg::Client, None),
            Ok(n) => n,
            Err(e) => break (EndHow::Error, Leg::Client, Some(e.to_string())),
        };
        let chunk = &buf[..n];
        // Observed before it is passed on: the server cannot answer a request (and its answer
        // be observed) before the request is.
        for event in observer.feed(chunk) {
            sink.emit(event);
        }
        let written = match to.write_all(chunk).await {
            Ok(()) => to.flush().await,
            Err(e) => Err(e),
        };
        bytes += n as u64;
        if let Err(e) = written {
            break (
                EndHow::Error,
                Leg::Upstream,
                Some(format!("the server stopped reading its stdin: {e}")),
            );
        }
    };
    for event in observer.finish() {
        sink.emit(event);
    }
    drop(to);
    sink.emit(EventKind::StreamEnded {
        stream: STREAM,
        dir: Direction::ClientToServer,
        how,
        leg,
        bytes,
        detail,
    });
}

/// Server → client: the child's stdout to our stdout, then observed, until the child closes it.
/// When our stdout fails (the client closed its end) the child's stdout is closed too, as it
/// would be without the shim: its next write fails (SIGPIPE, by default) instead of being read
/// on by nobody.
async fn pump_stdout(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    sink: EventSink,
    bytes: Arc<AtomicU64>,
    client_gone: Arc<AtomicBool>,
) {
    let mut observer = LineObserver::new(STREAM, Direction::ServerToClient, LINE_CAP);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        wait_for_hub(&sink).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let written = match to.write_all(chunk).await {
            Ok(()) => to.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            client_gone.store(true, Ordering::Relaxed);
            sink.emit(EventKind::Note {
                stream: Some(STREAM),
                text: format!(
                    "the client's end of stdout failed: {e}; the server's stdout is closed"
                ),
            });
            break;
        }
        bytes.fetch_add(n as u64, Ordering::Relaxed);
        for event in observer.feed(chunk) {
            sink.emit(event);
        }
    }
    for event in observer.finish() {
        sink.emit(event);
    }
}

/// The child's stderr to ours, and each line of it as an event.
async fn pump_stderr(mut from: impl AsyncRead + Unpin, sink: EventSink) {
    let mut to = tokio::io::stderr();
    let mut lines = LineSplitter::new(STDERR_LINE_CAP);
    let mut buf = vec![0u8; 16 * 1024];
    let emit = |line: &[u8], cut: bool| {
        let mut text = String::from_utf8_lossy(line).into_owned();
        if cut {
            text.push('…');
        }
        sink.emit(EventKind::StderrLine {
            stream: STREAM,
            line: text,
        });
    };
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let _ = to.write_all(&buf[..n]).await;
        let _ = to.flush().await;
        lines.feed(&buf[..n], emit);
    }
    lines.finish(emit);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll};

    use mcpscope_engine::event::Event;
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

    /// The child's stdin, standing in for it: at each write it notes which requests the sink
    /// has been given so far (what a server answering at once could be answering).
    struct Child {
        observed: Arc<Mutex<UnboundedReceiver<Event>>>,
        seen_at_write: Vec<usize>,
    }

    impl AsyncWrite for Child {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let mut messages = 0;
            if let Ok(mut rx) = self.observed.lock() {
                while let Ok(event) = rx.try_recv() {
                    messages += usize::from(matches!(event.kind, EventKind::Message { .. }));
                }
            }
            self.seen_at_write.push(messages);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_request_is_observed_before_the_server_is_given_it() {
        let (tx, rx) = unbounded_channel();
        let observed = Arc::new(Mutex::new(rx));
        let sink = EventSink::new(tx);
        let mut child = Child {
            observed: observed.clone(),
            seen_at_write: Vec::new(),
        };
        let request = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{}}\n";
        pump_stdin(&request[..], &mut child, sink).await;
        // One chunk, one write: the request was already with the sink.
        assert_eq!(child.seen_at_write, vec![1]);
    }
}
