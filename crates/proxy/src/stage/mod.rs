//! The request pipeline, one stage a module: [`guard`] (may the request pass?), [`read`] (its
//! body, reported), [`hold`] (the intercept), [`plan`] (a fault for it, or a status answered at once), [`forward`] (to the
//! upstream, with the response body tapped). [`answer`] holds the responses the proxy gives
//! itself; [`pending`] ends an exchange dropped before any of them answered.

pub mod answer;
pub mod forward;
pub mod guard;
pub mod hold;
pub mod pending;
pub mod plan;
pub mod read;

use std::sync::atomic::Ordering;

use http::Request;
use hyper::body::Incoming;

use crate::conn::ResetFlag;
use crate::forward::header_list;
use crate::shared::Shared;
use mcpscope_engine::event::{EventKind, StreamId, header};

/// One request–response exchange, as every stage sees it.
#[derive(Debug)]
pub struct Exchange {
    /// Its id.
    pub stream: StreamId,
    /// The switch that resets the client connection (a no-op one on HTTP/2).
    pub reset: ResetFlag,
    /// The HTTP method.
    pub http_method: String,
    /// The MCP session the client named, if any.
    pub session: Option<String>,
}

impl Exchange {
    /// Numbers the exchange and reports it opened.
    pub fn open(req: &Request<Incoming>, conn: u64, reset: ResetFlag, shared: &Shared) -> Self {
        let stream = shared.next_stream.fetch_add(1, Ordering::Relaxed);
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
        let headers = header_list(req.headers());
        let session = header(&headers, "mcp-session-id").map(str::to_string);
        shared.sink.emit(EventKind::StreamOpened {
            stream,
            conn,
            method: http_method.clone(),
            path,
            headers,
        });
        Self {
            stream,
            reset,
            http_method,
            session,
        }
    }
}
