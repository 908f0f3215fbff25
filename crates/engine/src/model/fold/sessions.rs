//! The fold's sessions: found or made by id, session-less ones per server, announced, ended,
//! and a stream moved between them.

use super::*;

impl Model {
    /// A server's session by its id (two servers' sessions of the same id are two sessions).
    pub(in crate::model) fn session_for_id(
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
            revision: revision.map(str::to_string),
            announced: false,
            ..Session::sessionless(origin, t)
        });
        self.session_index.insert(key, index);
        if announce {
            self.announce_session(t, index, out);
        }
        index
    }

    /// A server's session-less traffic: session 0 for the first server seen (or for exchanges
    /// that name none), a session of its own for each other server.
    pub(in crate::model) fn sessionless_for(
        &mut self,
        t: DateTime<Utc>,
        origin: Option<&str>,
    ) -> usize {
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
        self.sessions.push(Session::sessionless(origin, t))
    }

    /// Reports `session_started` once.
    pub(in crate::model) fn announce_session(
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

    pub(in crate::model) fn move_stream(&mut self, si: usize, session: usize) {
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

    pub(in crate::model) fn end_session(
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
}
