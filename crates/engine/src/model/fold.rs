//! `Model::apply`: how each fact changes the state. The event's dispatch is here; what it does
//! to sessions, streams and calls is in `sessions`, `streams` and `calls`; what the proxy
//! reports besides the traffic (faults, rescues, rewrites, an unreachable upstream) in
//! `reports`.

mod calls;
mod reports;
mod sessions;
mod streams;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::Value;

use super::call::{KnownKey, is_tool_error, retry_key};
use super::{
    Body, Call, Death, End, FailedProbe, Mark, MessageRec, Model, Notice, OrphanCause, Progress,
    ProxyInfo, Reaction, Session, SessionEnd, Stream, ToolInfo, Verdict, What,
};
use crate::event::{Direction, EndHow, Event, EventKind, Header, Leg, StreamId, header};
use crate::wire::ContentKind;
use crate::wire::jsonrpc::{Kind, classify, id_text, messages};

/// How many earlier identical calls a new call is compared with when looking for the one it
/// retries.
const RETRY_LOOKBACK: usize = 64;

/// How long after a failed `server/discover` an `initialize` may follow and make it a probe the
/// client fell back from (`call_superseded`) rather than a failure (`call_failed`).
const PROBE_GRACE_MS: i64 = 5_000;

/// Methods whose repetition is not a retry.
const NOT_RETRIES: &[&str] = &["initialize", "ping", "server/discover"];

fn is_stateless(revision: Option<&str>) -> bool {
    revision.is_some_and(crate::revision::is_sessionless)
}

/// `name version` from an `initialize` request's `clientInfo`.
fn client_name(params: &Value) -> Option<String> {
    let info = params.get("clientInfo")?;
    let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
    let version = info.get("version").and_then(Value::as_str).unwrap_or("");
    Some(format!("{name} {version}").trim().to_string())
}

/// When the client saw a call fail, if it did: its error or cancellation, or its stream's death.
fn failure_seen(verdict: &Verdict, ended_at: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match verdict {
        Verdict::Pending | Verdict::Answered => None,
        // Sent again after the OAuth flow: not a failure the client saw.
        v if super::challenge::is_challenged(v) => None,
        Verdict::Cancelled { at } => Some(*at),
        Verdict::Orphaned { death, .. } | Verdict::Resumable { death, .. } => Some(death.at),
        Verdict::Error { .. } => ended_at,
    }
}

/// Whether a result is a 2026-07-28 `InputRequiredResult` (the client must retry with input).
fn is_input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
        || result.get("inputRequests").is_some()
}

/// A `stream_opened` as the fold reads it, its server resolved.
struct Opened<'a> {
    id: StreamId,
    conn: u64,
    method: &'a str,
    path: &'a str,
    headers: &'a [Header],
    origin: Option<String>,
}

/// A request as the fold reads it: its parts, and the message it came in (shared with the call).
struct Request<'a> {
    id: &'a Value,
    method: &'a str,
    params: &'a Value,
    message: Body,
}

impl Model {
    /// Folds one event into the state; returns the notable changes it caused.
    pub fn apply(&mut self, event: &Event) -> Vec<Notice> {
        let out = self.fold_event(event);
        self.enforce_retention();
        out
    }

    /// [`Model::apply`], letting `inspect` read the model and the notices before the retention
    /// policy compacts what the event finished (a headless view that holds no history still
    /// sees the detail of the call just answered); what `inspect` returns is added to the
    /// notices.
    pub fn apply_inspected(
        &mut self,
        event: &Event,
        inspect: &mut dyn FnMut(&Model, &[Notice]) -> Vec<Notice>,
    ) -> Vec<Notice> {
        let mut out = self.fold_event(event);
        let more = inspect(self, &out);
        out.extend(more);
        self.enforce_retention();
        out
    }

