//! The first stage: whether a request may pass at all.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use super::Exchange;
use super::answer;
use crate::ProxyBody;
use crate::error::ProxyError;
use crate::headers::is_loopback_host;
use crate::shared::Shared;
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg};

/// Why a request is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// More than one `Host` header (400).
    DuplicateHost,
    /// No `Host` on HTTP/1.1 (400).
    MissingHost,
    /// Its `Host` is neither a loopback name nor an allowed one (DNS rebinding guard, 403).
    ForeignHost(String),
    /// Its `Origin` is neither a loopback origin nor an allowed one (a web page, 403).
    ForeignOrigin(String),
    /// The server "died" (injected) and is still down.
    ServerDown,
}

/// Checks the `Host` and `Origin` guards, then the injected server-down window.
pub(crate) fn check(shared: &Shared, req: &Request<Incoming>) -> Result<(), Refusal> {
    let config = &shared.config;
    let mut hosts = req.headers().get_all(http::header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err(Refusal::DuplicateHost),
        (Some(h), None) => mcpscope_engine::wire::lossy_text(h.as_bytes()),
        (None, _) => match req.uri().authority() {
            // HTTP/2 names the host in `:authority`.
            Some(a) => a.as_str().into(),
            None if req.version() == http::Version::HTTP_11 => {
                return Err(Refusal::MissingHost);
            }
            None => "".into(),
        },
    };
    // A forward-proxy exchange names its own server: the Host is that server's, and there is
    // no proxy address to rebind.
    let forwarded = req.extensions().get::<super::ForwardTarget>().is_some();
    let guarded = !config.pass_host && !forwarded;
    if guarded && !host_allowed(&config.allow_hosts, &host) {
        return Err(Refusal::ForeignHost(host.into_owned()));
    }
    let origins = req.headers().get_all(http::header::ORIGIN);
    for origin in origins.iter().filter(|_| guarded) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        if !is_loopback_origin(&origin) && !names_allowed_origin(&config.allow_origins, &origin) {
            return Err(Refusal::ForeignOrigin(origin.into_owned()));
        }
    }
    if shared.upstream.is_down(&shared.sink) {
        return Err(Refusal::ServerDown);
    }
    Ok(())
}

/// Whether a request naming `host` (`name[:port]`) passes the DNS-rebinding guard: a loopback
/// name, or one of `allowed` (`--allow-host`). Every listener of ours guards with this.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    is_loopback_host(host) || names_allowed_host(allowed, host)
}

/// Whether `host` (`name[:port]`) is one of `allowed` (names, or `name:port` to pin a port).
pub(crate) fn names_allowed_host(allowed: &[String], host: &str) -> bool {
    let host = host.trim().trim_end_matches('.');
    let name = split_port(host).0;
    allowed.iter().any(|a| {
        let a = a.trim().trim_end_matches('.');
        a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name)
    })
}

/// Whether `origin` is one of `allowed` (compared without case or a trailing slash).
pub(crate) fn names_allowed_origin(allowed: &[String], origin: &str) -> bool {
    let origin = origin.trim().trim_end_matches('/');
    allowed
        .iter()
        .any(|a| a.trim().trim_end_matches('/').eq_ignore_ascii_case(origin))
}

/// Whether `origin` is `http(s)://` + `localhost`, `127.x.x.x` or `[::1]`, with an optional port.
pub(crate) fn is_loopback_origin(origin: &str) -> bool {
    let lower = origin.trim().to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        return false;
    };
    let (name, port) = split_port(rest);
    if port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit())) {
        return false;
    }
    if name == "localhost" || name == "[::1]" {
        return true;
    }
    name.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Splits `name[:port]` (an IPv6 name in brackets keeps its colons).
fn split_port(host: &str) -> (&str, Option<&str>) {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => {
                let (name, rest) = host.split_at(end + 1);
                (name, rest.strip_prefix(':'))
            }
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    }
}

impl Refusal {
    /// Turns the request away: 400 for a bad `Host`, 403 for a foreign `Host` or `Origin` (with
    /// a JSON-RPC error saying why), a reset while the server is down.
    pub(crate) fn answer(
        self,
        shared: &Shared,
        exchange: &Exchange,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let stream = exchange.stream;
        match self {
            Refusal::DuplicateHost => Ok(refuse(
                shared,
                stream,
                StatusCode::BAD_REQUEST,
                "mcpscope: more than one Host header".into(),
            )),
            Refusal::MissingHost => Ok(refuse(
                shared,
                stream,
                StatusCode::BAD_REQUEST,
                "mcpscope: an HTTP/1.1 request needs a Host header".into(),
            )),
            Refusal::ForeignHost(host) => Ok(refuse(
                shared,
                stream,
                StatusCode::FORBIDDEN,
                format!(
                    "mcpscope: Host {host:?} is not a loopback name (DNS rebinding guard; add --allow-host NAME for the names remote clients use)"
                ),
            )),
            Refusal::ForeignOrigin(origin) => Ok(refuse(
                shared,
                stream,
                StatusCode::FORBIDDEN,
                format!(
                    "mcpscope: Origin {origin:?} is not a loopback origin (a web page may not call the proxy; add --allow-origin ORIGIN to let it)"
                ),
            )),
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

/// A refusal answered by the proxy with a JSON-RPC error body saying why (the request's id is
/// not known: its body is never read).
fn refuse(
    shared: &Shared,
    stream: mcpscope_engine::event::StreamId,
    status: StatusCode,
    message: String,
) -> Response<ProxyBody> {
    let body = answer::jsonrpc_error(serde_json::Value::Null, -32600, &message);
    answer::local(shared, stream, status, "application/json", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_origins() {
        for o in [
            "http://localhost",
            "http://localhost:6274",
            "https://127.0.0.1:9",
            "http://127.1.2.3",
            "http://[::1]:80",
            "HTTP://LOCALHOST",
        ] {
            assert!(is_loopback_origin(o), "{o}");
        }
        for o in [
            "http://evil.com",
            "null",
            "http://localhost.evil.com",
            "http://127.0.0.1.evil.com",
            "file://localhost",
            "http://localhost:",
            "http://localhost:80/x",
            "http://[::2]",
        ] {
            assert!(!is_loopback_origin(o), "{o}");
        }
    }

    #[test]
    fn allowed_hosts_and_origins() {
        let hosts = vec!["box.lan".to_string(), "10.0.0.2:9000".to_string()];
        assert!(names_allowed_host(&hosts, "box.lan:9000"));
        assert!(names_allowed_host(&hosts, "BOX.LAN"));
        assert!(names_allowed_host(&hosts, "10.0.0.2:9000"));
        assert!(!names_allowed_host(&hosts, "10.0.0.2:9001"));
        assert!(!names_allowed_host(&hosts, "evil.com"));
        let origins = vec!["https://app.example/".to_string()];
        assert!(names_allowed_origin(&origins, "https://app.example"));
        assert!(!names_allowed_origin(&origins, "http://app.example"));
    }
}
