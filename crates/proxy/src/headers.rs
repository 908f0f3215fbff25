//! Header helpers for both heads: hop-by-hop headers (RFC 9110 §7.6.1), whether a response
//! closes its connection, headers as recorded text pairs (unredacted: the hub's policy hides
//! secrets later), the upstream path and authority, and the loopback `Host` test.

use http::header::{HeaderMap, HeaderName};
use http::{Uri, uri::PathAndQuery};

/// Headers that belong to one connection and are never forwarded (named once, not parsed per
/// request).
const HOP_BY_HOP: [HeaderName; 9] = [
    http::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::PROXY_AUTHENTICATE,
    http::header::PROXY_AUTHORIZATION,
    http::header::TE,
    http::header::TRAILER,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
];

/// `Mcp-Session-Id`.
pub(crate) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
pub(crate) const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method`.
pub(crate) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`.
pub(crate) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Removes hop-by-hop headers, including those the `Connection` header names. A head without
/// any (most of them) is left as it is after one look at its names.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if !headers.keys().any(|name| HOP_BY_HOP.contains(name)) {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Whether an upstream response's connection closes after it: `Connection: close`, or a body
/// delimited by the close (neither `Content-Length` nor chunked).
pub(crate) fn closes_after(headers: &HeaderMap) -> bool {
    let has = |name: http::header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    has(http::header::CONNECTION, "close")
        || (!headers.contains_key(http::header::CONTENT_LENGTH)
            && !has(http::header::TRANSFER_ENCODING, "chunked"))
}

/// The path and query the upstream gets for a client's: the client's own, except that `/` means
/// the upstream's own path (the client's query kept).
pub(crate) fn upstream_path(upstream: &Uri, client: &Uri) -> Result<PathAndQuery, http::Error> {
    match (client.path(), client.path_and_query()) {
        ("/" | "", _) | (_, None) => {
            let base_path = upstream.path();
            let path_and_query = match client.query() {
                Some(q) => format!("{base_path}?{q}"),
                None => base_path.to_string(),
            };
            Ok(PathAndQuery::try_from(path_and_query)?)
        }
        (_, Some(own)) => Ok(own.clone()),
    }
}

/// The `Host` a request to `target` carries: its host and port only, a userinfo is never part
/// of it.
pub(crate) fn host_of(target: &Uri) -> Option<http::HeaderValue> {
    target
        .authority()
        .and_then(|a| http::HeaderValue::from_str(without_userinfo(a.as_str())).ok())
}

/// An authority without its userinfo (`user:pw@host:port` → `host:port`).
pub(crate) fn without_userinfo(authority: &str) -> &str {
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// Whether a `Host` header names this machine (`localhost`, `127.x.x.x`, `[::1]`, any port).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.');
    const SUBDOMAIN: &[u8] = b".localhost";
    let bytes = name.as_bytes();
    let subdomain = bytes.len() >= SUBDOMAIN.len()
        && bytes[bytes.len() - SUBDOMAIN.len()..].eq_ignore_ascii_case(SUBDOMAIN);
    if name.eq_ignore_ascii_case("localhost") || subdomain {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    #[test]
    fn hop_by_hop_headers_go_and_end_to_end_stay() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        h.insert("x-secret-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("mcp-session-id", HeaderValue::from_static("s1"));
        h.insert("last-event-id", HeaderValue::from_static("7"));
        strip_hop_by_hop(&mut h);
        let mut names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, ["last-event-id", "mcp-session-id"]);
    }

    #[test]
    fn the_upstream_path_keeps_the_clients_path_and_query() {
        let up: Uri = "http://127.0.0.1:8765/mcp".parse().expect("uri");
        let map = |p: &str| {
            upstream_path(&up, &p.parse().expect("uri"))
                .expect("map")
                .to_string()
        };
        assert_eq!(map("/mcp"), "/mcp");
        assert_eq!(map("/"), "/mcp");
        assert_eq!(map("/?x=1"), "/mcp?x=1");
        assert_eq!(map("/mcp?x=1"), "/mcp?x=1");
        assert_eq!(map("/other"), "/other");
        let full = |p: &str| {
            upstream_path(&up, &p.parse().expect("uri"))
                .expect("map")
                .to_string()
        };
        assert_eq!(full("http://127.0.0.1:9000/mcp?x=1"), "/mcp?x=1");
    }

    #[test]
    fn only_loopback_hosts_pass() {
        for ok in [
            "localhost",
            "localhost:9000",
            "127.0.0.1:9000",
            "127.1.2.3",
            "[::1]:9000",
            "LOCALHOST",
            "localhost.",
            "app.LocalHost:9000",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:9000",
            "10.0.0.1:80",
            "[2001:db8::1]:80",
            "127.0.0.1.evil.example",
            "evillocalhost",
            "app.localhost.evil.example",
            "é.localhos",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }
}
