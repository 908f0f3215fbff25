//! Between reading and planning: a request the intercept matches waits here until the view
//! releases it (forwarded as it was or edited, dropped, or answered with an error).

use bytes::Bytes;
use http::{Response, StatusCode};

use super::read::ClientRequest;
use super::{Exchange, answer};
use crate::ProxyBody;
use crate::shared::Shared;
use mcpscope_engine::event::EventKind;
use mcpscope_engine::fault::Release;

/// Holds the request if the intercept matches it; returns it to go on, or the proxy's answer.
pub async fn hold(
    shared: &Shared,
    exchange: &Exchange,
    mut request: ClientRequest,
) -> Result<ClientRequest, Response<ProxyBody>> {
    let stream = exchange.stream;
    let Some(released) = shared
        .intercept
        .hold(stream, request.message.as_ref(), &request.body)
    else {
        return Ok(request);
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
            Ok(request)
        }
        Release::Forward(Some(body)) => {
            note(format!(
                "released by the intercept: forwarded edited: {body}"
            ));
            request.message = serde_json::from_str(&body).ok();
            request.body = Bytes::from(body);
            request.parts.headers.remove(http::header::CONTENT_LENGTH);
            Ok(request)
        }
        Release::Drop => {
            note("released by the intercept: dropped".into());
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
            let id = answer::request_id(request.message.as_ref());
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
