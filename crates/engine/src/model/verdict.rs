//! What became of a call.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::event::{EndHow, Leg, StreamId};

/// How long a resumable call waits for a resumption (beyond the server's `retry:` hint) before it
/// counts as orphaned.
pub const RESUME_GRACE_MS: i64 = 15_000;

/// Why a call can no longer be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrphanCause {
    /// Its owning stream ended before the response, and it cannot be resumed.
    StreamEnded,
    /// The request was answered by something other than JSON or SSE (e.g. `202`).
    NoResponseBody,
    /// The session expired (`404`).
    SessionExpired,
    /// The session was deleted.
    SessionDeleted,
    /// A resumption was refused, ended again without the response, or never came.
    ResumeFailed,
    /// The client closed the stream while the call was pending.
    ClientClosed,
    /// The stdio server process exited with this code while the call was pending.
    ProcessExited {
        /// The exit code.
        code: i32,
    },
    /// The stdio server process was killed by this signal while the call was pending.
    ProcessKilled {
        /// The signal number.
        signal: i32,
    },
    /// The stdio server process closed its stdout while the call was pending.
    StdoutClosed,
    /// Its task's ttl ran out before the result was fetched.
    TaskExpired,
    /// The server does not know its task (any more).
    TaskUnknown,
}

impl OrphanCause {
    /// A short phrase for display.
    pub fn describe(self) -> std::borrow::Cow<'static, str> {
        let text = match self {
            OrphanCause::ProcessExited { code } => {
                return format!("server exited with code {code}").into();
            }
            OrphanCause::ProcessKilled { signal } => {
                return format!(
                    "server process killed by {}",
                    super::process::signal_name(signal)
                )
                .into();
            }
            OrphanCause::StdoutClosed => "server closed stdout",
            OrphanCause::StreamEnded => "stream ended before the response",
            OrphanCause::NoResponseBody => "answered with no JSON or SSE body",
            OrphanCause::SessionExpired => "session expired (404)",
            OrphanCause::SessionDeleted => "session deleted",
            OrphanCause::ResumeFailed => "resumption failed",
            OrphanCause::ClientClosed => "client closed the stream",
            OrphanCause::TaskExpired => "task expired (ttl) before its result was fetched",
            OrphanCause::TaskUnknown => "the server does not know the task",
        };
        text.into()
    }
}

/// The death of a stream, as a call saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Death {
    /// The stream that died.
    pub stream: StreamId,
    /// When.
    pub at: DateTime<Utc>,
    /// How (absent when the call died by session expiry or a non-stream answer).
    pub how: Option<EndHow>,
    /// Which leg ended first.
    pub leg: Option<Leg>,
}

/// The state of a call.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Waiting for its response on a live stream.
    Pending,
    /// A result arrived.
    Answered,
    /// An error arrived (JSON-RPC error, or an HTTP failure the client was told about).
    Error {
        /// What the error said.
        message: String,
    },
    /// Its stream died and the client can no longer receive the response.
    Orphaned {
        /// Why.
        cause: OrphanCause,
        /// The death, when a stream died.
        death: Death,
    },
    /// Its stream died, but it carried event ids and the session lives: a resumption may save it.
    Resumable {
        /// The death.
        death: Death,
        /// The last event id seen on the stream.
        last_event_id: Option<String>,
        /// The server's `retry:` hint in ms (a deliberate close, 2025-11-25).
        retry_ms: Option<u64>,
    },
    /// The client cancelled it.
    Cancelled {
        /// When.
        at: DateTime<Utc>,
    },
}

impl Verdict {
    /// The one-word name (`pending`, `answered`, `error`, `orphaned`, `resumable`, `cancelled`).
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pending => "pending",
            Verdict::Answered => "answered",
            Verdict::Error { .. } => "error",
            Verdict::Orphaned { .. } => "orphaned",
            Verdict::Resumable { .. } => "resumable",
            Verdict::Cancelled { .. } => "cancelled",
        }
    }

    /// Whether the call may still get its response (pending or resumable).
    pub fn is_open(&self) -> bool {
        matches!(self, Verdict::Pending | Verdict::Resumable { .. })
    }

    /// When a resumable call stops waiting for a resumption and counts as orphaned: the
    /// server's `retry:` hint plus [`RESUME_GRACE_MS`] after its stream died. The one definition
    /// of the resumption window; `None` unless resumable.
    pub fn resume_deadline(&self) -> Option<DateTime<Utc>> {
        match self {
            Verdict::Resumable {
                death, retry_ms, ..
            } => {
                let retry = i64::try_from(retry_ms.unwrap_or(0)).unwrap_or(i64::MAX);
                let window = TimeDelta::try_milliseconds(retry.saturating_add(RESUME_GRACE_MS))
                    .unwrap_or(TimeDelta::MAX);
                Some(
                    death
                        .at
                        .checked_add_signed(window)
                        .unwrap_or(DateTime::<Utc>::MAX_UTC),
                )
            }
            _ => None,
        }
    }

    /// The stream death behind this verdict, if any.
    pub fn death(&self) -> Option<&Death> {
        match self {
            Verdict::Orphaned { death, .. } | Verdict::Resumable { death, .. } => Some(death),
            _ => None,
        }
    }
}
