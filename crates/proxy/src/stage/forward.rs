//! The last stage: the request goes upstream (on the client connection's own upstream
//! connection), a failure to get its response head is answered, and the response comes back
//! as its [`ResponsePlan`] says, its body tapped.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use super::read::ClientRequest;
use super::response::{RequestFacts, ResponsePlan};
use super::{Exchange, answer};
use crate::error::ProxyError;
use crate::headers::{host_of, strip_hop_by_hop, upstream_path};
use crate::oauth::{self, MetadataBody};
use crate::rescue::{self, Parked};
use crate::shared::{Shared, lock};
use crate::tap::{TapBody, TapContext};
use crate::upstream::{self, SendError, UpstreamConn};
use crate::{ConnSlot, ProxyBody};
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fault::{Plan, Release};
use mcpscope_engine::wire::observe;
use mcpscope_session::sink::HeldEvents;

/// With `--rescue`: the calls parked for this resumption (a GET with `Last-Event-ID`), if any.
fn parked_for(shared: &Shared, exchange: &Exchange, headers: &http::HeaderMap) -> Option<Parked> {
    if !shared.config.rescue || exchange.http_method != "GET" {
        return None;
    }
    let last = headers.get("last-event-id")?.to_str().ok()?;
    shared
        .parked
        .take(exchange.session.as_deref()?, last.trim())
}

/// A resumption refused by the upstream (`status`): its parked calls are answered with the
/// rescue's error on a stream of the proxy's own.
fn rescue_refused(
    shared: &Shared,
    exchange: &Exchange,
    parked: &Parked,
    status: StatusCode,
) -> Response<ProxyBody> {
    shared.unregister(exchange.stream);
    let message = format!(
        "{}; resumption refused ({}); mcpscope --rescue",
        parked.death,
        status.as_u16()
    );
    let (bytes, events) = rescue::answer(exchange.stream, parked.pending.clone(), &message);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let response = answer::local(
        shared,
        exchange.stream,
        StatusCode::OK,
        "text/event-stream",
        text,
    );
    for kind in events {
        shared.sink.emit(kind);
    }
    response
}

/// Why a request did not get a response head from the upstream.
enum UpstreamFailure {
    /// No connection could be made.
    Connect(String),
    /// The connection failed under the request.
    Failed(hyper::Error),
    /// No connection, or no response head, within its timeout.
    TimedOut(String),
}

/// A request ready to go upstream, and what its response's plan needs of it.
struct Outgoing {
    /// The request as the upstream gets it.
    request: Request<Full<Bytes>>,
    /// The server it goes to.
    target: Uri,
    /// What of it the response's plan depends on.
    facts: RequestFacts,
}

/// Sends the request upstream and answers with the tapped response; an unreachable upstream is
/// answered 502, one that does not connect or answer in time 504, with a JSON-RPC error carrying
/// the request's id; so is (502) one whose response head does not parse.
pub(crate) async fn forward(
    shared: &Arc<Shared>,
    link: ConnSlot,
    exchange: Exchange,
    request: ClientRequest,
    fault: Option<Plan>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let stream = exchange.stream;
    let sink = &shared.sink;
    let Outgoing {
        request,
        target,
        mut facts,
    } = match outgoing(shared, &exchange, request) {
        Ok(outgoing) => outgoing,
        Err(answered) => return Ok(*answered),
    };
    let control = shared.register(stream, &exchange.http_method, exchange.session.clone());
    let (response, upstream) = match send_upstream(shared, &link, &target, request).await {
        Ok(sent) => sent,
        Err(failure) => {
            let id = facts.request_id();
            return failed(shared, &exchange, &target, id, failure);
        }
    };
    if let Some(parked) = &facts.parked
        && !response.status().is_success()
    {
        return Ok(rescue_refused(shared, &exchange, parked, response.status()));
    }
    let (mut head, incoming) = response.into_parts();
    let plan = ResponsePlan::decide(shared, &exchange, &mut facts, &mut head);
    let response_head = EventKind::ResponseHead {
        stream,
        status: head.status.as_u16(),
        headers: Vec::new(),
    };
    sink.emit_headed(response_head, head.headers.clone());
    oauth::report_all(sink, stream, plan.rewrites);
    // A response the intercept will hold is recorded as it is then sent: its events wait.
    let held = plan.hold.then(|| sink.holding());
    let tap = TapBody::new(
        incoming,
        TapContext {
            stream,
            sink: held
                .as_ref()
                .map_or_else(|| sink.clone(), |(s, _)| s.clone()),
            reset: exchange.reset,
            shared: shared.clone(),
            fault,
            control,
            upstream: Some(upstream),
            link,
            body: plan.body,
        },
    );
    if let Some(addresses) = plan.metadata {
        let body = MetadataBody::new(tap.boxed_unsync(), addresses, sink.clone(), stream);
        return Ok(Response::from_parts(head, body.boxed_unsync()));
    }
    if let Some((_, held)) = held {
        return hold_response(shared, stream, &facts, head, tap, held).await;
    }
    Ok(Response::from_parts(head, tap.boxed_unsync()))
}

