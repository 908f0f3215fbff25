//! The legacy HTTP+SSE transport (2024-11-05) announces, in the first event of its SSE stream
//! (`event: endpoint`), the URL the client posts to. When that URL is absolute and names
//! another origin than the proxy's (the upstream's own, typically), the client would post past
//! the proxy, or refuse it; it is rewritten to the proxy's origin with the same path and query.
//! This is the one deliberate change to forwarded bytes; it is reported as an
//! [`EventKind::Rewritten`](mcpscope_engine::event::EventKind::Rewritten). Only the first event
//! is held until it is complete; everything after it flows untouched.

use bytes::Bytes;
use mcpscope_engine::model::legacy::endpoint_target;
use mcpscope_engine::wire::sse::{SseFrame, SseParser};

/// The most bytes held while waiting for the first event; past it the stream passes unchanged.
const MAX_HELD: usize = 64 * 1024;

/// A rewrite made: the URL as the upstream sent it and as the client gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rewrite {
    /// As the upstream sent it.
    pub from: String,
    /// As the client gets it.
    pub to: String,
}

/// What the rewriter does with a chunk.
#[derive(Debug)]
pub(crate) enum Fed {
    /// Held: the first event is not complete yet.
    Hold,
    /// The bytes to pass on (the held ones included); the rewriter's work is done.
    Pass(Bytes, Option<Rewrite>),
}

/// Holds the start of a GET's SSE stream until its first event is complete, and rewrites it
/// if it is an `endpoint` naming another origin.
#[derive(Debug)]
pub(crate) struct EndpointRewriter {
    /// `http://host:port`, as the client reached the proxy.
    origin: String,
    held: Vec<u8>,
    parser: SseParser,
    frames: Vec<SseFrame>,
}

/// `scheme://authority` of an absolute URL.
fn origin_of(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let end = url.len() - rest.len() + rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..end])
}

impl EndpointRewriter {
    /// A rewriter toward the proxy's origin (`http://` and the `Host` the client used).
    pub(crate) fn new(proxy_host: &str) -> Self {
        Self {
            origin: format!("http://{proxy_host}"),
            held: Vec::new(),
            parser: SseParser::new(),
            frames: Vec::new(),
        }
    }

    /// Takes the next upstream chunk.
    pub(crate) fn feed(&mut self, data: Bytes) -> Fed {
        self.held.extend_from_slice(&data);
        self.parser.feed(&data, &mut self.frames);
        let Some(frame) = self.frames.first() else {
            if self.held.len() > MAX_HELD || self.parser.gave_up().is_some() {
                return Fed::Pass(self.flush(), None);
            }
            return Fed::Hold;
        };
        let end = (frame.end as usize).min(self.held.len());
        let rewrite = self.rewrite_of(frame);
        let Some(rewrite) = rewrite else {
            return Fed::Pass(self.flush(), None);
        };
        let event = &self.held[..end];
        let Some(at) = find(event, rewrite.from.as_bytes()) else {
            return Fed::Pass(self.flush(), None);
        };
        let mut out = Vec::with_capacity(self.held.len() + rewrite.to.len());
        out.extend_from_slice(&self.held[..at]);
        out.extend_from_slice(rewrite.to.as_bytes());
        out.extend_from_slice(&self.held[at + rewrite.from.len()..]);
        self.held.clear();
        Fed::Pass(Bytes::from(out), Some(rewrite))
    }

    /// The held bytes, unchanged (at the end of the body, or when nothing is to be rewritten).
    pub(crate) fn flush(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.held))
    }

    fn rewrite_of(&self, frame: &SseFrame) -> Option<Rewrite> {
        if frame.event.as_deref() != Some("endpoint") {
            return None;
        }
        let from = frame.data.trim();
        let origin = origin_of(from)?;
        if origin.eq_ignore_ascii_case(&self.origin) {
            return None;
        }
        let target = endpoint_target(from, "/")?;
        Some(Rewrite {
            from: from.to_string(),
            to: format!("{}{target}", self.origin),
        })
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> (String, Option<Rewrite>, usize) {
        let mut r = EndpointRewriter::new("127.0.0.1:9000");
        let mut out = String::new();
        let mut held = 0;
        for chunk in chunks {
            match r.feed(Bytes::from(chunk.to_string())) {
                Fed::Hold => held += 1,
                Fed::Pass(bytes, rewrite) => {
                    out.push_str(std::str::from_utf8(&bytes).expect("utf-8"));
                    return (out, rewrite, held);
                }
            }
        }
        out.push_str(std::str::from_utf8(&r.flush()).expect("utf-8"));
        (out, None, held)
    }

    #[test]
    fn an_absolute_endpoint_on_the_upstreams_origin_is_rewritten_once_whole() {
        let (out, rewrite, held) = run(&[
            ": hi\r\nevent: endpoint\r\ndata: http://127.0.0.1:8000/mess",
            "ages/?session_id=ab\r\n\r\nevent: message\r\ndata: {}",
        ]);
        assert_eq!(held, 1);
        assert_eq!(
            out,
            ": hi\r\nevent: endpoint\r\ndata: http://127.0.0.1:9000/messages/?session_id=ab\r\n\r\nevent: message\r\ndata: {}"
        );
        let rewrite = rewrite.expect("rewritten");
        assert_eq!(
            rewrite.from,
            "http://127.0.0.1:8000/messages/?session_id=ab"
        );
        assert_eq!(rewrite.to, "http://127.0.0.1:9000/messages/?session_id=ab");
    }

    #[test]
    fn relative_endpoints_the_proxys_origin_and_other_first_events_pass_unchanged() {
        for stream in [
            "event: endpoint\ndata: /messages/?session_id=ab\n\n",
            "event: endpoint\ndata: http://127.0.0.1:9000/m?s=1\n\n",
            "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\nevent: endpoint\ndata: http://x/y\n\n",
        ] {
            let (out, rewrite, _) = run(&[stream]);
            assert_eq!(out, stream);
            assert_eq!(rewrite, None);
        }
    }

    #[test]
    fn an_unfinished_first_event_is_given_back_at_the_end() {
        let (out, rewrite, held) = run(&["event: endpoint\ndata: http://h:1/m"]);
        assert_eq!(
            (out.as_str(), rewrite, held),
            ("event: endpoint\ndata: http://h:1/m", None, 1)
        );
    }
}
