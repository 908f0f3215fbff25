//! OAuth beside MCP: which paths are OAuth endpoints rather than MCP ones, and the two rewrites
//! that let a client's checks pass against the proxy's address (RFC 9728): the `resource` of a
//! protected-resource metadata document and the `resource_metadata` URL of a
//! `WWW-Authenticate` challenge. Only a URL naming the upstream's own origin is rewritten.

use serde_json::Value;

/// The path of the protected-resource metadata document (RFC 9728 §3), also the prefix of its
/// path-aware form (`/.well-known/oauth-protected-resource/mcp`).
pub const PRM_PATH: &str = "/.well-known/oauth-protected-resource";

/// What a non-MCP endpoint is, from its request path (the query ignored): `oauth metadata`
/// (any `/.well-known/…` document), `token request`, `client registration`, `authorization`;
/// `None` for every other path (MCP traffic).
pub fn endpoint_label(path: &str) -> Option<&'static str> {
    // Read as bytes: it runs on every request's path.
    let end = memchr::memchr2(b'?', b'#', path.as_bytes()).unwrap_or(path.len());
    let path = &path[..end];
    if path.starts_with("/.well-known/") {
        return Some("oauth metadata");
    }
    let path = path.trim_end_matches('/');
    let last = path.rfind('/').map_or(path, |slash| &path[slash + 1..]);
    match last {
        "token" => Some("token request"),
        "register" => Some("client registration"),
        "authorize" => Some("authorization"),
        _ => None,
    }
}

/// Whether a request path asks for the protected-resource metadata (plain or path-aware).
pub fn is_prm_path(path: &str) -> bool {
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.strip_prefix(PRM_PATH)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// An origin: scheme, host (lower case, IPv6 in brackets) and port (the scheme's default when
/// not written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// The host name or address.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Origin {
    /// Parses `scheme://authority[/…]` (user info is not allowed); `None` for anything else.
    pub fn of_url(url: &str) -> Option<(Self, &str)> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.is_empty() || authority.contains('@') {
            return None;
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        Some((
            Self {
                scheme,
                host: host.to_ascii_lowercase(),
                port,
            },
            tail,
        ))
    }

    /// The origin of a URL as text (`scheme://host[:port]`, see [`Origin::text`]), the name a
    /// server goes by in the model and the views; `None` when it is not an http(s) URL.
    pub fn text_of(url: &str) -> Option<String> {
        Self::of_url(url).map(|(origin, _)| origin.text())
    }

    /// Whether a server (an origin as [`Origin::text`] writes it, or a stdio process's name)
    /// goes by `name`: its whole origin, its host, or its `host:port`, ASCII case ignored. The
    /// one rule for `server=` in fault rules and `server:` in the view's filter.
    pub fn server_named(server: &str, name: &str) -> bool {
        if server.eq_ignore_ascii_case(name) {
            return true;
        }
        let Some((origin, _)) = Self::of_url(server) else {
            return false;
        };
        origin.host.eq_ignore_ascii_case(name)
            || format!("{}:{}", origin.host, origin.port).eq_ignore_ascii_case(name)
    }

    /// The origin of `scheme` and an `authority` (`host[:port]`, as in a `Host` header).
    pub fn of_authority(scheme: &str, authority: &str) -> Option<Self> {
        Self::of_url(&format!("{scheme}://{authority}")).map(|(o, _)| o)
    }

    /// Whether `other` is this origin; two loopback names (`localhost`, `127.0.0.1`, `[::1]`)
    /// with the same scheme and port count as the same.
    pub fn matches(&self, other: &Origin) -> bool {
        self.scheme == other.scheme
            && self.port == other.port
            && (self.host == other.host || (is_loopback(&self.host) && is_loopback(&other.host)))
    }

    /// `scheme://host[:port]`, the port written only when it is not the scheme's default.
    pub fn text(&self) -> String {
        let default = if self.scheme == "https" { 443 } else { 80 };
        if self.port == default {
            format!("{}://{}", self.scheme, self.host)
        } else {
            format!("{}://{}:{}", self.scheme, self.host, self.port)
        }
    }
}

fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, rest) = authority.split_at(end + 1);
        return match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?))),
        };
    }
    Some(match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// One rewrite: which field, and the URL before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// `resource` (metadata document) or `resource_metadata` (`WWW-Authenticate`).
    pub what: &'static str,
    /// The URL the upstream sent.
    pub from: String,
    /// The URL the client got.
    pub to: String,
}

