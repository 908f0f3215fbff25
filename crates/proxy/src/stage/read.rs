//! The second stage: the request body, read whole (bounded) and reported as a message.

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http::request::Parts;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use crate::error::ProxyError;
use crate::sink::EventSink;
use crate::transport;
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::wire::observe;

/// The most of a request body read before forwarding (JSON-RPC messages are small).
const REQUEST_CAP: usize = 64 * 1024 * 1024;

/// A request read whole.
#[derive(Debug)]
pub struct ClientRequest {
    /// Its head.
    pub parts: Parts,
    /// Its body.
    pub body: Bytes,
    /// The body's JSON-RPC message, when it is one.
    pub message: Option<Value>,
}

/// Reads the body and reports its message (or why it is not one).
pub async fn read(
    req: Request<Incoming>,
    sink: &EventSink,
    stream: StreamId,
    timeout: Duration,
) -> Result<ClientRequest, ProxyError> {
    let (parts, body) = req.into_parts();
    let body = read_body(body, sink, stream, timeout).await?;
    let message = if body.is_empty() {
        None
    } else {
        let kind = observe::message(stream, Direction::ClientToServer, &body);
        let message = observe::message_body(&kind).cloned();
        sink.emit(kind);
        message
    };
    Ok(ClientRequest {
        parts,
        body,
        message,
    })
}

/// Reads a request body whole (bounded in size and time), reporting a client that vanished or
/// stalled mid-body.
async fn read_body(
    mut body: Incoming,
    sink: &EventSink,
    stream: StreamId,
    timeout: Duration,
) -> Result<Bytes, ProxyError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = bytes::BytesMut::new();
    loop {
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            sink.emit(EventKind::StreamEnded {
                stream,
                dir: Direction::ClientToServer,
                how: EndHow::Error,
                leg: Leg::Client,
                bytes: buf.len() as u64,
                detail: Some(format!("request body not received within {timeout:?}")),
            });
            return Err(ProxyError::RequestBodyTimeout(timeout));
        };
        match frame {
            None => return Ok(buf.freeze()),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if buf.len() + data.len() > REQUEST_CAP {
                        return Err(ProxyError::RequestTooLarge);
                    }
                    buf.extend_from_slice(&data);
                }
            }
            Some(Err(e)) => {
                let (how, detail) = match transport::classify(&e) {
                    (EndHow::Reset, detail) => (EndHow::Reset, detail),
                    (_, detail) => (EndHow::Cancelled, detail),
                };
                sink.emit(EventKind::StreamEnded {
                    stream,
                    dir: Direction::ClientToServer,
                    how,
                    leg: Leg::Client,
                    bytes: buf.len() as u64,
                    detail: Some(detail),
                });
                return Err(ProxyError::ClientVanished);
            }
        }
    }
}
