//! The second stage: the request body, read whole (bounded by `limits.request_body` and
//! `timeouts.request_body`) and reported as a message. A body past the limit is answered 413, a
//! body whose framing is broken 400, a body that does not arrive in time 408; each names the
//! reason in a JSON-RPC error and in the recorded end.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use super::answer::{self, Ending};
use crate::ProxyBody;
use crate::error::ProxyError;
use crate::shared::Shared;
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::wire::{mirror, oauth, observe};

/// How much of an oversized body is read and dropped before the 413, so that the client reads
/// the answer instead of a reset from unread bytes.
const DRAIN_BYTES: usize = 8 * 1024 * 1024;

/// How long an oversized body is drained at most.
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// A request read whole.
#[derive(Debug)]
pub(crate) struct ClientRequest {
    /// Its head.
    pub parts: Parts,
    /// Its body.
    pub body: Bytes,
    /// The body's JSON-RPC message, when it is one and something on the way reads it
    /// ([`reads_message`]); [`answer::request_id`] finds the id in `body` otherwise.
    pub message: Option<Value>,
    /// Its message event, not yet reported: a request the intercept holds is reported when it
    /// is released, as it is then sent (edited or not).
    pub unreported: Option<EventKind>,
}

/// Why a request was not read whole.
pub(crate) enum Unread {
    /// The proxy answered it (413 too large, 400 broken framing, 408 too slow).
    Answered(Response<ProxyBody>),
    /// The client went away mid-body (both ends are recorded).
    Vanished(ProxyError),
}

/// What reading a body came to.
enum BodyRead {
    Whole(Bytes),
    TooLarge,
    Malformed(String),
    TimedOut(u64),
    Vanished(EndHow, String, u64),
}

/// Reads the body and reports its message (or why it is not one).
pub(crate) async fn read(
    req: Request<Incoming>,
    shared: &Shared,
    stream: StreamId,
) -> Result<ClientRequest, Unread> {
    let sink = &shared.sink;
    let limit = shared.config.limits.request_body;
    let timeout = shared.config.timeouts.request_body;
    let (parts, body) = req.into_parts();
    let body = match read_body(body, limit, timeout).await {
        BodyRead::Whole(body) => body,
        BodyRead::TooLarge => {
            let reason = format!("the request body exceeds the limit of {limit} bytes");
            return Err(refuse(
                shared,
                stream,
                StatusCode::PAYLOAD_TOO_LARGE,
                reason,
            ));
        }
        BodyRead::Malformed(cause) => {
            let reason = format!("the request body's framing is broken: {cause}");
            return Err(refuse(shared, stream, StatusCode::BAD_REQUEST, reason));
        }
        BodyRead::TimedOut(bytes) => {
            let reason = format!("request body not received within {timeout:?}");
            sink.emit(EventKind::StreamEnded {
                stream,
                dir: Direction::ClientToServer,
                how: EndHow::Error,
                leg: Leg::Client,
                bytes,
                detail: Some(reason.clone()),
            });
            let reason = format!("{reason} (--request-body-timeout)");
            return Err(refuse(shared, stream, StatusCode::REQUEST_TIMEOUT, reason));
        }
        BodyRead::Vanished(how, detail, bytes) => {
            sink.emit(EventKind::StreamEnded {
                stream,
                dir: Direction::ClientToServer,
                how,
                leg: Leg::Client,
                bytes,
                detail: Some(detail.clone()),
            });
            sink.emit(EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                how,
                leg: Leg::Client,
                bytes: 0,
                detail: Some(format!("the client went away mid-request: {detail}")),
            });
            return Err(Unread::Vanished(ProxyError::ClientVanished));
        }
    };
    // An OAuth endpoint's body (a form-encoded token request, a registration) is not MCP.
    let mcp = !body.is_empty() && oauth::endpoint_label(parts.uri.path()).is_none();
    let mut unreported = None;
    let mut message = None;
    if mcp && !reads_message(shared) {
        // Nothing on the way reads it: the hub parses it, and checks its mirror headers.
        let sent = mirrored(&parts.headers);
        let mirrored = mirror::checked(sent).then(|| mirror::MirroredOwned::of(sent));
        sink.emit_message(stream, Direction::ClientToServer, body.clone(), mirrored);
    } else if mcp {
        let kind = observe::message(stream, Direction::ClientToServer, &body);
        message = observe::message_body(&kind).cloned();
        if shared.intercept.matches(message.as_ref()) {
            unreported = Some(kind);
        } else {
            sink.emit(kind);
        }
        if let Some(msg) = &message
            && let Some(invalid) = mirror::report(stream, mirrored(&parts.headers), msg)
        {
            sink.emit(invalid);
        }
    }
    Ok(ClientRequest {
        parts,
        body,
        message,
        unreported,
    })
}

