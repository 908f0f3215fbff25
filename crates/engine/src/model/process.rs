//! A stdio server process (`mcpscope stdio`): the one stream of its session. Its stdin carries
//! the client's messages, its stdout the server's; when it exits or closes stdout, every call
//! still waiting on it is orphaned with that cause.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use super::{Death, End, Model, Notice, OrphanCause, What};
use crate::event::{Direction, EndHow, Leg, StreamId};

/// How many of the newest stderr lines a process keeps.
pub const STDERR_KEPT: usize = 1000;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Exit {
    /// When.
    pub at: DateTime<Utc>,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

impl Exit {
    /// `exited with code 1`, `killed by SIGKILL`.
    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (_, Some(signal)) => format!("killed by {}", signal_name(signal)),
            (Some(code), None) => format!("exited with code {code}"),
            (None, None) => "ended".to_string(),
        }
    }

    fn cause(&self) -> OrphanCause {
        match (self.code, self.signal) {
            (_, Some(signal)) => OrphanCause::ProcessKilled { signal },
            (code, None) => OrphanCause::ProcessExited {
                code: code.unwrap_or(-1),
            },
        }
    }

    fn how(&self) -> EndHow {
        match (self.code, self.signal) {
            (_, Some(_)) => EndHow::Reset,
            (Some(0), None) => EndHow::Eof,
            _ => EndHow::Error,
        }
    }
}

/// What the model knows of a stdio server process.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Process {
    /// Its process id.
    pub pid: u32,
    /// The command line.
    pub command: Vec<String>,
    /// The name given with `--name`, if any.
    pub name: Option<String>,
    /// When the client closed the server's stdin.
    pub stdin_closed: Option<DateTime<Utc>>,
    /// When the server closed its stdout.
    pub stdout_closed: Option<DateTime<Utc>>,
    /// How it ended.
    pub exit: Option<Exit>,
    /// The newest [`STDERR_KEPT`] lines of its stderr, with their times.
    pub stderr: VecDeque<(DateTime<Utc>, String)>,
    /// Older stderr lines no longer kept.
    pub stderr_dropped: u64,
}

/// `SIGKILL` for 9, and so on; `signal N` for one without a usual name.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// The session id of a process: `stdio:NAME:PID`, NAME being `--name` or the program's file
/// name.
pub fn session_id(pid: u32, command: &[String], name: Option<&str>) -> String {
    format!("stdio:{}:{pid}", process_name(command, name))
}

/// The name a process goes by, as a server: `--name`, or the program's file name.
pub fn process_name<'a>(command: &'a [String], name: Option<&'a str>) -> &'a str {
    let program = command
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or("process");
    name.unwrap_or(program)
}

impl Model {
    /// A process started: its session and its stream.
    pub(super) fn process_started(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        process: Process,
        out: &mut Vec<Notice>,
    ) {
        let sid = session_id(process.pid, &process.command, process.name.as_deref());
        // Announced when `initialize` is answered (with its revision), or when the process ends.
        let origin = process_name(&process.command, process.name.as_deref()).to_string();
        let session = self.session_for_id(t, Some(&origin), &sid, None, false, out);
        let path = shell_words(&process.command);
        let si = self.push_stream(t, stream, 0, "STDIO", &path, session, &[]);
        self.streams[si].origin = Some(origin);
        out.push(Notice {
            server: None,
            t,
            what: What::ProcessStarted {
                session: sid,
                stream,
                pid: process.pid,
                command: path,
            },
        });
        self.streams[si].process = Some(Box::new(process));
    }

    /// One stderr line, kept with the process (the newest [`STDERR_KEPT`]).
    pub(super) fn stderr_line(&mut self, t: DateTime<Utc>, stream: StreamId, line: &str) {
        let Some(process) = self.process_mut(stream) else {
            return;
        };
        process.stderr.push_back((t, line.to_string()));
        if process.stderr.len() > STDERR_KEPT {
            process.stderr.pop_front();
            process.stderr_dropped += 1;
        }
    }

    /// The process ended: its stream ends with it, and every call waiting on it is orphaned.
    pub(super) fn process_exited(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        code: Option<i32>,
        signal: Option<i32>,
        out: &mut Vec<Notice>,
    ) {
        let Some(si) = self.stream_index.get(&stream).copied() else {
            return;
        };
        let exit = Exit {
            at: t,
            code,
            signal,
        };
        if let Some(process) = self.streams[si].process.as_mut() {
            process.exit = Some(exit);
        }
        let at = out.len();
        let pending =
            self.end_process_stream(si, exit.how(), exit.describe(), exit.cause(), t, out);
        out.insert(
            at,
            Notice {
                server: None,
                t,
                what: What::ProcessExited {
                    stream,
                    code,
                    signal,
                    pending,
                },
            },
        );
    }

    /// A `stream_ended` on a process's stream: stdin closed by the client, or stdout by the
    /// server.
    pub(super) fn process_stream_ended(
        &mut self,
        si: usize,
        dir: Direction,
        end: End,
        out: &mut Vec<Notice>,
    ) {
        let t = end.at;
        let stream = self.streams[si].id;
        if dir == Direction::ClientToServer {
            if let Some(process) = self.streams[si].process.as_mut() {
                process.stdin_closed = Some(t);
            }
            if end.how != EndHow::Eof {
                self.streams[si].request_aborted = Some(end);
            }
            out.push(Notice {
                server: None,
                t,
                what: What::StdinClosed { stream },
            });
            return;
        }
        if let Some(process) = self.streams[si].process.as_mut() {
            process.stdout_closed = Some(t);
        }
        if let Some(ended) = self.streams[si].ended.as_mut() {
            // The process ended first: its stream's end now counts the bytes that passed.
            ended.bytes = end.bytes;
            return;
        }
        let detail = end.detail.clone().unwrap_or_else(|| "stdout closed".into());
        let at = out.len();
        let pending =
            self.end_process_stream(si, end.how, detail, OrphanCause::StdoutClosed, t, out);
        if let Some(ended) = self.streams[si].ended.as_mut() {
            ended.bytes = end.bytes;
        }
        out.insert(
            at,
            Notice {
                server: None,
                t,
                what: What::StreamEnded {
                    stream,
                    label: self.streams[si].label(),
                    how: end.how,
                    leg: end.leg,
                    pending,
                },
            },
        );
    }

    /// Ends a process's stream once (later ends change nothing) and orphans the calls waiting
    /// on it; returns how many there were.
    fn end_process_stream(
        &mut self,
        si: usize,
        how: EndHow,
        detail: String,
        cause: OrphanCause,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) -> usize {
        if self.streams[si].ended.is_some() {
            return 0;
        }
        if self.streams[si].unreachable.is_none() {
            self.counts.open_streams -= 1;
        }
        self.streams[si].ended = Some(End {
            at: t,
            how,
            leg: Leg::Upstream,
            bytes: 0,
            detail: Some(detail),
        });
        self.announce_session(t, self.streams[si].session, out);
        let stream = self.streams[si].id;
        let open = self.open_calls_owned_by(si);
        let death = Death {
            stream,
            at: t,
            how: Some(how),
            leg: Some(Leg::Upstream),
        };
        for &index in &open {
            self.orphan(index, cause, death, t, out);
        }
        open.len()
    }

    fn process_mut(&mut self, stream: StreamId) -> Option<&mut Process> {
        let si = self.stream_index.get(&stream).copied()?;
        self.streams[si].process.as_deref_mut()
    }
}

/// A command line as one string, each word quoted when it needs to be.
pub fn shell_words(command: &[String]) -> String {
    command
        .iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