/// The request as the upstream gets it: its URI relative to the target, hop-by-hop headers
/// gone, the upstream's `Host` (unless `--pass-host`), `--upstream`'s userinfo as
/// `Authorization: Basic` (unless the client sent its own), HTTP/1.1. A URI that does not
/// resolve against the target is answered 400.
fn outgoing(
    shared: &Shared,
    exchange: &Exchange,
    request: ClientRequest,
) -> Result<Outgoing, Box<Response<ProxyBody>>> {
    let ClientRequest {
        mut parts,
        body,
        message,
        ..
    } = request;
    let revision = parts
        .headers
        .get(crate::headers::MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let parked = parked_for(shared, exchange, &parts.headers);
    // In forward-proxy mode the request names its server, and nothing is rewritten.
    let target = parts
        .extensions
        .get::<super::ForwardTarget>()
        .map(|t| t.0.clone());
    let forwarded = target.is_some();
    let target = target.unwrap_or_else(|| shared.config.upstream.clone());
    let path_and_query = match upstream_path(&target, &parts.uri) {
        Ok(path_and_query) => path_and_query,
        Err(e) => {
            let text = format!("mcpscope: bad request URI: {e}");
            let id = answer::request_id(message.as_ref(), &body);
            let body = answer::jsonrpc_error(id, -32600, &text);
            return Err(Box::new(answer::local(
                shared,
                exchange.stream,
                StatusCode::BAD_REQUEST,
                "application/json",
                body,
            )));
        }
    };
    // The address the client reached the proxy at, for a legacy `endpoint` rewrite and the
    // OAuth rewrites (whose origins are worked out only for a response that needs them).
    let proxy_host = oauth::client_host(&parts.headers, &parts.uri).filter(|_| !forwarded);
    let path = parts.uri.path().to_string();
    strip_hop_by_hop(&mut parts.headers);
    // With --pass-host the upstream sees the client's own Host (and Origin, always forwarded).
    if !shared.config.pass_host {
        let host = if forwarded {
            host_of(&target)
        } else {
            shared.upstream_facts.host.clone()
        };
        if let Some(host) = host {
            parts.headers.insert(http::header::HOST, host);
        }
    }
    // A userinfo in `--upstream` becomes `Authorization: Basic`, unless the client sent its own.
    if !parts.headers.contains_key(http::header::AUTHORIZATION)
        && !forwarded
        && let Some(value) = &shared.upstream_facts.basic
    {
        parts
            .headers
            .insert(http::header::AUTHORIZATION, value.clone());
    }
    parts.uri = Uri::from(path_and_query);
    parts.version = http::Version::HTTP_11;
    let exact_ids = if shared.config.rescue {
        rescue::exact_ids(&body)
    } else {
        Vec::new()
    };
    Ok(Outgoing {
        request: Request::from_parts(parts, Full::new(body.clone())),
        target,
        facts: RequestFacts {
            path,
            revision,
            parked,
            proxy_host,
            exact_ids,
            message,
            body,
        },
    })
}

/// The answer for a request that got no response head: 502 (unreachable, or a head that does
/// not parse) or 504 (timed out) with a JSON-RPC error carrying the request's `id`; a
/// connection that failed under the request ends the exchange with its kind of end.
fn failed(
    shared: &Shared,
    exchange: &Exchange,
    target: &Uri,
    id: serde_json::Value,
    failure: UpstreamFailure,
) -> Result<Response<ProxyBody>, ProxyError> {
    let stream = exchange.stream;
    match failure {
        UpstreamFailure::Connect(cause) => Ok(unreachable(
            shared,
            exchange,
            target,
            id,
            StatusCode::BAD_GATEWAY,
            cause,
        )),
        UpstreamFailure::TimedOut(cause) => Ok(unreachable(
            shared,
            exchange,
            target,
            id,
            StatusCode::GATEWAY_TIMEOUT,
            cause,
        )),
        UpstreamFailure::Failed(e) if mcpscope_transport::is_malformed(&e) => {
            shared.unregister(stream);
            let cause = upstream::error_text(&e);
            let reason = format!("the upstream's response head does not parse: {cause}");
            let body = answer::jsonrpc_error(id, -32000, &format!("mcpscope: {reason}"));
            let ending = answer::Ending {
                how: EndHow::Error,
                leg: Leg::Upstream,
                detail: reason,
                closes: false,
            };
            Ok(answer::local_ending(
                shared,
                stream,
                StatusCode::BAD_GATEWAY,
                "application/json",
                body,
                ending,
            ))
        }
        UpstreamFailure::Failed(e) => {
            shared.unregister(stream);
            let cause = upstream::error_text(&e);
            let (how, _) = mcpscope_transport::classify(&e);
            shared.sink.emit(EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                how,
                leg: Leg::Upstream,
                bytes: 0,
                detail: Some(format!("before the response head: {cause}")),
            });
            if how == EndHow::Reset {
                exchange.reset.set();
            }
            Err(ProxyError::Upstream(cause))
        }
    }
}

