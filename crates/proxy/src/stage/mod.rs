//! The request pipeline, one stage a module: [`guard`] (may the request pass?), [`read`] (its
//! body, reported), [`hold`] (the intercept), [`plan`] (a fault for it, or a status answered at
//! once), [`forward`] (to the upstream, with the response body tapped as its
//! [`response`] plan says). [`answer`] holds the responses the proxy gives itself; [`pending`]
//! ends an exchange dropped before any of them answered.

pub(crate) mod answer;
pub(crate) mod forward;
pub(crate) mod guard;
pub(crate) mod hold;
pub(crate) mod pending;
pub(crate) mod plan;
pub(crate) mod read;
pub(crate) mod response;

use http::Request;
use hyper::body::Incoming;

use crate::conn::ResetFlag;
use crate::shared::Shared;
use mcpscope_engine::event::{EventKind, StreamId};
use mcpscope_engine::wire::oauth::Origin;

/// The server an MCP exchange of the forward proxy goes to (scheme and authority, path `/`),
/// carried in the request's extensions: the forward stage sends it there instead of to
/// `--upstream`, and nothing is rewritten toward the proxy's own address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForwardTarget(pub http::Uri);

/// One request–response exchange, as every stage sees it.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// Its id.
    pub stream: StreamId,
    /// The switch that resets the client connection (a no-op one on HTTP/2).
    pub reset: ResetFlag,
    /// The HTTP method.
    pub http_method: String,
    /// The MCP session the client named, if any.
    pub session: Option<String>,
    /// The server the request names through the forward proxy (`scheme://host[:port]`);
    /// `None` for `--upstream`'s ([`Exchange::server`]).
    pub target: Option<String>,
}

impl Exchange {
    /// Numbers the exchange and reports it opened.
    pub(crate) fn open(
        req: &Request<Incoming>,
        conn: u64,
        reset: ResetFlag,
        shared: &Shared,
    ) -> Self {
        let stream = shared.ids.stream();
        // On HTTP/2 a dead stream is reset on its own (RST_STREAM, from the body's error);
        // resetting the TCP connection would kill its sibling streams too.
        let reset = if req.version() == http::Version::HTTP_2 {
            ResetFlag::default()
        } else {
            reset
        };
        let http_method = req.method().as_str().to_string();
        let path = req
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.to_string());
        let session = req
            .headers()
            .get(crate::headers::MCP_SESSION_ID)
            .map(|v| mcpscope_engine::wire::lossy_text(v.as_bytes()).into_owned());
        // Named in the event only through the forward proxy; otherwise `proxy_started` names
        // the one upstream.
        let target = req
            .extensions()
            .get::<ForwardTarget>()
            .and_then(|target| Origin::text_of(&target.0.to_string()));
        let opened = EventKind::StreamOpened {
            stream,
            conn,
            method: http_method.clone(),
            path,
            headers: Vec::new(),
            origin: target.clone(),
        };
        shared.sink.emit_headed(opened, req.headers().clone());
        Self {
            stream,
            reset,
            http_method,
            session,
            target,
        }
    }

    /// The server it goes to (`scheme://host[:port]`): the request's own through the forward
    /// proxy, the upstream's otherwise.
    pub(crate) fn server<'a>(&'a self, shared: &'a Shared) -> Option<&'a str> {
        self.target
            .as_deref()
            .or(shared.upstream_facts.origin.as_deref())
    }
}
