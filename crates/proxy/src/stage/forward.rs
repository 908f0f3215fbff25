//! The last stage: the request goes upstream (on the client connection's own upstream
//! connection) and the response comes back with its body tapped.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use super::read::ClientRequest;
use super::{Exchange, answer};
use crate::endpoint::EndpointRewriter;
use crate::error::ProxyError;
use crate::forward::{closes_after, header_list, strip_hop_by_hop, upstream_uri};
use crate::oauth::{self, Addresses, MetadataBody};
use crate::rescue::{self, Parked, Rescue};
use crate::shared::{Shared, lock};
use crate::tap::{TapBody, TapContext};
use crate::upstream::{self, SendError, UpstreamConn};
use crate::{ConnSlot, ProxyBody, transport};
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fault::{Plan, Release};
use mcpscope_engine::redact::UrlCredentials;
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::oauth::endpoint_label;

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

/// Sends the request upstream and answers with the tapped response; an unreachable upstream is
/// answered 502, one that does not connect or answer in time 504, with a JSON-RPC error carrying
/// the request's id; so is (502) one whose response head does not parse.
pub async fn forward(
    shared: &Arc<Shared>,
    link: ConnSlot,
    exchange: Exchange,
    request: ClientRequest,
    plan: Option<Plan>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let stream = exchange.stream;
    let sink = &shared.sink;
    let ClientRequest {
        mut parts,
        body,
        message,
        ..
    } = request;
    let id = || answer::request_id(message.as_ref());
    let revision = parts
        .headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let parked = parked_for(shared, &exchange, &parts.headers);
    let uri = match upstream_uri(&shared.config.upstream, &parts.uri) {
        Ok(uri) => uri,
        Err(e) => {
            let message = format!("mcpscope: bad request URI: {e}");
            let body = answer::jsonrpc_error(id(), -32600, &message);
            return Ok(answer::local(
                shared,
                stream,
                StatusCode::BAD_REQUEST,
                "application/json",
                body,
            ));
        }
    };
    // The address the client reached the proxy at, for a legacy `endpoint` rewrite.
    let proxy_host = oauth::client_host(&parts.headers, &parts.uri);
    let request_path = parts.uri.path().to_string();
    let addresses = Addresses::of(&shared.config.upstream, proxy_host.as_deref());
    strip_hop_by_hop(&mut parts.headers);
    // With --pass-host the upstream sees the client's own Host (and Origin, always forwarded).
    // The Host names the upstream's host and port only: a userinfo is never part of it.
    if let Some(authority) = uri
        .authority()
        .and_then(|a| HeaderValue::from_str(crate::forward::without_userinfo(a.as_str())).ok())
        .filter(|_| !shared.config.pass_host)
    {
        parts.headers.insert(http::header::HOST, authority);
    }
    // A userinfo in `--upstream` becomes `Authorization: Basic`, unless the client sent its own.
    if !parts.headers.contains_key(http::header::AUTHORIZATION)
        && let Some(credentials) = UrlCredentials::of(&shared.config.upstream.to_string())
        && let Ok(value) = HeaderValue::from_str(&credentials.basic())
    {
        parts.headers.insert(http::header::AUTHORIZATION, value);
    }
    parts.uri = uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
    parts.version = http::Version::HTTP_11;
    // The ids as the client wrote them, for a rescue's answer.
    let exact_ids = if shared.config.rescue {
        rescue::exact_ids(&body)
    } else {
        Vec::new()
    };
    let upstream_req = Request::from_parts(parts, Full::new(body));
    let control = shared.register(stream, &exchange.http_method, exchange.session.clone());

    let (response, upstream) = match send_upstream(shared, &link, upstream_req).await {
        Ok(sent) => sent,
        Err(UpstreamFailure::Connect(cause)) => {
            return Ok(unreachable(
                shared,
                &exchange,
                id(),
                StatusCode::BAD_GATEWAY,
                cause,
            ));
        }
        Err(UpstreamFailure::TimedOut(cause)) => {
            return Ok(unreachable(
                shared,
                &exchange,
                id(),
                StatusCode::GATEWAY_TIMEOUT,
                cause,
            ));
        }
        Err(UpstreamFailure::Failed(e)) if transport::is_malformed(&e) => {
            shared.unregister(stream);
            let cause = upstream::error_text(&e);
            let reason = format!("the upstream's response head does not parse: {cause}");
            let body = answer::jsonrpc_error(id(), -32000, &format!("mcpscope: {reason}"));
            let ending = answer::Ending {
                how: EndHow::Error,
                leg: Leg::Upstream,
                detail: reason,
                closes: false,
            };
            return Ok(answer::local_ending(
                shared,
                stream,
                StatusCode::BAD_GATEWAY,
                "application/json",
                body,
                ending,
            ));
        }
        Err(UpstreamFailure::Failed(e)) => {
            shared.unregister(stream);
            let cause = upstream::error_text(&e);
            let (how, _) = transport::classify(&e);
            sink.emit(EventKind::StreamEnded {
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
            return Err(ProxyError::Upstream(cause));
        }
    };

    if let Some(parked) = &parked
        && !response.status().is_success()
    {
        return Ok(rescue_refused(shared, &exchange, parked, response.status()));
    }
    let (mut parts, incoming) = response.into_parts();
    // An upstream that closes its connection after this response (close-delimited body or
    // `Connection: close`) is mirrored: the client's connection closes after it too.
    let closes = closes_after(&parts.headers);
    strip_hop_by_hop(&mut parts.headers);
    if closes {
        parts
            .headers
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    let declared = ContentKind::of(
        parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    // An OAuth endpoint's body is not MCP: it is forwarded and counted, never parsed.
    let metadata_path = shared.metadata_paths.is_metadata_path(&request_path);
    let content = if endpoint_label(&request_path).is_some() || metadata_path {
        ContentKind::Other
    } else {
        declared
    };
    let rewrites = match &addresses {
        Some(addresses) => oauth::rewrite_challenges(&mut parts.headers, addresses),
        None => Vec::new(),
    };
    for rewrite in &rewrites {
        shared.metadata_paths.learn(rewrite);
    }
    let metadata = addresses.filter(|_| {
        oauth::is_metadata(
            &exchange.http_method,
            metadata_path,
            parts.status,
            declared == ContentKind::Json,
        )
    });
    if metadata.is_some() {
        // Its length changes when it is rewritten.
        parts.headers.remove(http::header::CONTENT_LENGTH);
    }
    let content_length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    sink.emit(EventKind::ResponseHead {
        stream,
        status: parts.status.as_u16(),
        headers: header_list(&parts.headers),
    });
    oauth::report_all(sink, stream, rewrites);
    let session = exchange.session.or_else(|| {
        parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let rescue = match (parked, &session) {
        _ if !shared.config.rescue => None,
        // A JSON body can be rescued only when its length was not promised in the head.
        _ if content == ContentKind::Json => (exchange.http_method == "POST"
            && content_length.is_none())
        .then(|| Rescue::for_json_request(message.as_ref(), &exact_ids))
        .flatten(),
        _ if content != ContentKind::Sse => None,
        (Some(parked), Some(session)) => Some(Rescue::resuming(parked, session.clone())),
        _ if exchange.http_method == "POST" => Rescue::for_request(
            message.as_ref(),
            &exact_ids,
            revision.as_deref(),
            session.clone(),
        ),
        _ => None,
    };
    let endpoint =
        (exchange.http_method == "GET" && content == ContentKind::Sse && content_length.is_none())
            .then_some(proxy_host)
            .flatten()
            .map(|host| EndpointRewriter::new(&host));
    let tap = TapBody::new(
        incoming,
        TapContext {
            stream,
            sink: sink.clone(),
            reset: exchange.reset,
            content,
            content_length,
            session,
            shared: shared.clone(),
            plan,
            control,
            upstream: Some(upstream),
            link,
            rescue,
            endpoint,
        },
    );
    if let Some(addresses) = metadata {
        let body = MetadataBody::new(tap.boxed_unsync(), addresses, sink.clone(), stream);
        return Ok(Response::from_parts(parts, body.boxed_unsync()));
    }
    if content == ContentKind::Json && shared.intercept.matches(message.as_ref()) {
        return hold_response(shared, stream, message.as_ref(), parts, tap).await;
    }
    Ok(Response::from_parts(parts, tap.boxed_unsync()))
}

/// A JSON response to a request the intercept matches: read whole (and reported as usual), held
/// until released, then sent as it came, edited, replaced by a 502 (dropped) or by an error.
async fn hold_response(
    shared: &Arc<Shared>,
    stream: StreamId,
    request: Option<&serde_json::Value>,
    mut parts: http::response::Parts,
    tap: TapBody,
) -> Result<Response<ProxyBody>, ProxyError> {
    let body = tap.collect().await?.to_bytes();
    let Some(released) = shared.intercept.hold_response(stream, request, &body) else {
        return Ok(Response::from_parts(parts, answer::full(body)));
    };
    let note = |text: String| {
        shared.sink.emit(EventKind::Note {
            stream: Some(stream),
            text,
        })
    };
    note("response held by the intercept".into());
    let id = || answer::request_id(request);
    match released.await.unwrap_or(Release::Forward(None)) {
        Release::Forward(None) => {
            note("response released by the intercept: sent as it came".into());
            Ok(Response::from_parts(parts, answer::full(body)))
        }
        Release::Forward(Some(edited)) => {
            // The note says only that it was edited: a body in a note would escape redaction.
            note("response released by the intercept: sent edited".into());
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Ok(Response::from_parts(parts, answer::full(edited)))
        }
        Release::Drop => {
            note("response released by the intercept: dropped".into());
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
            let body =
                answer::jsonrpc_error(id(), -32000, &format!("mcpscope intercept: {message}"));
            Ok(local_response(StatusCode::OK, "application/json", body))
        }
    }
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
    id: serde_json::Value,
    status: StatusCode,
    cause: String,
) -> Response<ProxyBody> {
    let stream = exchange.stream;
    shared.unregister(stream);
    let upstream = shared.config.upstream.to_string();
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
        let sent = tokio::time::timeout(timeouts.response_head, conn.send(request)).await;
        match sent.map_err(|_| head_timeout())? {
            Ok(response) => return Ok((response, conn)),
            Err(SendError::NotSent(back, _)) => request = *back,
            Err(SendError::Failed(e)) => return Err(UpstreamFailure::Failed(e)),
        }
    }
    let connecting = UpstreamConn::connect(&shared.connector, &shared.config.upstream);
    let mut conn = tokio::time::timeout(timeouts.connect, connecting)
        .await
        .map_err(|_| {
            UpstreamFailure::TimedOut(format!(
                "no connection within {:?} (--connect-timeout)",
                timeouts.connect
            ))
        })?
        .map_err(|e| UpstreamFailure::Connect(e.0))?;
    let sent = tokio::time::timeout(timeouts.response_head, conn.send(request)).await;
    match sent.map_err(|_| head_timeout())? {
        Ok(response) => Ok((response, conn)),
        Err(SendError::NotSent(_, e) | SendError::Failed(e)) => Err(UpstreamFailure::Failed(e)),
    }
}
