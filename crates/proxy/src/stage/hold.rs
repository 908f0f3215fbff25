//! Between reading and planning: a request the intercept matches waits here until the view
//! releases it (forwarded as it was or edited, dropped, or answered with an error).

use bytes::Bytes;
use http::{Response, StatusCode};

use super::read::ClientRequest;
use super::{Exchange, answer};
use crate::ProxyBody;
use crate::shared::Shared;
use mcpscope_engine::event::{Direction, EventKind};
use mcpscope_engine::fault::Release;
use mcpscope_engine::wire::observe;

/// Holds the request if the intercept matches it; returns it to go on, or the proxy's answer.
pub(crate) async fn hold(
    shared: &Shared,
    exchange: &Exchange,
    mut request: ClientRequest,
) -> Result<ClientRequest, Response<ProxyBody>> {
    let stream = exchange.stream;
    let Some(released) = shared
        .intercept
        .hold(stream, request.message.as_ref(), &request.body)
    else {
        if let Some(kind) = request.unreported.take() {
            shared.sink.emit(kind);
        }
        return Ok(request);
    };
    // The request's message is reported once released: as it is then sent.
    let unreported = request.unreported.take();
    let report = |kind: Option<EventKind>| {
        if let Some(kind) = kind {
            shared.sink.emit(kind);
        }
    };
    let note = |text: String| {
        shared.sink.emit(EventKind::Note {
            stream: Some(stream),
            text,
        })
    };
    note("held by the intercept".into());
    // The proxy going away (or the filter cleared) releases it unchanged.
    match released.await.unwrap_or(Release::Forward(None)) {
        Release::Forward(None) => {
            note("released by the intercept: forwarded as sent".into());
            report(unreported);
            Ok(request)
        }
        Release::Forward(Some(body)) => {
            // The message recorded is the one sent (redacted like any other); the note says
            // only that it was edited.
            note("released by the intercept: forwarded edited".into());
            let body = Bytes::from(body);
            let kind = observe::message(stream, Direction::ClientToServer, &body);
            request.message = observe::message_body(&kind).cloned();
            report(unreported.map(|_| kind));
            request.body = body;
            request.parts.headers.remove(http::header::CONTENT_LENGTH);
            Ok(request)
        }
        Release::Drop => {
            note("released by the intercept: dropped".into());
            report(unreported);
            Err(answer::local(
                shared,
                stream,
                StatusCode::BAD_GATEWAY,
                "text/plain",
                "mcpscope: the request was dropped by the intercept".into(),
            ))
        }
        Release::Error(message) => {
            note(format!(
                "released by the intercept: answered with an error: {message}"
            ));
            report(unreported);
            let id = answer::request_id(request.message.as_ref(), &request.body);
            Err(answer::local(
                shared,
                stream,
                StatusCode::OK,
                "application/json",
                answer::jsonrpc_error(id, -32000, &format!("mcpscope intercept: {message}")),
            ))
        }
    }
}
