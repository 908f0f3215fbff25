//! DNS-rebinding protection of the test server: the `Host` and `Origin` of every request must
//! name this machine, not a domain that merely resolves to it.
//!
//! Allowed: `localhost` and IP literals (with or without a port). A rebinding attack needs a
//! domain name under the attacker's control, so IP literals are safe, and they keep a server
//! bound to `0.0.0.0` reachable by address. Anything else is answered `403 Forbidden`.

use std::net::IpAddr;

use http::{HeaderMap, header};

/// Why a request was refused, for the 403 body.
pub(crate) fn refusal(headers: &HeaderMap) -> Option<String> {
    if let Some(host) = headers.get(header::HOST) {
        let host = host.to_str().unwrap_or("");
        if !is_local_authority(host) {
            return Some(format!("Forbidden: Host {host:?} is not this machine"));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        // `null` is what a browser sends from an opaque origin (a file, a sandbox): no site.
        let authority = origin
            .split_once("://")
            .map(|(_, rest)| rest.split('/').next().unwrap_or(""));
        let ok = origin == "null" || authority.is_some_and(is_local_authority);
        if !ok {
            return Some(format!("Forbidden: Origin {origin:?} is not this machine"));
        }
    }
    None
}

/// Whether `host[:port]` (or `[v6]:port`) is `localhost` or an IP literal.
fn is_local_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, tail)) if tail.is_empty() || tail.starts_with(':') => inside,
            _ => return false,
        }
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).expect("host"));
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).expect("origin"));
        }
        h
    }

    #[test]
    fn local_names_pass_and_domains_are_refused() {
        for host in [
            "localhost",
            "localhost:8765",
            "127.0.0.1:9",
            "[::1]:80",
            "10.0.0.7",
        ] {
            assert!(refusal(&headers(host, None)).is_none(), "{host}");
        }
        for host in [
            "evil.example.com",
            "evil.example.com:8765",
            "localhost.evil.com",
            "[::1",
        ] {
            assert!(refusal(&headers(host, None)).is_some(), "{host}");
        }
        assert!(refusal(&headers("127.0.0.1:1", Some("http://localhost:3000"))).is_none());
        assert!(refusal(&headers("127.0.0.1:1", Some("null"))).is_none());
        let refused = refusal(&headers("127.0.0.1:1", Some("http://evil.example.com")));
        assert!(refused.is_some_and(|r| r.contains("evil.example.com")));
    }
}
