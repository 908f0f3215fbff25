//! Responses the proxy gives itself (not the upstream), reported like any other.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::ProxyBody;
use crate::shared::Shared;
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_session::sink::header_list;

/// A whole body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// How a response the proxy made itself is recorded as ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ending {
    /// How the exchange ended.
    pub how: EndHow,
    /// Which side it is put down to.
    pub leg: Leg,
    /// Why, in words.
    pub detail: String,
    /// The client connection closes after the answer (`Connection: close`).
    pub closes: bool,
}

/// Answers one request from the proxy itself, reporting the head and the end (a clean one).
pub(crate) fn local(
    shared: &Shared,
    stream: StreamId,
    status: StatusCode,
    content_type: &str,
    body: String,
) -> Response<ProxyBody> {
    let ending = Ending {
        how: EndHow::Eof,
        leg: Leg::Upstream,
        detail: "answered by mcpscope".into(),
        closes: false,
    };
    local_ending(shared, stream, status, content_type, body, ending)
}

/// Answers one request from the proxy itself, reporting the head and the given end (the
/// exchange failed: the answer says why).
pub(crate) fn local_ending(
    shared: &Shared,
    stream: StreamId,
    status: StatusCode,
    content_type: &str,
    body: String,
    ending: Ending,
) -> Response<ProxyBody> {
    let len = body.len() as u64;
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    if ending.closes {
        response
            .headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    shared.sink.emit(EventKind::ResponseHead {
        stream,
        status: status.as_u16(),
        headers: header_list(response.headers()),
    });
    shared.sink.emit(EventKind::StreamEnded {
        stream,
        dir: Direction::ServerToClient,
        how: ending.how,
        leg: ending.leg,
        bytes: len,
        detail: Some(ending.detail),
    });
    response
}

/// A JSON-RPC error response body.
pub(crate) fn jsonrpc_error(id: Value, code: i64, message: &str) -> String {
    mcpscope_engine::wire::jsonrpc::error(&id, code, message).to_string()
}

/// The id of a single request, for errors the proxy answers itself: from its message when it
/// was parsed, from its bytes otherwise (`null` when it has none).
pub(crate) fn request_id(message: Option<&Value>, body: &[u8]) -> Value {
    /// A message's id, the rest of it skipped.
    #[derive(serde::Deserialize)]
    struct IdOnly {
        #[serde(default)]
        id: Value,
    }
    match message {
        Some(message) => message.get("id").cloned().unwrap_or(Value::Null),
        None => serde_json::from_slice::<IdOnly>(body).map_or(Value::Null, |m| m.id),
    }
}
