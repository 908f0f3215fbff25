//! The proxy's one error type: what can go wrong starting it, controlling it, and ending an
//! exchange abnormally (the error a response body hands hyper, which resets or cuts the stream).

use std::net::SocketAddr;

use mcpscope_engine::event::{EndHow, StreamId};

/// Everything that can go wrong in the proxy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The listening socket's address could not be read.
    #[error("cannot read the listening address: {0}")]
    LocalAddr(std::io::Error),
    /// TLS toward the upstream could not be set up.
    #[error("cannot set up TLS toward the upstream: {0}")]
    Tls(#[from] rustls::Error),
    /// A lock guarding shared state was poisoned by a panic elsewhere.
    #[error("the {0} lock was poisoned by a panic")]
    Poisoned(&'static str),
    /// A fault was aimed at a stream that is not live.
    #[error("stream #{0} is not live")]
    NotLive(StreamId),
    /// A fault was aimed at a stream that has just ended.
    #[error("stream #{0} has ended")]
    Ended(StreamId),
    /// The server "died" (injected): requests are refused for a while.
    #[error("server down (injected)")]
    ServerDown,
    /// The request body exceeded the proxy's bound.
    #[error("request body too large")]
    RequestTooLarge,
    /// The request body did not arrive within the request-body timeout.
    #[error("request body not received within {0:?}")]
    RequestBodyTimeout(std::time::Duration),
    /// The client went away while sending its request body.
    #[error("client vanished mid-request")]
    ClientVanished,
    /// The upstream failed before sending a response head.
    #[error("{0}")]
    Upstream(String),
    /// The upstream stream ended abnormally (or a fault ended it); the client's stream ends so.
    #[error("upstream stream ended: {}", .0.as_str())]
    StreamEnded(EndHow),
}
