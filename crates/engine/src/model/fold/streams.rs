//! The fold's streams: opened, their response heads, SSE events and marks, and their ends (the
//! calls a dead stream owned orphaned or left resumable).

use super::*;

impl Model {
    pub(super) fn open_stream(
        &mut self,
        t: DateTime<Utc>,
        opened: Opened<'_>,
        out: &mut Vec<Notice>,
    ) {
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
    pub(in crate::model) fn push_stream(
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

    pub(in crate::model) fn response_head(
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
        if let Some(message) = crate::model::challenge::challenge(status, headers) {
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

    pub(in crate::model) fn sse_event(
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
    pub(in crate::model) fn link_mark(&mut self, si: usize, message: usize, response: bool) {
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

    pub(in crate::model) fn stream_ended(
        &mut self,
        id: StreamId,
        dir: Direction,
        end: End,
        out: &mut Vec<Notice>,
    ) {
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
    pub(in crate::model) fn orphan_owned_by(
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
    pub(in crate::model) fn open_calls_owned_by(&self, si: usize) -> Vec<usize> {
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
}