/// Moves a URL from one origin to another, keeping its path, query and fragment; `None` when it
/// does not name `upstream`.
pub fn move_url(url: &str, upstream: &Origin, proxy: &Origin) -> Option<String> {
    let (origin, tail) = Origin::of_url(url.trim())?;
    upstream
        .matches(&origin)
        .then(|| format!("{}{tail}", proxy.text()))
}

/// Rewrites the `resource` of a protected-resource metadata document (a JSON object) when it
/// names the upstream; returns the new body (the rest of the document as it was, re-serialized)
/// and the rewrite, or `None` when nothing is to change.
pub fn rewrite_prm_body(
    body: &[u8],
    upstream: &Origin,
    proxy: &Origin,
) -> Option<(Vec<u8>, Rewrite)> {
    let mut doc: Value = serde_json::from_slice(body).ok()?;
    let resource = doc.get_mut("resource")?;
    let from = resource.as_str()?.to_string();
    let to = move_url(&from, upstream, proxy)?;
    *resource = Value::String(to.clone());
    let bytes = serde_json::to_vec(&doc).ok()?;
    Some((
        bytes,
        Rewrite {
            what: "resource",
            from,
            to,
        },
    ))
}

/// Rewrites the `resource_metadata` parameter of a `WWW-Authenticate` value (quoted or a bare
/// token, any case, among other parameters and challenges) when it names the upstream; every
/// other byte of the value is kept.
pub fn rewrite_www_authenticate(
    value: &str,
    upstream: &Origin,
    proxy: &Origin,
) -> Option<(String, Rewrite)> {
    let (start, end, quoted) = find_param(value, "resource_metadata")?;
    let raw = &value[start..end];
    let from = if quoted {
        unescape(raw)
    } else {
        raw.to_string()
    };
    let to = move_url(&from, upstream, proxy)?;
    let written = if quoted { escape(&to) } else { to.clone() };
    let text = format!("{}{written}{}", &value[..start], &value[end..]);
    Some((
        text,
        Rewrite {
            what: "resource_metadata",
            from,
            to,
        },
    ))
}

/// The byte range of a parameter's value (inside the quotes when quoted) and whether it was
/// quoted. Quoted strings are skipped while looking, so a name inside another value never
/// counts; an unterminated quoted value is not one.
fn find_param(value: &str, name: &str) -> Option<(usize, usize, bool)> {
    let bytes = value.as_bytes();
    let blank = |b: u8| b == b' ' || b == b'\t';
    let mut i = 0;
    let mut boundary = true;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' {
            i = closing_quote(bytes, i)? + 1;
            boundary = false;
            continue;
        }
        let here = &bytes[i..];
        if boundary
            && here.len() >= name.len()
            && here[..name.len()].eq_ignore_ascii_case(name.as_bytes())
        {
            let mut j = i + name.len();
            while j < bytes.len() && blank(bytes[j]) {
                j += 1;
            }
            if bytes.get(j) == Some(&b'=') {
                j += 1;
                while j < bytes.len() && blank(bytes[j]) {
                    j += 1;
                }
                if bytes.get(j) == Some(&b'"') {
                    return Some((j + 1, closing_quote(bytes, j)?, true));
                }
                let end = bytes[j..]
                    .iter()
                    .position(|&b| b == b',' || blank(b))
                    .map_or(bytes.len(), |k| j + k);
                return Some((j, end, false));
            }
        }
        boundary = c == b',' || blank(c);
        i += 1;
    }
    None
}