    /// Folds one event: the clock moved to it, its kind folded by the group it belongs to, and
    /// the servers of the notices it caused named.
    fn fold_event(&mut self, event: &Event) -> Vec<Notice> {
        let mut out = self.advance(event.t);
        if self.sessions.is_empty() {
            // Session 0: the one an exchange belongs to until a session id says otherwise.
            self.sessions.push(Session::sessionless(None, event.t));
        }
        self.events_applied += 1;
        self.last_t = Some(event.t);
        let t = event.t;
        match &event.kind {
            EventKind::StreamOpened { .. }
            | EventKind::ResponseHead { .. }
            | EventKind::SseEvent { .. }
            | EventKind::Message { .. }
            | EventKind::StreamEnded { .. } => self.fold_exchange(t, event, &mut out),
            EventKind::ProxyStarted { .. }
            | EventKind::InvalidMessage { .. }
            | EventKind::UpstreamUnreachable { .. }
            | EventKind::FaultInjected { .. }
            | EventKind::CallRescued { .. }
            | EventKind::Note { .. }
            | EventKind::Rewritten { .. }
            | EventKind::Unobserved { .. } => {
                if self.fold_proxy_report(t, &event.kind, &mut out).is_break() {
                    return out;
                }
            }
            EventKind::ProcessStarted { .. }
            | EventKind::StderrLine { .. }
            | EventKind::ProcessExited { .. } => self.fold_process(t, &event.kind, &mut out),
        }
        self.name_servers(&mut out);
        out
    }

    /// Folds an event of an HTTP exchange: a stream opened, its response head, its SSE events,
    /// the messages it carried and its end. (The other kinds are other groups'.)
    fn fold_exchange(&mut self, t: DateTime<Utc>, event: &Event, out: &mut Vec<Notice>) {
        match &event.kind {
            EventKind::StreamOpened {
                stream,
                conn,
                method,
                path,
                headers,
                origin,
            } => {
                let origin = origin.clone().or_else(|| self.upstream_origin());
                let opened = Opened {
                    id: *stream,
                    conn: *conn,
                    method,
                    path,
                    headers,
                    origin,
                };
                self.open_stream(t, opened, out);
            }
            EventKind::ResponseHead {
                stream,
                status,
                headers,
            } => {
                self.response_head(t, *stream, *status, headers, out);
            }
            EventKind::SseEvent {
                stream,
                id,
                event: name,
                retry,
                data,
                start,
                end,
            } => {
                self.legacy_endpoint(t, *stream, name.as_deref(), data, out);
                self.sse_event(t, *stream, id.as_deref(), *retry, (*start, *end));
            }
            EventKind::Message { stream, dir, body } => {
                self.message(t, *stream, *dir, body, event.source.as_ref(), out)
            }
            EventKind::StreamEnded {
                stream,
                dir,
                how,
                leg,
                bytes,
                detail,
            } => {
                let end = End {
                    at: t,
                    how: *how,
                    leg: *leg,
                    bytes: *bytes,
                    detail: detail.clone(),
                };
                self.stream_ended(*stream, *dir, end, out);
            }
            _ => {}
        }
    }

    /// Folds an event of a stdio server's process: it started, wrote a line to stderr, or
    /// exited. (The other kinds are other groups'.)
    fn fold_process(&mut self, t: DateTime<Utc>, kind: &EventKind, out: &mut Vec<Notice>) {
        match kind {
            EventKind::ProcessStarted {
                stream,
                pid,
                command,
                name,
            } => {
                let process = super::Process {
                    pid: *pid,
                    command: command.clone(),
                    name: name.clone(),
                    ..Default::default()
                };
                self.process_started(t, *stream, process, out);
            }
            EventKind::StderrLine { stream, line } => self.stderr_line(t, *stream, line),
            EventKind::ProcessExited {
                stream,
                code,
                signal,
            } => self.process_exited(t, *stream, *code, *signal, out),
            _ => {}
        }
    }

    /// The origin of the one upstream `proxy_started` named, for exchanges that do not name
    /// their own server.
    fn upstream_origin(&mut self) -> Option<String> {
        let proxy = self.proxy.as_ref()?;
        match &self.upstream_origin {
            Some((upstream, origin)) if *upstream == proxy.upstream => origin.clone(),
            _ => {
                let origin = crate::wire::oauth::Origin::text_of(&proxy.upstream);
                self.upstream_origin = Some((proxy.upstream.clone(), origin.clone()));
                origin
            }
        }
    }
}