/// Whether something on the request's way reads its message: the intercept's filter, the
/// rule engine or the rescue.
fn reads_message(shared: &Shared) -> bool {
    shared.config.rescue
        || shared.intercept.armed()
        || shared
            .faults
            .planner(&shared.sink)
            .is_some_and(|planner| planner.reads_requests())
}

/// The request's mirrored headers.
fn mirrored(headers: &http::HeaderMap) -> mirror::Mirrored<'_> {
    use crate::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
    let get = |name| headers.get(name).and_then(|v| v.to_str().ok());
    mirror::Mirrored {
        version: get(MCP_PROTOCOL_VERSION),
        method: get(MCP_METHOD),
        name: get(MCP_NAME),
    }
}

/// Answers a request the proxy will not forward; the connection closes after the answer.
fn refuse(shared: &Shared, stream: StreamId, status: StatusCode, reason: String) -> Unread {
    let body = answer::jsonrpc_error(Value::Null, -32600, &format!("mcpscope: {reason}"));
    let ending = Ending {
        how: EndHow::Error,
        leg: Leg::Client,
        detail: reason,
        closes: true,
    };
    Unread::Answered(answer::local_ending(
        shared,
        stream,
        status,
        "application/json",
        body,
        ending,
    ))
}

/// Reads a request body whole, up to `limit` bytes and within `timeout`. A body that comes in
/// one piece (most do) is kept as it came, not copied.
async fn read_body(mut body: Incoming, limit: usize, timeout: Duration) -> BodyRead {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = BytesMut::new();
    let mut first: Option<Bytes> = None;
    loop {
        if body.is_end_stream() {
            return BodyRead::Whole(whole(first, buf));
        }
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            let read = first.as_ref().map_or(0, Bytes::len) + buf.len();
            return BodyRead::TimedOut(read as u64);
        };
        match frame {
            None => return BodyRead::Whole(whole(first, buf)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let read = first.as_ref().map_or(0, Bytes::len) + buf.len();
                    if read + data.len() > limit {
                        drain(body, read + data.len()).await;
                        return BodyRead::TooLarge;
                    }
                    match first.take() {
                        None if buf.is_empty() => first = Some(data),
                        earlier => {
                            if let Some(earlier) = earlier {
                                buf.extend_from_slice(&earlier);
                            }
                            buf.extend_from_slice(&data);
                        }
                    }
                }
            }
            Some(Err(e)) if mcpscope_transport::is_malformed(&e) => {
                return BodyRead::Malformed(e.to_string());
            }
            Some(Err(e)) => {
                let (how, detail) = match mcpscope_transport::classify(&e) {
                    (EndHow::Reset, detail) => (EndHow::Reset, detail),
                    (_, detail) => (EndHow::Cancelled, detail),
                };
                let read = first.as_ref().map_or(0, Bytes::len) + buf.len();
                return BodyRead::Vanished(how, detail, read as u64);
            }
        }
    }
}

/// The body read: its one piece as it came, or the pieces gathered.
fn whole(first: Option<Bytes>, buf: BytesMut) -> Bytes {
    match first {
        Some(only) => only,
        None => buf.freeze(),
    }
}

/// Reads and drops the rest of an oversized body (bounded in bytes and time).
async fn drain(mut body: Incoming, mut read: usize) {
    let deadline = tokio::time::Instant::now() + DRAIN_TIME;
    while read < DRAIN_BYTES {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => read += frame.data_ref().map_or(0, Bytes::len),
            _ => return,
        }
    }
}