/// A JSON response to a request the intercept matches: read whole, held until released, then
/// sent as it came, edited, replaced by a 502 (dropped) or by an error. Its events (`held`, from
/// the tap) are reported at the release; an edited body is reported as sent.
async fn hold_response(
    shared: &Arc<Shared>,
    stream: StreamId,
    request: &RequestFacts,
    mut parts: http::response::Parts,
    tap: TapBody,
    held: HeldEvents,
) -> Result<Response<ProxyBody>, ProxyError> {
    let report = |events: Vec<EventKind>| {
        for kind in events {
            shared.sink.emit(kind);
        }
    };
    let body = match tap.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            report(held.take());
            return Err(e);
        }
    };
    let Some(released) = shared
        .intercept
        .hold_response(stream, request.message.as_ref(), &body)
    else {
        report(held.take());
        return Ok(Response::from_parts(parts, answer::full(body)));
    };
    let note = |text: String| {
        shared.sink.emit(EventKind::Note {
            stream: Some(stream),
            text,
        })
    };
    note("response held by the intercept".into());
    let id = || request.request_id();
    match released.await.unwrap_or(Release::Forward(None)) {
        Release::Forward(None) => {
            note("response released by the intercept: sent as it came".into());
            report(held.take());
            Ok(Response::from_parts(parts, answer::full(body)))
        }
        Release::Forward(Some(edited)) => {
            // The note says only that it was edited: a body in a note would escape redaction.
            // The message recorded is the one sent (redacted like any other).
            note("response released by the intercept: sent edited".into());
            report(as_sent(held.take(), stream, edited.as_bytes()));
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Ok(Response::from_parts(parts, answer::full(edited)))
        }
        Release::Drop => {
            note("response released by the intercept: dropped".into());
            report(held.take());
            Ok(local_response(
                StatusCode::BAD_GATEWAY,
                "text/plain",
                "mcpscope: the response was dropped by the intercept".into(),
            ))
        }
        Release::Error(message) => {
            note(format!(
                "response released by the intercept: replaced by an error: {message}"
            ));
            report(held.take());
            let body =
                answer::jsonrpc_error(id(), -32000, &format!("mcpscope intercept: {message}"));
            Ok(local_response(StatusCode::OK, "application/json", body))
        }
    }
}

