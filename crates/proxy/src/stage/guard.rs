//! The first stage: whether a request may pass at all.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use super::Exchange;
use super::answer;
use crate::ProxyBody;
use crate::error::ProxyError;
use crate::forward::is_loopback_host;
use crate::shared::Shared;
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg};

/// Why a request is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Its `Host` is not a loopback name (DNS rebinding guard).
    NotLoopback(String),
    /// The server "died" (injected) and is still down.
    ServerDown,
}

/// Checks the `Host` guard, then the injected server-down window.
pub fn check(shared: &Shared, req: &Request<Incoming>) -> Result<(), Refusal> {
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    if !shared.config.allow_remote && !is_loopback_host(&host) {
        return Err(Refusal::NotLoopback(host));
    }
    if shared.is_down() {
        return Err(Refusal::ServerDown);
    }
    Ok(())
}

impl Refusal {
    /// Turns the request away: 403 for a foreign `Host`, a reset while the server is down.
    pub fn answer(
        self,
        shared: &Shared,
        exchange: &Exchange,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let stream = exchange.stream;
        match self {
            Refusal::NotLoopback(host) => {
                let message = format!(
                    "mcpscope: Host {host:?} is not a loopback name (DNS rebinding guard; see --allow-remote)"
                );
                Ok(answer::local(
                    shared,
                    stream,
                    StatusCode::FORBIDDEN,
                    "text/plain",
                    message,
                ))
            }
            Refusal::ServerDown => {
                shared.sink.emit(EventKind::FaultInjected {
                    stream,
                    fault: "refused".into(),
                    rule: Some("server-dies".into()),
                });
                shared.sink.emit(EventKind::StreamEnded {
                    stream,
                    dir: Direction::ServerToClient,
                    how: EndHow::Reset,
                    leg: Leg::Upstream,
                    bytes: 0,
                    detail: Some("injected: the server is down".into()),
                });
                exchange.reset.set();
                Err(ProxyError::ServerDown)
            }
        }
    }
}
