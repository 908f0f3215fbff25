//! What becomes of an upstream response, decided once from its head and the request: what its
//! body is (JSON, SSE, other), whether its calls are rescued, whether a legacy `endpoint` or a
//! metadata document in it is rewritten, and whether the intercept holds it. The tap is built
//! from the plan.

use http::response::Parts;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Exchange;
use crate::endpoint::EndpointRewriter;
use crate::headers::{closes_after, strip_hop_by_hop};
use crate::oauth::{self, Addresses};
use crate::rescue::{Parked, Rescue};
use crate::shared::Shared;
use crate::tap::BodyPlan;
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::oauth::{Rewrite, endpoint_label};

/// What of the request its response's plan depends on, gathered before it is sent.
pub(super) struct RequestFacts {
    /// The request's path.
    pub path: String,
    /// Its `Mcp-Protocol-Version`.
    pub revision: Option<String>,
    /// With `--rescue`: the calls parked for this resumption.
    pub parked: Option<Parked>,
    /// The address the client reached the proxy at (not through the forward proxy).
    pub proxy_host: Option<String>,
    /// The ids as the client wrote them, for a rescue's answer (with `--rescue`).
    pub exact_ids: Vec<Box<RawValue>>,
    /// The request's JSON-RPC message, when something on the way reads it.
    pub message: Option<Value>,
    /// The request's body.
    pub body: bytes::Bytes,
}

impl RequestFacts {
    /// The request's id, for an error the proxy answers itself.
    pub(super) fn request_id(&self) -> Value {
        super::answer::request_id(self.message.as_ref(), &self.body)
    }

    /// The upstream's and the proxy's origins, for OAuth rewrites (none through the forward
    /// proxy, which names no proxy host): worked out only for a response that needs them.
    fn addresses(&self, shared: &Shared) -> Option<Addresses> {
        let upstream = shared.upstream_facts.oauth_origin.clone()?;
        Addresses::with_upstream(upstream, self.proxy_host.as_deref())
    }
}

/// The plan for one response.
pub(super) struct ResponsePlan {
    /// What the tap does with the body.
    pub body: BodyPlan,
    /// A protected-resource metadata document to rewrite naming the proxy.
    pub metadata: Option<Addresses>,
    /// The intercept holds the response until it is released.
    pub hold: bool,
    /// The `WWW-Authenticate` challenges rewritten in the head, to report after it.
    pub rewrites: Vec<Rewrite>,
}