/// A held response's events with its body as the client was sent it: the server's message (or
/// invalid body) replaced by the edited one, and the body's end counting the bytes sent.
fn as_sent(events: Vec<EventKind>, stream: StreamId, sent: &[u8]) -> Vec<EventKind> {
    let mut sent_message = Some(observe::message(stream, Direction::ServerToClient, sent));
    let mut out = Vec::with_capacity(events.len());
    for kind in events {
        match kind {
            EventKind::Message {
                dir: Direction::ServerToClient,
                ..
            }
            | EventKind::InvalidMessage {
                dir: Direction::ServerToClient,
                ..
            } => out.extend(sent_message.take()),
            EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                how,
                leg,
                detail,
                ..
            } => {
                // A body with no message of the server's still ends with the one sent.
                out.extend(sent_message.take());
                out.push(EventKind::StreamEnded {
                    stream,
                    dir: Direction::ServerToClient,
                    how,
                    leg,
                    bytes: sent.len() as u64,
                    detail,
                });
            }
            other => out.push(other),
        }
    }
    out.extend(sent_message);
    out
}

/// A response mcpscope makes in place of a held one (the exchange itself was reported whole).
fn local_response(status: StatusCode, content_type: &str, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(answer::full(body));
    *response.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    response
}

/// Answers for an upstream that could not be reached or did not answer in time, recording why
/// (the exchange's calls fail naming the cause).
fn unreachable(
    shared: &Shared,
    exchange: &Exchange,
    target: &Uri,
    id: serde_json::Value,
    status: StatusCode,
    cause: String,
) -> Response<ProxyBody> {
    let stream = exchange.stream;
    shared.unregister(stream);
    let upstream = target.to_string();
    let message = if status == StatusCode::GATEWAY_TIMEOUT {
        format!("mcpscope: upstream {upstream} timed out: {cause}")
    } else {
        format!("mcpscope: upstream {upstream} is unreachable: {cause}")
    };
    shared.sink.emit(EventKind::UpstreamUnreachable {
        stream,
        error: cause,
    });
    let body = answer::jsonrpc_error(id, -32000, &message);
    answer::local(shared, stream, status, "application/json", body)
}

/// Sends a request on the client connection's upstream connection (a new one when there is
/// none, or when the kept one was closing and never sent it), each step within its timeout.
async fn send_upstream(
    shared: &Shared,
    link: &ConnSlot,
    target: &Uri,
    request: Request<Full<Bytes>>,
) -> Result<(Response<Incoming>, UpstreamConn), UpstreamFailure> {
    let timeouts = shared.config.timeouts;
    let head_timeout = || {
        UpstreamFailure::TimedOut(format!(
            "no response head within {:?} (--response-head-timeout)",
            timeouts.response_head
        ))
    };
    let kept = lock(link, "upstream connection", &shared.sink).take();
    let mut request = request;
    if let Some(mut conn) = kept
        && conn.ready().await
    {
        match conn.send(request, timeouts.response_head).await {
            Ok(response) => return Ok((response, conn)),
            Err(SendError::NotSent(back, _)) => request = *back,
            Err(SendError::Failed(e)) => return Err(UpstreamFailure::Failed(e)),
            Err(SendError::TimedOut) => return Err(head_timeout()),
        }
    }
    let connecting = UpstreamConn::connect(&shared.upstream.connector, target);
    let mut conn = tokio::time::timeout(timeouts.connect, connecting)
        .await
        .map_err(|_| {
            UpstreamFailure::TimedOut(format!(
                "no connection within {:?} (--connect-timeout)",
                timeouts.connect
            ))
        })?
        .map_err(|e| UpstreamFailure::Connect(e.0))?;
    match conn.send(request, timeouts.response_head).await {
        Ok(response) => Ok((response, conn)),
        Err(SendError::NotSent(_, e) | SendError::Failed(e)) => Err(UpstreamFailure::Failed(e)),
        Err(SendError::TimedOut) => Err(head_timeout()),
    }
}
