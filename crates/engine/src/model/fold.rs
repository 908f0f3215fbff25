//! `Model::apply`: how each fact changes the state.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::Value;

use super::call::KnownKey;
use super::{
    Body, Call, Death, End, FailedProbe, Mark, MessageRec, Model, Notice, OrphanCause, Progress,
    ProxyInfo, Reaction, Session, SessionEnd, Stream, ToolInfo, Verdict, What,
};
use crate::event::{Direction, EndHow, Event, EventKind, Header, Leg, StreamId, header};
use crate::wire::ContentKind;
use crate::wire::jsonrpc::{Kind, canonical_without, classify, id_text, messages};

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

pub(super) fn retry_key(method: &str, params: &Value) -> String {
    let params = canonical_without(params, &["_meta", "inputResponses", "requestState"]);
    format!("{method} {params}")
}

/// `name version` from an `initialize` request's `clientInfo`.
fn client_name(params: &Value) -> Option<String> {
    let info = params.get("clientInfo")?;
    let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
    let version = info.get("version").and_then(Value::as_str).unwrap_or("");
    Some(format!("{name} {version}").trim().to_string())
}

/// Whether a result is a tool's error (`isError: true`).
pub(super) fn is_tool_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
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

    fn fold_event(&mut self, event: &Event) -> Vec<Notice> {
        let mut out = self.advance(event.t);
        if self.sessions.is_empty() {
            self.sessions.push(Session {
                id: None,
                origin: None,
                revision: None,
                client: None,
                server: None,
                started_at: event.t,
                ended: None,
                streams: Vec::new(),
                tools: Default::default(),
                announced: true,
            });
        }
        self.events_applied += 1;
        self.last_t = Some(event.t);
        let t = event.t;
        match &event.kind {
            EventKind::ProxyStarted {
                listen, upstream, ..
            } => {
                self.proxy = Some(ProxyInfo {
                    listen: listen.clone(),
                    upstream: upstream.clone(),
                });
            }
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
                self.open_stream(t, opened, &mut out);
            }
            EventKind::ResponseHead {
                stream,
                status,
                headers,
            } => {
                self.response_head(t, *stream, *status, headers, &mut out);
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
                self.legacy_endpoint(t, *stream, name.as_deref(), data, &mut out);
                self.sse_event(t, *stream, id.as_deref(), *retry, (*start, *end));
            }
            EventKind::Message { stream, dir, body } => {
                self.message(t, *stream, *dir, body, event.source.as_ref(), &mut out)
            }
            EventKind::InvalidMessage {
                stream,
                dir,
                reason,
                raw,
            } => {
                if let Some(si) = self.stream_index.get(stream).copied() {
                    let size = raw.len() + 2;
                    self.detail_bytes += size;
                    let index = self.messages.push(MessageRec {
                        at: t,
                        stream: *stream,
                        dir: *dir,
                        body: Body::new(&Value::String(raw.clone())),
                        invalid: Some(reason.clone()),
                        sse_id: None,
                        call: None,
                        size,
                    });
                    let s = &mut self.streams[si];
                    s.messages.push(index);
                    s.detail_bytes += size;
                    s.invalid += 1;
                    self.link_mark(si, index, false);
                    self.trim_stream(si);
                }
                out.push(Notice {
                    server: None,
                    t,
                    what: What::InvalidMessage {
                        stream: *stream,
                        reason: reason.clone(),
                    },
                });
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
                self.stream_ended(*stream, *dir, end, &mut out);
            }
            EventKind::UpstreamUnreachable { stream, error } => {
                if let Some(si) = self.stream_index.get(stream).copied() {
                    if self.streams[si].is_open() {
                        self.counts.open_streams -= 1;
                    }
                    self.streams[si].unreachable = Some(error.clone());
                    let message = format!("upstream unreachable: {error}");
                    for index in self.open_calls_owned_by(si) {
                        if !self.resume_unreached(si, index) {
                            self.fail(index, message.clone(), t, &mut out);
                        }
                    }
                }
                out.push(Notice {
                    server: None,
                    t,
                    what: What::UpstreamUnreachable {
                        stream: *stream,
                        error: error.clone(),
                    },
                });
            }
            EventKind::FaultInjected {
                stream,
                fault,
                rule,
            } => {
                if let Some(si) = self.stream_index.get(stream).copied() {
                    self.streams[si].faults.push(fault.clone());
                    self.counts.faults += 1;
                    for index in self.streams[si].calls.clone() {
                        self.calls[index].injected = true;
                    }
                }
                let text = match rule {
                    Some(rule) => format!("fault {fault} injected ({rule})"),
                    None => format!("fault {fault} injected"),
                };
                self.notes.push((t, Some(*stream), text));
                out.push(Notice {
                    server: None,
                    t,
                    what: What::FaultInjected {
                        stream: *stream,
                        fault: fault.clone(),
                    },
                });
            }
            EventKind::CallRescued {
                stream,
                id,
                message,
            } => {
                let Some(si) = self.stream_index.get(stream).copied() else {
                    return out;
                };
                if let Some(index) = self.find_call(si, Direction::ServerToClient, id) {
                    self.calls[index].aside_mut().rescued = Some(message.clone());
                    out.push(Notice {
                        server: None,
                        t,
                        what: What::CallRescued {
                            call: self.call_ref(index),
                            stream: *stream,
                            message: message.clone(),
                        },
                    });
                }
            }
            EventKind::Note { stream, text } => self.notes.push((t, *stream, text.clone())),
            EventKind::Rewritten {
                stream,
                what,
                from,
                to,
            } => {
                let text = format!("rewrote {what}: {from} → {to}");
                self.notes.push((t, Some(*stream), text));
                out.push(Notice {
                    server: None,
                    t,
                    what: What::Rewritten {
                        stream: *stream,
                        what: what.clone(),
                        from: from.clone(),
                        to: to.clone(),
                    },
                });
            }
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
                self.process_started(t, *stream, process, &mut out);
            }
            EventKind::StderrLine { stream, line } => self.stderr_line(t, *stream, line),
            EventKind::ProcessExited {
                stream,
                code,
                signal,
            } => self.process_exited(t, *stream, *code, *signal, &mut out),
            EventKind::Unobserved {
                bytes_up,
                bytes_down,
                ..
            } => {
                self.unobserved.exchanges += 1;
                self.unobserved.bytes += bytes_up + bytes_down;
            }
        }
        self.name_servers(&mut out);
        out
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

    /// A server's session by its id (two servers' sessions of the same id are two sessions).
    pub(super) fn session_for_id(
        &mut self,
        t: DateTime<Utc>,
        origin: Option<&str>,
        id: &str,
        revision: Option<&str>,
        announce: bool,
        out: &mut Vec<Notice>,
    ) -> usize {
        let key = (origin.map(str::to_string), id.to_string());
        if let Some(&index) = self.session_index.get(&key) {
            return index;
        }
        let index = self.sessions.next_index();
        self.sessions.push(Session {
            id: Some(id.to_string()),
            origin: origin.map(str::to_string),
            revision: revision.map(str::to_string),
            client: None,
            server: None,
            started_at: t,
            ended: None,
            streams: Vec::new(),
            tools: Default::default(),
            announced: false,
        });
        self.session_index.insert(key, index);
        if announce {
            self.announce_session(t, index, out);
        }
        index
    }

    /// A server's session-less traffic: session 0 for the first server seen (or for exchanges
    /// that name none), a session of its own for each other server.
    pub(super) fn sessionless_for(&mut self, t: DateTime<Utc>, origin: Option<&str>) -> usize {
        let nothing_yet = self.streams.is_empty();
        let first = &mut self.sessions[0];
        if first.origin.as_deref() == origin {
            return 0;
        }
        if first.origin.is_none() && first.streams.is_empty() && nothing_yet {
            first.origin = origin.map(str::to_string);
            return 0;
        }
        if let Some((index, _)) = self
            .sessions
            .indexed()
            .find(|(_, s)| s.is_sessionless() && s.origin.as_deref() == origin)
        {
            return index;
        }
        self.sessions.push(Session {
            id: None,
            origin: origin.map(str::to_string),
            revision: None,
            client: None,
            server: None,
            started_at: t,
            ended: None,
            streams: Vec::new(),
            tools: Default::default(),
            announced: true,
        })
    }

    /// Reports `session_started` once.
    pub(super) fn announce_session(
        &mut self,
        t: DateTime<Utc>,
        index: usize,
        out: &mut Vec<Notice>,
    ) {
        let session = &mut self.sessions[index];
        if session.announced {
            return;
        }
        session.announced = true;
        out.push(Notice {
            server: session.origin.clone(),
            t,
            what: What::SessionStarted {
                session: session.id.clone(),
                revision: session.revision.clone(),
            },
        });
    }

    fn open_stream(&mut self, t: DateTime<Utc>, opened: Opened<'_>, out: &mut Vec<Notice>) {
        let Opened {
            id,
            conn,
            method,
            path,
            headers,
            origin,
        } = opened;
        let revision = header(headers, "mcp-protocol-version");
        let server = origin.as_deref();
        let session = match header(headers, "mcp-session-id") {
            Some(sid) => self.session_for_id(t, server, sid, revision, true, out),
            None => match self.legacy_session_of_path(server, path) {
                Some(session) => session,
                None => self.sessionless_for(t, server),
            },
        };
        let si = self.push_stream(t, id, conn, method, path, session, headers);
        self.streams[si].origin = origin;
        if !method.eq_ignore_ascii_case("GET") {
            return;
        }
        match header(headers, "last-event-id") {
            Some(last) => self.resume(t, si, session, last, out),
            None => {
                for call in self.calls.iter_mut() {
                    if call.session == session && matches!(call.verdict, Verdict::Orphaned { .. }) {
                        call.reaction.new_get = true;
                    }
                }
            }
        }
    }

    /// Adds an open stream to the model and to its session; returns its index.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_stream(
        &mut self,
        t: DateTime<Utc>,
        id: StreamId,
        conn: u64,
        method: &str,
        path: &str,
        session: usize,
        headers: &[Header],
    ) -> usize {
        let si = self.streams.push(Stream {
            id,
            conn,
            method: method.to_string(),
            path: path.to_string(),
            session,
            origin: None,
            opened_at: t,
            request_headers: headers.to_vec(),
            status: None,
            response_headers: Vec::new(),
            head_at: None,
            body: None,
            marks: Vec::new(),
            messages: Vec::new(),
            detail_bytes: 0,
            calls: Vec::new(),
            last_event_id: None,
            retry_ms: None,
            resumes: None,
            resume_mismatch: None,
            ended: None,
            request_aborted: None,
            unreachable: None,
            faults: Vec::new(),
            invalid: 0,
            opened_seq: self.seq(),
            dropped_marks: 0,
            process: None,
        });
        self.stream_index.insert(id, si);
        self.sessions[session].streams.push(id);
        self.counts.open_streams += 1;
        si
    }

    fn response_head(
        &mut self,
        t: DateTime<Utc>,
        id: StreamId,
        status: u16,
        headers: &[Header],
        out: &mut Vec<Notice>,
    ) {
        let Some(si) = self.stream_index.get(&id).copied() else {
            return;
        };
        let body = ContentKind::of_headers(headers);
        {
            let s = &mut self.streams[si];
            s.status = Some(status);
            s.response_headers = headers.to_vec();
            s.head_at = Some(t);
            s.body = Some(body);
        }
        // The response that assigns a session (to `initialize`) moves the exchange into it.
        if self.sessions[self.streams[si].session].is_sessionless()
            && let Some(sid) = header(headers, "mcp-session-id")
        {
            let revision = self.streams[si]
                .request_header("mcp-protocol-version")
                .map(str::to_string);
            // An `initialize` answer announces the session with its negotiated revision.
            let initializing = self.streams[si]
                .calls
                .iter()
                .any(|&c| self.calls[c].method == "initialize");
            let origin = self.streams[si].origin.clone();
            let session = self.session_for_id(
                t,
                origin.as_deref(),
                sid,
                revision.as_deref(),
                !initializing,
                out,
            );
            self.move_stream(si, session);
        }
        let session = self.streams[si].session;
        let method = self.streams[si].method.clone();
        let ok = (200..300).contains(&status);
        let sessionless = self.sessions[session].is_sessionless();
        if status == 404
            && !sessionless
            && self.streams[si].request_header("mcp-session-id").is_some()
        {
            self.end_session(t, session, SessionEnd::Expired, out);
            return;
        }
        if method.eq_ignore_ascii_case("DELETE") && ok && !sessionless {
            self.end_session(t, session, SessionEnd::Deleted, out);
            return;
        }
        if self.streams[si].resumes.is_some() && !ok {
            self.orphan_owned_by(si, OrphanCause::ResumeFailed, t, out);
            return;
        }
        if let Some(message) = super::challenge::challenge(status, headers) {
            self.challenged(si, id, status, &message, t, out);
            return;
        }
        if !ok {
            // A legacy POST refused: its calls wait on the session's SSE stream no more.
            for index in self.legacy_posted_calls(si) {
                self.fail(index, format!("HTTP {status}"), t, out);
            }
        }
        if ok && body == ContentKind::Other {
            self.orphan_owned_by(si, OrphanCause::NoResponseBody, t, out);
        } else if !ok && body == ContentKind::Other {
            for index in self.open_calls_owned_by(si) {
                self.fail(index, format!("HTTP {status}"), t, out);
            }
        }
    }

    pub(super) fn move_stream(&mut self, si: usize, session: usize) {
        let old = self.streams[si].session;
        let id = self.streams[si].id;
        self.sessions[old].streams.retain(|&s| s != id);
        self.sessions[session].streams.push(id);
        self.streams[si].session = session;
        for index in self.streams[si].calls.clone() {
            let call = &mut self.calls[index];
            if call.method == "initialize"
                && call.dir == Direction::ClientToServer
                && let Some(client) = client_name(&call.params())
            {
                self.sessions[session].client = Some(client);
            }
            let old_key = (call.session, call.dir, call.id_text());
            call.session = session;
            let new_key = (session, call.dir, call.id_text());
            if let Some(list) = self.calls_by_id.get_mut(&old_key) {
                list.retain(|&i| i != index);
            }
            self.calls_by_id.entry(new_key).or_default().push(index);
        }
    }

    fn end_session(
        &mut self,
        t: DateTime<Utc>,
        session: usize,
        how: SessionEnd,
        out: &mut Vec<Notice>,
    ) {
        if self.sessions[session].ended.is_some() {
            return;
        }
        self.sessions[session].ended = Some((t, how));
        self.ended_sessions += 1;
        out.push(Notice {
            server: self.sessions[session].origin.clone(),
            t,
            what: What::SessionEnded {
                session: self.sessions[session].id.clone(),
                how: match how {
                    SessionEnd::Expired => "expired",
                    SessionEnd::Deleted => "deleted",
                },
            },
        });
        let cause = match how {
            SessionEnd::Expired => OrphanCause::SessionExpired,
            SessionEnd::Deleted => OrphanCause::SessionDeleted,
        };
        let open: Vec<usize> = self
            .calls
            .iter()
            .filter(|c| {
                c.session == session && c.dir == Direction::ClientToServer && c.verdict.is_open()
            })
            .map(|c| c.index)
            .collect();
        for index in open {
            let death = match self.calls[index].verdict.death() {
                Some(d) => *d,
                None => Death {
                    stream: self.calls[index].owner,
                    at: t,
                    how: None,
                    leg: None,
                },
            };
            self.orphan(index, cause, death, t, out);
        }
    }

    fn sse_event(
        &mut self,
        t: DateTime<Utc>,
        id: StreamId,
        event_id: Option<&str>,
        retry: Option<u64>,
        span: (u64, u64),
    ) {
        let Some(si) = self.stream_index.get(&id).copied() else {
            return;
        };
        let session = self.streams[si].session;
        let s = &mut self.streams[si];
        s.marks.push(Mark {
            at: t,
            id: event_id.map(str::to_string),
            message: None,
            response: false,
            span,
        });
        if let Some(retry) = retry {
            s.retry_ms = Some(retry);
        }
        if let Some(event_id) = event_id {
            s.last_event_id = Some(event_id.to_string());
            self.event_owner.insert((session, event_id.to_string()), id);
        }
        self.trim_stream(si);
    }

    /// Links a message to the SSE event that carried it, or adds a mark for a JSON body.
    fn link_mark(&mut self, si: usize, message: usize, response: bool) {
        let at = self.messages[message].at;
        let s = &mut self.streams[si];
        match s.marks.last_mut() {
            Some(mark) if s.body == Some(ContentKind::Sse) && mark.message.is_none() => {
                mark.message = Some(message);
                mark.response = response;
                self.messages[message].sse_id = mark.id.clone();
            }
            _ => s.marks.push(Mark {
                at,
                id: None,
                message: Some(message),
                response,
                span: (0, 0),
            }),
        }
    }

    fn message(
        &mut self,
        t: DateTime<Utc>,
        id: StreamId,
        dir: Direction,
        body: &Value,
        source: Option<&std::sync::Arc<str>>,
        out: &mut Vec<Notice>,
    ) {
        let Some(si) = self.stream_index.get(&id).copied() else {
            return;
        };
        let batch = body.is_array();
        for msg in messages(body) {
            // The text a single message was parsed from (SSE data, a body) is its text when it
            // writes as it.
            let shared = match source {
                Some(text) if !batch => Body::of(msg, text),
                _ => Body::new(msg),
            };
            let size = shared.len();
            self.detail_bytes += size;
            let index = self.messages.push(MessageRec {
                at: t,
                stream: id,
                dir,
                body: shared.clone(),
                invalid: None,
                sse_id: None,
                call: None,
                size,
            });
            self.streams[si].messages.push(index);
            self.streams[si].detail_bytes += size;
            let kind = classify(msg);
            let is_response = matches!(kind, Kind::Result { .. } | Kind::Error { .. });
            if dir == Direction::ServerToClient {
                self.link_mark(si, index, is_response);
            }
            match kind {
                Kind::Request {
                    id: rid,
                    method,
                    params,
                } => {
                    let request = Request {
                        id: rid,
                        method,
                        params,
                        message: shared,
                    };
                    let call = self.start_call(t, si, dir, request, batch, out);
                    self.messages[index].call = Some(call);
                }
                Kind::Notification { method, params } => {
                    self.notification(t, si, dir, method, params, out)
                }
                Kind::Result { id: rid, result } => {
                    if let Some(call) = self.find_call(si, dir, rid) {
                        self.messages[index].call = Some(call);
                        let open = self.calls[call].verdict.is_open();
                        self.answer(call, si, Ok(result), shared, t, out);
                        if open {
                            self.task_request_answered(call, id, Ok(result), t, out);
                        }
                    }
                }
                Kind::Error { id: rid, error } => {
                    if let Some(call) = self.find_call(si, dir, rid) {
                        self.messages[index].call = Some(call);
                        let open = self.calls[call].verdict.is_open();
                        self.answer(call, si, Err(error), shared, t, out);
                        if open {
                            self.task_request_answered(call, id, Err(error), t, out);
                        }
                    }
                }
                Kind::Invalid(_) => {}
            }
        }
        self.trim_stream(si);
    }

    fn start_call(
        &mut self,
        t: DateTime<Utc>,
        si: usize,
        dir: Direction,
        request: Request<'_>,
        batch: bool,
        out: &mut Vec<Notice>,
    ) -> usize {
        let Request {
            id: rid,
            method,
            params,
            message,
        } = request;
        let stream = &self.streams[si];
        let session = stream.session;
        let legacy = self.is_legacy_session(session);
        let revision = legacy
            .then(|| super::legacy::LEGACY_REVISION.to_string())
            .or_else(|| {
                stream
                    .request_header("mcp-protocol-version")
                    .map(str::to_string)
            })
            .or_else(|| {
                params
                    .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .or_else(|| self.sessions[session].revision.clone())
            .or_else(|| {
                (method == "initialize")
                    .then(|| {
                        params
                            .get("protocolVersion")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .flatten()
            });
        let tool = (method == "tools/call")
            .then(|| {
                params
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .flatten();
        if stream.process.is_some() && self.sessions[session].revision.is_none() {
            // A stdio session has no header to say it: its first call's revision does.
            self.sessions[session].revision.clone_from(&revision);
        }
        let stream = &self.streams[si];
        let index = self.calls.next_index();
        let mut call = Call {
            index,
            session,
            dir,
            id: Body::new(rid),
            method: self.names.get(method),
            tool: tool.as_deref().map(|t| self.names.get(t)),
            request: message,
            started_at: t,
            request_stream: stream.id,
            owner: stream.id,
            batch,
            revision: revision.as_deref().map(|r| self.names.get(r)),
            verdict: Verdict::Pending,
            ended_at: None,
            reply: None,
            tool_error: false,
            progress: Progress::default(),
            reaction: Reaction::default(),
            arrival: 1,
            retry_of: None,
            injected: !stream.faults.is_empty(),
            input_required: false,
            seq: (stream.opened_seq, self.seq()),
            evicted: None,
            aside: None,
            retry_key: KnownKey::default(),
        };
        if dir == Direction::ClientToServer
            && method == "initialize"
            && let Some(probe) = self.failed_probes.pop_front()
        {
            if let Some(probe_call) = self.calls.get_mut(probe.index) {
                probe_call.aside_mut().superseded_by = Some(index);
            }
            out.push(Notice {
                server: None,
                t,
                what: What::CallSuperseded {
                    call: probe.call,
                    error: probe.error,
                    by: method.to_string(),
                    by_request_id: rid.clone(),
                },
            });
        }
        if dir == Direction::ClientToServer && method == "initialize" {
            if let Some(client) = client_name(params) {
                self.sessions[session].client = Some(client);
            }
            for other in self.calls.iter_mut() {
                if matches!(
                    other.verdict,
                    Verdict::Orphaned { .. } | Verdict::Resumable { .. }
                ) {
                    other.reaction.reinitialized = true;
                }
            }
        }
        let mut retry_notice = None;
        if dir == Direction::ClientToServer && !NOT_RETRIES.contains(&method) {
            let key = retry_key(method, params);
            let continuing =
                params.get("inputResponses").is_some() || params.get("requestState").is_some();
            let earlier = self
                .calls_by_key
                .get(&key)
                .and_then(|list| list.last())
                .copied();
            if let Some(prev) = earlier.filter(|&p| continuing && self.calls[p].input_required) {
                call.aside_mut().continues = Some(prev);
                self.calls[prev].aside_mut().continued_by = Some(index);
            } else if let Some(prev) = self.retried_call(&key, session) {
                call.arrival = self.calls[prev].arrival + 1;
                call.retry_of = Some(prev);
                let mut root = prev;
                while let Some(up) = self.calls.get(root).and_then(|c| c.retry_of) {
                    if !self.calls.contains(up) {
                        break;
                    }
                    root = up;
                }
                self.calls[root].reaction.retries += 1;
                let idempotent = match &call.tool {
                    Some(tool) => self
                        .tool_info(session, tool)
                        .or_else(|| self.tool_info(self.calls[prev].session, tool))
                        .map(ToolInfo::safe_to_retry),
                    None => Some(true),
                };
                retry_notice = Some((call.arrival, idempotent, self.calls[prev].id.value()));
            }
            call.retry_key = KnownKey::known(&key);
            self.calls_by_key.entry(key).or_default().push(index);
        }
        self.calls_by_id
            .entry((session, dir, id_text(rid)))
            .or_default()
            .push(index);
        self.calls.push(call);
        self.link_task_request(index, t);
        self.full_calls += 1;
        self.streams[si].calls.push(index);
        self.counts.pending += 1;
        let mut stream_id = self.streams[si].id;
        // A legacy POST's call is answered on its session's SSE stream, which owns it.
        if dir == Direction::ClientToServer
            && let Some(owner) = self.legacy_owner(session)
            && let Some(oi) = self.stream_index.get(&owner).copied()
        {
            self.calls[index].owner = owner;
            self.streams[oi].calls.push(index);
            stream_id = owner;
        }
        if dir == Direction::ServerToClient {
            out.push(Notice {
                server: None,
                t,
                what: What::ServerRequest {
                    call: self.call_ref(index),
                    stream: stream_id,
                },
            });
        }
        if dir == Direction::ClientToServer {
            out.push(Notice {
                server: None,
                t,
                what: What::CallStarted {
                    call: self.call_ref(index),
                    stream: stream_id,
                },
            });
            if let Some(prev) = self.calls[index].continues() {
                let round = self.calls[index].round(&self.calls);
                let continues = self.calls[prev].id.value();
                out.push(Notice {
                    server: None,
                    t,
                    what: What::CallContinued {
                        call: self.call_ref(index),
                        round,
                        continues,
                    },
                });
            }
            if let Some((arrival, idempotent, retry_of)) = retry_notice {
                out.push(Notice {
                    server: None,
                    t,
                    what: What::ClientRetry {
                        call: self.call_ref(index),
                        arrival,
                        idempotent,
                        retry_of,
                    },
                });
            }
        }
        index
    }

    /// The earlier call with the same method and params that a new call in `session` re-sends,
    /// if it is a retry: the client saw that call fail (an error, its stream's death, or its
    /// own cancellation) before re-sending it, in the same session or in the session that
    /// replaced it ([`Model::follows`]). Identical calls still pending overlap it and are not
    /// what it retries; one answered in the same session since means the client moved on.
    fn retried_call(&self, key: &str, session: usize) -> Option<usize> {
        let list = self.calls_by_key.get(key)?;
        for &prev in list.iter().rev().take(RETRY_LOOKBACK) {
            let earlier = &self.calls[prev];
            let Some(failed_at) = failure_seen(&earlier.verdict, earlier.ended_at) else {
                if earlier.session == session && earlier.verdict == Verdict::Answered {
                    return None;
                }
                continue;
            };
            if earlier.session == session || self.follows(session, earlier.session, failed_at) {
                return Some(prev);
            }
        }
        None
    }

    /// Whether `new` is the session the client of `old` opened after a failure at `failed_at`:
    /// the same client (`clientInfo`), first seen after the failure, and `old` opened no stream
    /// since `new` began.
    fn follows(&self, new: usize, old: usize, failed_at: DateTime<Utc>) -> bool {
        let (Some(new_s), Some(old_s)) = (self.sessions.get(new), self.sessions.get(old)) else {
            return false;
        };
        if new == 0 || old == 0 || new_s.client.is_none() || new_s.client != old_s.client {
            return false;
        }
        let old_quiet = old_s
            .streams
            .last()
            .and_then(|id| self.stream(*id))
            .is_none_or(|s| s.opened_at <= new_s.started_at);
        new_s.started_at >= failed_at && old_quiet
    }

    fn notification(
        &mut self,
        t: DateTime<Utc>,
        si: usize,
        dir: Direction,
        method: &str,
        params: &Value,
        out: &mut Vec<Notice>,
    ) {
        match (dir, method) {
            (Direction::ServerToClient, "notifications/tasks/status") => {
                let session = self.streams[si].session;
                self.task_notified(session, params, t, out);
            }
            (Direction::ClientToServer, "notifications/cancelled") => {
                let Some(rid) = params.get("requestId") else {
                    return;
                };
                let session = self.streams[si].session;
                let key = (session, Direction::ClientToServer, id_text(rid));
                let Some(index) = self.calls_by_id.get(&key).and_then(|l| l.last()).copied() else {
                    return;
                };
                if self.calls[index].verdict.is_open() {
                    self.set_verdict(index, Verdict::Cancelled { at: t }, Some(t));
                    out.push(Notice {
                        server: None,
                        t,
                        what: What::CallCancelled {
                            call: self.call_ref(index),
                        },
                    });
                }
                self.calls[index].reaction.cancelled = true;
            }
            (Direction::ServerToClient, _) => {
                let token = params.get("progressToken");
                let owned: Vec<usize> = self.streams[si]
                    .calls
                    .iter()
                    .copied()
                    .filter(|&c| {
                        self.calls[c].dir == Direction::ClientToServer
                            && self.calls[c].verdict.is_open()
                    })
                    .collect();
                // A request is parsed only when its text holds the token (a progress flood
                // would otherwise parse it once per notification), and only when more than one
                // call waits on the stream (one is the call whatever the token says).
                let by_token = token.filter(|_| owned.len() > 1).and_then(|tok| {
                    let needle = tok.to_string();
                    owned.iter().copied().find(|&c| {
                        let call = &self.calls[c];
                        call.request.text().contains(&needle)
                            && call.progress_token().as_ref() == Some(tok)
                    })
                });
                if let Some(index) = by_token.or_else(|| owned.first().copied()) {
                    let progress = &mut self.calls[index].progress;
                    progress.count += 1;
                    progress.last = Some(t);
                }
            }
            _ => {}
        }
    }

    fn find_call(&self, si: usize, response_dir: Direction, rid: &Value) -> Option<usize> {
        let request_dir = match response_dir {
            Direction::ServerToClient => Direction::ClientToServer,
            Direction::ClientToServer => Direction::ServerToClient,
        };
        let stream = &self.streams[si];
        let text = id_text(rid);
        let owned = stream
            .calls
            .iter()
            .rev()
            .copied()
            .find(|&c| self.calls[c].dir == request_dir && self.calls[c].id_text() == text);
        owned.or_else(|| {
            let list = self.calls_by_id.get(&(stream.session, request_dir, text))?;
            list.iter()
                .rev()
                .copied()
                .find(|&c| self.calls[c].verdict.is_open())
                .or_else(|| list.last().copied())
        })
    }

    fn answer(
        &mut self,
        index: usize,
        si: usize,
        response: Result<&Value, &Value>,
        message: Body,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        let stream_id = self.streams[si].id;
        let was_open = self.calls[index].verdict.is_open();
        let late = matches!(self.calls[index].verdict, Verdict::Orphaned { .. });
        if !was_open && !late {
            let seq = self.seq();
            let call = &mut self.calls[index];
            if call.evicted.is_none() {
                call.reply = Some(message);
                call.seq.1 = seq;
            }
            return;
        }
        if self.calls[index].owner != stream_id {
            self.calls[index].owner = stream_id;
            if !self.streams[si].calls.contains(&index) {
                self.streams[si].calls.push(index);
            }
        }
        let elapsed_ms = (t - self.calls[index].started_at).num_milliseconds();
        if let Ok(result) = response
            && self.task_created(index, result, t, out)
        {
            self.calls[index].reply = Some(message);
            return;
        }
        match response {
            Ok(result) => {
                self.calls[index].reply = Some(message);
                self.calls[index].tool_error = is_tool_error(result);
                if self.calls[index].method == "tools/list" {
                    self.learn_tools(self.calls[index].session, result);
                }
                if self.calls[index].method == "tasks/list" {
                    self.tasks_listed(self.calls[index].session, result, t, out);
                }
                if self.calls[index].method == "initialize" {
                    let session = self.calls[index].session;
                    if let Some(v) = result.get("protocolVersion").and_then(Value::as_str)
                        && !self.is_legacy_session(session)
                    {
                        let was = self.sessions[session].revision.replace(v.to_string());
                        // Named already (a probe got the session id first): correct it.
                        if self.sessions[session].announced && was.as_deref() != Some(v) {
                            out.push(Notice {
                                server: self.sessions[session].origin.clone(),
                                t,
                                what: What::SessionRevision {
                                    session: self.sessions[session].id.clone(),
                                    revision: v.to_string(),
                                    was,
                                },
                            });
                        }
                    }
                    if let Some(info) = result.get("serverInfo") {
                        let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
                        let version = info.get("version").and_then(Value::as_str).unwrap_or("");
                        self.sessions[session].server =
                            Some(format!("{name} {version}").trim().to_string());
                    }
                    self.announce_session(t, session, out);
                }
                let input_required = is_input_required(result);
                self.calls[index].input_required = input_required;
                self.set_verdict(index, Verdict::Answered, Some(t));
                self.release_answered_legacy(index);
                let call = self.call_ref(index);
                let what = match (self.calls[index].dir, input_required) {
                    (Direction::ServerToClient, _) => {
                        What::ServerRequestAnswered { call, elapsed_ms }
                    }
                    (Direction::ClientToServer, true) => What::CallInputRequired {
                        call,
                        input_requests: result.get("inputRequests").cloned().unwrap_or(Value::Null),
                    },
                    (Direction::ClientToServer, false) => What::CallAnswered {
                        call,
                        stream: stream_id,
                        elapsed_ms,
                        is_error: is_tool_error(result),
                    },
                };
                out.push(Notice {
                    t,
                    server: None,
                    what,
                });
            }
            Err(error) => {
                self.calls[index].reply = Some(message);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string();
                self.fail(index, message, t, out);
            }
        }
    }

    /// The one copy of a tool definition every session that lists it shares (at most 4,096
    /// distinct ones are remembered; past that the set starts over).
    fn shared_tool_text(&mut self, text: Body) -> Body {
        if let Some(shared) = self.tool_texts.get(&text) {
            return shared.clone();
        }
        if self.tool_texts.len() >= 4_096 {
            self.tool_texts.clear();
        }
        self.tool_texts.insert(text.clone());
        text
    }

    fn learn_tools(&mut self, session: usize, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let hint = |key: &str| {
                tool.pointer(&format!("/annotations/{key}"))
                    .and_then(Value::as_bool)
                    == Some(true)
            };
            let info = ToolInfo {
                read_only: hint("readOnlyHint"),
                idempotent: hint("idempotentHint"),
                definition: Some(self.shared_tool_text(Body::new(tool))),
            };
            self.sessions[session].tools.insert(name.to_string(), info);
        }
    }

    fn stream_ended(&mut self, id: StreamId, dir: Direction, end: End, out: &mut Vec<Notice>) {
        let Some(si) = self.stream_index.get(&id).copied() else {
            return;
        };
        if self.streams[si].process.is_some() {
            self.process_stream_ended(si, dir, end, out);
            return;
        }
        if dir == Direction::ClientToServer {
            if end.how != EndHow::Eof {
                self.streams[si].request_aborted = Some(end);
            }
            return;
        }
        if self.streams[si].ended.is_some() {
            return;
        }
        if self.streams[si].unreachable.is_none() {
            self.counts.open_streams -= 1;
        }
        let t = end.at;
        let (how, leg) = (end.how, end.leg);
        self.streams[si].ended = Some(end);
        // A task operation's request stream ends once the task is created: the task lives on.
        let open: Vec<usize> = self
            .open_calls_owned_by(si)
            .into_iter()
            .filter(|&c| self.calls[c].task().is_none())
            .collect();
        out.push(Notice {
            server: None,
            t,
            what: What::StreamEnded {
                stream: id,
                label: self.streams[si].label(),
                how,
                leg,
                pending: open.len(),
            },
        });
        self.announce_session(t, self.streams[si].session, out);
        let stream = &self.streams[si];
        let session_alive = self.sessions[stream.session].is_alive();
        let status = stream.status.unwrap_or(0);
        let resumption = stream.resumes.is_some();
        // The legacy transport has no resumption: its calls die with the SSE stream.
        let has_ids = stream.has_event_ids() && !self.is_legacy_stream(stream.session, id);
        let (last_event_id, retry_ms) = (stream.last_event_id.clone(), stream.retry_ms);
        let death = Death {
            stream: id,
            at: t,
            how: Some(how),
            leg: Some(leg),
        };
        for index in open {
            let stateless = is_stateless(self.calls[index].revision.as_deref());
            if status >= 400 {
                self.fail(index, format!("HTTP {status}"), t, out);
            } else if stateless && leg == Leg::Client {
                self.set_verdict(index, Verdict::Cancelled { at: t }, Some(t));
                out.push(Notice {
                    server: None,
                    t,
                    what: What::CallCancelled {
                        call: self.call_ref(index),
                    },
                });
            } else if !stateless && has_ids && session_alive {
                let verdict = Verdict::Resumable {
                    death,
                    last_event_id: last_event_id.clone(),
                    retry_ms,
                };
                self.set_verdict(index, verdict, None);
                out.push(Notice {
                    server: None,
                    t,
                    what: What::CallResumable {
                        call: self.call_ref(index),
                        stream: id,
                        last_event_id: last_event_id.clone(),
                        retry_ms,
                    },
                });
            } else {
                let cause = match (resumption, leg) {
                    (true, _) => OrphanCause::ResumeFailed,
                    (false, Leg::Client) => OrphanCause::ClientClosed,
                    (false, Leg::Upstream) => OrphanCause::StreamEnded,
                };
                self.orphan(index, cause, death, t, out);
            }
        }
    }

    /// Orphans the calls a stream owns, by its answer (no stream death: no `how`).
    fn orphan_owned_by(
        &mut self,
        si: usize,
        cause: OrphanCause,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        let stream = self.streams[si].id;
        for index in self.open_calls_owned_by(si) {
            // A refused resumption: the call died with its first stream.
            let death = self.calls[index].first_death().unwrap_or(Death {
                stream,
                at: t,
                how: None,
                leg: None,
            });
            self.orphan(index, cause, death, t, out);
        }
    }

    /// Client → server calls whose response this stream owns and that are still waiting on it.
    pub(super) fn open_calls_owned_by(&self, si: usize) -> Vec<usize> {
        let stream = &self.streams[si];
        stream
            .calls
            .iter()
            .copied()
            .filter(|&c| {
                let call = &self.calls[c];
                call.owner == stream.id
                    && call.dir == Direction::ClientToServer
                    && call.verdict == Verdict::Pending
            })
            .collect()
    }

    pub(super) fn orphan(
        &mut self,
        index: usize,
        cause: OrphanCause,
        death: Death,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        self.set_verdict(index, Verdict::Orphaned { cause, death }, Some(t));
        // A request about a task is no call of its own: its task's operation says what the
        // death means (a dead tasks/result wait: the task lives, the client must ask again).
        if self.calls[index].stands_alone() {
            out.push(Notice {
                server: None,
                t,
                what: What::CallOrphaned {
                    call: self.call_ref(index),
                    stream: death.stream,
                    stream_ended_at: death.at.to_rfc3339_opts(SecondsFormat::Millis, true),
                    how: death.how,
                    cause: cause.describe(),
                },
            });
        }
        self.task_wait_lost(index, death, t, out);
    }

    pub(super) fn fail(
        &mut self,
        index: usize,
        message: String,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        let elapsed_ms = (t - self.calls[index].started_at).num_milliseconds();
        self.set_verdict(
            index,
            Verdict::Error {
                message: message.clone(),
            },
            Some(t),
        );
        if self.calls[index].dir == Direction::ClientToServer
            && self.calls[index].method == "server/discover"
        {
            // A probe: the client falls back to `initialize` when it fails. Its fate is told
            // when that follows, or when the grace ends without it.
            self.failed_probes.push_back(FailedProbe {
                index,
                call: self.call_ref(index),
                error: message,
                elapsed_ms,
                due: t + TimeDelta::milliseconds(PROBE_GRACE_MS),
            });
        } else if self.calls[index].dir == Direction::ClientToServer {
            out.push(Notice {
                server: None,
                t,
                what: What::CallFailed {
                    call: self.call_ref(index),
                    error: message,
                    elapsed_ms,
                },
            });
        }
        // An HTTP failure, not an answer: a `tasks/result` wait lost.
        if self.calls[index].reply.is_none() {
            let death = Death {
                stream: self.calls[index].owner,
                at: t,
                how: None,
                leg: None,
            };
            self.task_wait_lost(index, death, t, out);
        }
    }

    /// Changes a verdict and keeps the counts in step.
    pub(super) fn set_verdict(
        &mut self,
        index: usize,
        verdict: Verdict,
        ended_at: Option<DateTime<Utc>>,
    ) {
        let call = &mut self.calls[index];
        if let Some(deadline) = call.verdict.resume_deadline() {
            self.resume_due.remove(&(deadline, index));
        }
        if let Some(deadline) = verdict.resume_deadline() {
            self.resume_due.insert((deadline, index));
        }
        // A request about a task orphans no operation: its task's operation is what counts.
        let counted = call.stands_alone();
        let before = (
            call.verdict.is_open(),
            counted && matches!(call.verdict, Verdict::Orphaned { .. }),
        );
        let after = (
            verdict.is_open(),
            counted && matches!(verdict, Verdict::Orphaned { .. }),
        );
        call.verdict = verdict;
        call.ended_at = ended_at;
        call.seq.1 = self.events_applied.saturating_sub(1);
        let counts = &mut self.counts;
        match (before.0, after.0) {
            (true, false) => counts.pending -= 1,
            (false, true) => counts.pending += 1,
            _ => {}
        }
        match (before.1, after.1) {
            (true, false) => counts.orphaned -= 1,
            (false, true) => counts.orphaned += 1,
            _ => {}
        }
    }
}