impl ResponsePlan {
    /// Decides the plan and edits the head to match it: hop-by-hop headers go (a closing
    /// upstream is mirrored with `Connection: close`), OAuth challenges name the proxy, and a
    /// metadata document to rewrite loses its `Content-Length`.
    pub(super) fn decide(
        shared: &Shared,
        exchange: &Exchange,
        facts: &mut RequestFacts,
        head: &mut Parts,
    ) -> Self {
        // An upstream that closes its connection after this response (close-delimited body or
        // `Connection: close`) is mirrored: the client's connection closes after it too.
        let closes = closes_after(&head.headers);
        strip_hop_by_hop(&mut head.headers);
        if closes {
            head.headers.insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
        let declared = ContentKind::of(
            head.headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        let metadata_path = shared.metadata_paths.is_metadata_path(&facts.path);
        let content = content_kind(declared, oauth_body(&facts.path, metadata_path));
        let challenged = head.headers.contains_key(http::header::WWW_AUTHENTICATE);
        let rewrites = match challenged.then(|| facts.addresses(shared)).flatten() {
            Some(addresses) => oauth::rewrite_challenges(&mut head.headers, &addresses),
            None => Vec::new(),
        };
        for rewrite in &rewrites {
            shared.metadata_paths.learn(rewrite);
        }
        let method = exchange.http_method.as_str();
        let metadata = oauth::is_metadata(
            method,
            metadata_path,
            head.status,
            declared == ContentKind::Json,
        )
        .then(|| facts.addresses(shared))
        .flatten();
        if metadata.is_some() {
            // Its length changes when it is rewritten.
            head.headers.remove(http::header::CONTENT_LENGTH);
        }
        let content_length = head
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let session = exchange.session.clone().or_else(|| {
            head.headers
                .get(crate::headers::MCP_SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        });
        let choice = shared.config.rescue.then(|| {
            rescue_choice(
                method,
                content,
                content_length.is_some(),
                facts.parked.is_some() && session.is_some(),
            )
        });
        let message = facts.message.as_ref();
        let rescue = match choice.flatten() {
            Some(RescueChoice::Json) => Rescue::for_json_request(message, &facts.exact_ids),
            Some(RescueChoice::Resuming) => facts
                .parked
                .take()
                .zip(session.clone())
                .map(|(parked, session)| Rescue::resuming(parked, session)),
            Some(RescueChoice::Request) => Rescue::for_request(
                message,
                &facts.exact_ids,
                facts.revision.as_deref(),
                session.clone(),
            ),
            None => None,
        };
        let endpoint = rewrites_endpoint(method, content, content_length.is_some())
            .then_some(facts.proxy_host.as_deref())
            .flatten()
            .map(EndpointRewriter::new);
        let hold = holds(
            metadata.is_some(),
            content,
            shared.intercept.matches(message),
        );
        Self {
            body: BodyPlan {
                content,
                content_length,
                session,
                rescue,
                endpoint,
            },
            metadata,
            hold,
            rewrites,
        }
    }
}

/// Whether the response belongs to OAuth (an authorization endpoint, or a metadata document):
/// its body is not MCP.
fn oauth_body(path: &str, metadata_path: bool) -> bool {
    endpoint_label(path).is_some() || metadata_path
}

/// The body as tapped: what its head declares, except that an OAuth body is forwarded and
/// counted, never parsed.
fn content_kind(declared: ContentKind, oauth_body: bool) -> ContentKind {
    if oauth_body {
        ContentKind::Other
    } else {
        declared
    }
}

/// Which rescue a response's calls get (with `--rescue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RescueChoice {
    /// A JSON answer to a POST: its calls, answered in the body itself.
    Json,
    /// An SSE resumption of parked calls.
    Resuming,
    /// An SSE answer to a POST: its calls.
    Request,
}

/// The rescue for a response: a JSON body only when its length was not promised in the head;
/// an SSE body resumes the parked calls (`resumes`: some were parked for it, in a session) or
/// carries a POST's own.
fn rescue_choice(
    method: &str,
    content: ContentKind,
    has_length: bool,
    resumes: bool,
) -> Option<RescueChoice> {
    match content {
        ContentKind::Json => (method == "POST" && !has_length).then_some(RescueChoice::Json),
        ContentKind::Sse if resumes => Some(RescueChoice::Resuming),
        ContentKind::Sse => (method == "POST").then_some(RescueChoice::Request),
        _ => None,
    }
}

/// Whether the stream's first event may be a legacy `endpoint` to rewrite: a GET's SSE stream
/// of no promised length.
fn rewrites_endpoint(method: &str, content: ContentKind, has_length: bool) -> bool {
    method == "GET" && content == ContentKind::Sse && !has_length
}

/// Whether the intercept holds the response: a JSON answer (not a metadata document) to a
/// request it matches.
fn holds(metadata: bool, content: ContentKind, matches: bool) -> bool {
    !metadata && content == ContentKind::Json && matches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oauth_body_is_never_parsed() {
        assert_eq!(
            content_kind(ContentKind::Json, true),
            ContentKind::Other,
            "a metadata document or token answer is not MCP"
        );
        assert_eq!(content_kind(ContentKind::Sse, false), ContentKind::Sse);
        assert!(oauth_body("/token", false));
        assert!(oauth_body("/mcp", true));
        assert!(!oauth_body("/mcp", false));
    }

    #[test]
    fn a_json_body_is_rescued_only_without_a_promised_length() {
        assert_eq!(
            rescue_choice("POST", ContentKind::Json, false, false),
            Some(RescueChoice::Json)
        );
        assert_eq!(rescue_choice("POST", ContentKind::Json, true, false), None);
        assert_eq!(rescue_choice("GET", ContentKind::Json, false, false), None);
    }

    #[test]
    fn an_sse_body_resumes_parked_calls_or_carries_its_posts() {
        assert_eq!(
            rescue_choice("GET", ContentKind::Sse, false, true),
            Some(RescueChoice::Resuming)
        );
        assert_eq!(
            rescue_choice("POST", ContentKind::Sse, true, false),
            Some(RescueChoice::Request)
        );
        assert_eq!(rescue_choice("GET", ContentKind::Sse, false, false), None);
        assert_eq!(
            rescue_choice("POST", ContentKind::Other, false, false),
            None
        );
    }

    #[test]
    fn only_an_unbounded_get_stream_may_carry_an_endpoint_to_rewrite() {
        assert!(rewrites_endpoint("GET", ContentKind::Sse, false));
        assert!(!rewrites_endpoint("GET", ContentKind::Sse, true));
        assert!(!rewrites_endpoint("POST", ContentKind::Sse, false));
        assert!(!rewrites_endpoint("GET", ContentKind::Json, false));
    }

    #[test]
    fn the_intercept_holds_matched_json_answers_only() {
        assert!(holds(false, ContentKind::Json, true));
        assert!(!holds(true, ContentKind::Json, true));
        assert!(!holds(false, ContentKind::Sse, true));
        assert!(!holds(false, ContentKind::Json, false));
    }
}
