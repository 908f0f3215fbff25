//! The fold's calls: messages become requests, notifications and answers; retries found;
//! tools learnt; a call orphaned, failed, or given its verdict.

use super::*;

impl Model {
    pub(in crate::model) fn message(
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

    /// A request becomes a call: its revision and tool read, the call made and filed, what an
    /// `initialize` or a retry means for earlier calls done, and the call told; returns its index.
    pub(super) fn start_call(
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
        let revision = self.request_revision(si, method, params);
        let tool = tool_name(method, params);
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
        if dir == Direction::ClientToServer && method == "initialize" {
            self.initialize_sent(t, session, index, rid, params, out);
        }
        let retry = if dir == Direction::ClientToServer && !NOT_RETRIES.contains(&method) {
            self.link_retry(&mut call, method, params)
        } else {
            None
        };
        let stream_id = self.file_call(t, si, call, rid);
        self.tell_call_started(t, index, stream_id, retry, out);
        index
    }

    /// The protocol revision a request is sent at: a legacy session's; else its stream's
    /// `MCP-Protocol-Version` header; else its `_meta`'s; else its session's; else, for an
    /// `initialize`, the one it asks for.
    fn request_revision(&self, si: usize, method: &str, params: &Value) -> Option<String> {
        let stream = &self.streams[si];
        let session = stream.session;
        let legacy = self.is_legacy_session(session);
        legacy
            .then(|| crate::model::legacy::LEGACY_REVISION.to_string())
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
            })
    }

    /// A client's `initialize` (call `index`, request id `rid`) in `session`: the failed
    /// `server/discover` probe it follows, if any, superseded by it; the session's client
    /// named; every call orphaned or left resumable so far marked as followed by a
    /// re-initialization.
    fn initialize_sent(
        &mut self,
        t: DateTime<Utc>,
        session: usize,
        index: usize,
        rid: &Value,
        params: &Value,
        out: &mut Vec<Notice>,
    ) {
        if let Some(probe) = self.failed_probes.pop_front() {
            if let Some(probe_call) = self.calls.get_mut(probe.index) {
                probe_call.aside_mut().superseded_by = Some(index);
            }
            out.push(Notice {
                server: None,
                t,
                what: What::CallSuperseded {
                    call: probe.call,
                    error: probe.error,
                    by: "initialize".to_string(),
                    by_request_id: rid.clone(),
                },
            });
        }
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

    /// A client's new call (not yet filed) linked to the earlier one with its method and params
    /// that it continues (with the input an `InputRequiredResult` asked for) or retries (the
    /// first arrival counting the retry), and filed under that key. For a retry, returns what
    /// its notice says.
    fn link_retry(&mut self, call: &mut Call, method: &str, params: &Value) -> Option<Retry> {
        let (index, session) = (call.index, call.session);
        let mut retry = None;
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
            retry = Some(Retry {
                arrival: call.arrival,
                idempotent,
                retry_of: self.calls[prev].id.value(),
            });
        }
        call.retry_key = KnownKey::known(&key);
        self.calls_by_key.entry(key).or_default().push(index);
        retry
    }

    /// Files a new call (request id `rid`) made on stream `si`: by its id, on its stream (and,
    /// for a legacy POST, on its session's SSE stream, which owns it), counted pending. Returns
    /// the stream it is told on.
    fn file_call(&mut self, t: DateTime<Utc>, si: usize, call: Call, rid: &Value) -> StreamId {
        let (index, session, dir) = (call.index, call.session, call.dir);
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
        stream_id
    }

    /// The notices of a call just started on `stream`: a server's request; or a client's call
    /// and, when it continues or retries an earlier one, that.
    fn tell_call_started(
        &self,
        t: DateTime<Utc>,
        index: usize,
        stream: StreamId,
        retry: Option<Retry>,
        out: &mut Vec<Notice>,
    ) {
        if self.calls[index].dir == Direction::ServerToClient {
            out.push(Notice {
                server: None,
                t,
                what: What::ServerRequest {
                    call: self.call_ref(index),
                    stream,
                },
            });
        }
        if self.calls[index].dir == Direction::ClientToServer {
            out.push(Notice {
                server: None,
                t,
                what: What::CallStarted {
                    call: self.call_ref(index),
                    stream,
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
            if let Some(Retry {
                arrival,
                idempotent,
                retry_of,
            }) = retry
            {
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
    }

    /// The earlier call with the same method and params that a new call in `session` re-sends,
    /// if it is a retry: the client saw that call fail (an error, its stream's death, or its
    /// own cancellation) before re-sending it, in the same session or in the session that
    /// replaced it ([`Model::follows`]). Identical calls still pending overlap it and are not
    /// what it retries; one answered in the same session since means the client moved on.
    pub(in crate::model) fn retried_call(&self, key: &str, session: usize) -> Option<usize> {
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
    pub(in crate::model) fn follows(
        &self,
        new: usize,
        old: usize,
        failed_at: DateTime<Utc>,
    ) -> bool {
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

    pub(in crate::model) fn notification(
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

    pub(in crate::model) fn find_call(
        &self,
        si: usize,
        response_dir: Direction,
        rid: &Value,
    ) -> Option<usize> {
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

    pub(in crate::model) fn answer(
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
    pub(in crate::model) fn shared_tool_text(&mut self, text: Body) -> Body {
        if let Some(shared) = self.tool_texts.get(&text) {
            return shared.clone();
        }
        if self.tool_texts.len() >= 4_096 {
            self.tool_texts.clear();
        }
        self.tool_texts.insert(text.clone());
        text
    }

    pub(in crate::model) fn learn_tools(&mut self, session: usize, result: &Value) {
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

    pub(in crate::model) fn orphan(
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

    pub(in crate::model) fn fail(
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
    pub(in crate::model) fn set_verdict(
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

/// What a retry's notice says: which arrival it is, whether its tool is safe to run again
/// (unknown when its session never listed it), and the request id of the call it retries.
struct Retry {
    arrival: u32,
    idempotent: Option<bool>,
    retry_of: Value,
}

/// The tool a `tools/call` calls, by its `name`.
fn tool_name(method: &str, params: &Value) -> Option<String> {
    (method == "tools/call")
        .then(|| {
            params
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .flatten()
}