/// The index of the quote that closes the quoted string opened at `open`.
fn closing_quote(bytes: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins() -> (Origin, Origin) {
        (
            Origin::of_authority("http", "127.0.0.1:8000").expect("upstream"),
            Origin::of_authority("http", "127.0.0.1:9000").expect("proxy"),
        )
    }

    #[test]
    fn labels_of_non_mcp_endpoints() {
        assert_eq!(
            endpoint_label("/.well-known/oauth-protected-resource/mcp"),
            Some("oauth metadata")
        );
        assert_eq!(
            endpoint_label("/.well-known/oauth-authorization-server"),
            Some("oauth metadata")
        );
        assert_eq!(endpoint_label("/token"), Some("token request"));
        assert_eq!(endpoint_label("/oauth/token?x=1"), Some("token request"));
        assert_eq!(endpoint_label("/register"), Some("client registration"));
        assert_eq!(endpoint_label("/authorize?code=1"), Some("authorization"));
        assert_eq!(endpoint_label("/mcp"), None);
        assert_eq!(endpoint_label("/"), None);
        assert_eq!(endpoint_label("/tokens"), None);
        assert!(is_prm_path("/.well-known/oauth-protected-resource"));
        assert!(is_prm_path("/.well-known/oauth-protected-resource/mcp?x"));
        assert!(!is_prm_path("/.well-known/oauth-protected-resourcex"));
        assert!(!is_prm_path("/.well-known/oauth-authorization-server"));
    }

    #[test]
    fn origins_parse_and_match() {
        let (o, tail) = Origin::of_url("HTTP://LocalHost:80/mcp?x").expect("url");
        assert_eq!(o.text(), "http://localhost");
        assert_eq!(tail, "/mcp?x");
        let (v6, _) = Origin::of_url("https://[::1]:8443").expect("url");
        assert_eq!(v6.text(), "https://[::1]:8443");
        assert!(v6.matches(&Origin::of_authority("https", "127.0.0.1:8443").expect("o")));
        assert!(!v6.matches(&Origin::of_authority("http", "127.0.0.1:8443").expect("o")));
        assert!(Origin::of_url("http://user@host/").is_none());
        assert!(Origin::of_url("ftp://host/").is_none());
        assert!(Origin::of_url("http://host:x/").is_none());
    }

    #[test]
    fn prm_body_resource_is_moved_and_the_rest_kept() {
        let (up, px) = origins();
        let body = br#"{"resource":"http://127.0.0.1:8000/mcp","authorization_servers":["http://127.0.0.1:8000"],"scopes_supported":["a"]}"#;
        let (out, rw) = rewrite_prm_body(body, &up, &px).expect("rewritten");
        let doc: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(doc["resource"], "http://127.0.0.1:9000/mcp");
        // The authorization server is never rewritten.
        assert_eq!(doc["authorization_servers"][0], "http://127.0.0.1:8000");
        assert_eq!(doc["scopes_supported"][0], "a");
        assert_eq!(rw.what, "resource");
        assert_eq!(rw.from, "http://127.0.0.1:8000/mcp");
        assert_eq!(rw.to, "http://127.0.0.1:9000/mcp");
        // localhost and 127.0.0.1 are the same loopback origin.
        let body = br#"{"resource":"http://localhost:8000"}"#;
        let (out, _) = rewrite_prm_body(body, &up, &px).expect("rewritten");
        assert_eq!(out, br#"{"resource":"http://127.0.0.1:9000"}"#);
    }

    #[test]
    fn prm_body_naming_elsewhere_or_not_json_is_left_alone() {
        let (up, px) = origins();
        for body in [
            &br#"{"resource":"https://api.example.com/mcp"}"#[..],
            br#"{"resource":"http://127.0.0.1:8001/mcp"}"#,
            br#"{"resource":42}"#,
            br#"{"authorization_servers":[]}"#,
            b"not json",
        ] {
            assert!(rewrite_prm_body(body, &up, &px).is_none());
        }
    }

    #[test]
    fn www_authenticate_resource_metadata_quoted_among_params() {
        let (up, px) = origins();
        let value = r#"Bearer error="invalid_token", error_description="no, resource_metadata=\"x\"", resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp", scope="read write""#;
        let (out, rw) = rewrite_www_authenticate(value, &up, &px).expect("rewritten");
        assert_eq!(
            out,
            r#"Bearer error="invalid_token", error_description="no, resource_metadata=\"x\"", resource_metadata="http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp", scope="read write""#
        );
        assert_eq!(rw.what, "resource_metadata");
        assert_eq!(
            rw.from,
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn www_authenticate_bare_token_and_case() {
        let (up, px) = origins();
        let value = "Bearer Resource_Metadata = http://localhost:8000/.well-known/oauth-protected-resource,scope=x";
        let (out, rw) = rewrite_www_authenticate(value, &up, &px).expect("rewritten");
        assert_eq!(
            out,
            "Bearer Resource_Metadata = http://127.0.0.1:9000/.well-known/oauth-protected-resource,scope=x"
        );
        assert_eq!(
            rw.to,
            "http://127.0.0.1:9000/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn www_authenticate_without_or_elsewhere_is_left_alone() {
        let (up, px) = origins();
        for value in [
            r#"Bearer error="invalid_token""#,
            r#"Bearer resource_metadata="https://auth.example/.well-known/oauth-protected-resource""#,
            r#"Bearer x_resource_metadata="http://127.0.0.1:8000/""#,
            r#"Bearer realm="resource_metadata=http://127.0.0.1:8000/""#,
            r#"Basic realm="x""#,
        ] {
            assert!(
                rewrite_www_authenticate(value, &up, &px).is_none(),
                "{value}"
            );
        }
    }
}
