//! The 2024-11-05 HTTP+SSE transport: a GET's SSE stream announces, in its first event
//! (`endpoint`), the URL the client posts its messages to. Those POSTs are answered `202` with no
//! body; every response arrives on the SSE stream, which owns every pending call of the session
//! (there is no resumption: when it dies, they are orphaned).

use chrono::{DateTime, Utc};

use super::{Model, Notice, Verdict};
use crate::event::{Direction, StreamId};

/// The revision of the HTTP+SSE transport, shown for its sessions.
pub const LEGACY_REVISION: &str = "2024-11-05";

/// The legacy sessions seen so far.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Legacy {
    /// Session index by the server and the path and query of the endpoint its SSE stream
    /// announced.
    #[serde(with = "super::pairs")]
    by_endpoint: super::Map<(Option<String>, String), usize>,
    /// The SSE stream of each legacy session, by session index.
    streams: super::Map<usize, StreamId>,
}

impl Legacy {
    /// Forgets the sessions for which `kept` says false.
    pub(super) fn forget_sessions(&mut self, kept: impl Fn(usize) -> bool) {
        self.by_endpoint.retain(|_, session| kept(*session));
        self.streams.retain(|session, _| kept(*session));
    }
}

/// The path and query an `endpoint` event's URL names: an absolute URL's, or a relative one
/// resolved against `base` (the path of the GET that announced it).
pub fn endpoint_target(data: &str, base: &str) -> Option<String> {
    let url = data.trim();
    if url.is_empty() {
        return None;
    }
    if let Some((_, rest)) = url.split_once("://") {
        let start = rest.find(['/', '?']).unwrap_or(rest.len());
        let target = &rest[start..];
        return Some(match target.strip_prefix('?') {
            Some(query) => format!("/?{query}"),
            None if target.is_empty() => "/".to_string(),
            None => target.to_string(),
        });
    }
    if url.starts_with('/') {
        return Some(url.to_string());
    }
    let base = base.split('?').next().unwrap_or("");
    let dir = base.rsplit_once('/').map_or("", |(dir, _)| dir);
    Some(format!("{dir}/{url}"))
}

/// The session id a legacy endpoint carries (`sessionId` or `session_id` in its query), or the
/// endpoint itself.
fn session_name(target: &str) -> String {
    let query = target.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| k.eq_ignore_ascii_case("sessionid") || k.eq_ignore_ascii_case("session_id"))
        .map_or_else(|| target.to_string(), |(_, v)| v.to_string())
}

impl Model {
    /// An `endpoint` event as the first event of a GET's SSE stream makes that stream the
    /// owner of a legacy session.
    pub(super) fn legacy_endpoint(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        name: Option<&str>,
        data: &str,
        out: &mut Vec<Notice>,
    ) {
        let Some(si) = self.stream_index.get(&stream).copied() else {
            return;
        };
        let s = &self.streams[si];
        let first = s.marks.is_empty() && s.dropped_marks == 0;
        if name != Some("endpoint") || !first || !s.method.eq_ignore_ascii_case("GET") {
            return;
        }
        let Some(target) = endpoint_target(data, &s.path) else {
            return;
        };
        let origin = self.streams[si].origin.clone();
        let session = self.session_for_id(
            t,
            origin.as_deref(),
            &session_name(&target),
            None,
            false,
            out,
        );
        self.sessions[session].revision = Some(LEGACY_REVISION.to_string());
        if self.streams[si].session != session {
            self.move_stream(si, session);
        }
        self.legacy.by_endpoint.insert((origin, target), session);
        self.legacy.streams.insert(session, stream);
        self.announce_session(t, session, out);
    }

    /// The legacy session of a server whose endpoint a request path names.
    pub(super) fn legacy_session_of_path(&self, origin: Option<&str>, path: &str) -> Option<usize> {
        self.legacy
            .by_endpoint
            .get(&(origin.map(str::to_string), path.to_string()))
            .copied()
    }

    /// The SSE stream that owns a legacy session's calls, while it is open.
    pub(super) fn legacy_owner(&self, session: usize) -> Option<StreamId> {
        let id = self.legacy.streams.get(&session).copied()?;
        self.stream(id).filter(|s| s.is_open()).map(|s| s.id)
    }

    /// Whether a stream is the SSE stream of a legacy session.
    pub(super) fn is_legacy_stream(&self, session: usize, stream: StreamId) -> bool {
        self.legacy.streams.get(&session) == Some(&stream)
    }

    /// Whether a session speaks the legacy transport.
    pub(super) fn is_legacy_session(&self, session: usize) -> bool {
        self.legacy.streams.contains_key(&session)
    }

    /// An answered call leaves the list of its legacy SSE stream, which lives as long as its
    /// session and would otherwise list every call ever made (each stays listed on the POST
    /// that sent it; calls that went wrong stay on both).
    pub(super) fn release_answered_legacy(&mut self, index: usize) {
        let call = &self.calls[index];
        let owner = call.owner;
        if call.request_stream == owner || !self.is_legacy_stream(call.session, owner) {
            return;
        }
        if let Some(si) = self.stream_index.get(&owner).copied() {
            self.streams[si].calls.retain(|&c| c != index);
        }
    }

    /// Client calls posted on a legacy session's stream `si` and still waiting on the SSE
    /// stream: a refused POST (4xx/5xx) fails them.
    pub(super) fn legacy_posted_calls(&self, si: usize) -> Vec<usize> {
        let stream = &self.streams[si];
        if !self.is_legacy_session(stream.session) {
            return Vec::new();
        }
        stream
            .calls
            .iter()
            .copied()
            .filter(|&c| {
                let call = &self.calls[c];
                call.request_stream == stream.id
                    && call.owner != stream.id
                    && call.dir == Direction::ClientToServer
                    && call.verdict == Verdict::Pending
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_targets_of_absolute_and_relative_urls() {
        let t = |d| endpoint_target(d, "/sse");
        assert_eq!(
            t("/messages/?session_id=ab").as_deref(),
            Some("/messages/?session_id=ab")
        );
        assert_eq!(
            t("http://127.0.0.1:8000/messages?sessionId=1").as_deref(),
            Some("/messages?sessionId=1")
        );
        assert_eq!(t("http://h:1?x=1").as_deref(), Some("/?x=1"));
        assert_eq!(t("https://h").as_deref(), Some("/"));
        assert_eq!(
            endpoint_target("messages?s=1", "/mcp/sse").as_deref(),
            Some("/mcp/messages?s=1")
        );
        assert_eq!(t(" "), None);
    }

    #[test]
    fn session_names_come_from_the_query() {
        assert_eq!(session_name("/messages/?session_id=ab"), "ab");
        assert_eq!(session_name("/m?x=1&sessionId=9"), "9");
        assert_eq!(session_name("/m"), "/m");
    }
}
