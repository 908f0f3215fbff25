//! Which exchanges through the forward proxy are MCP (observed like reverse mode's) and which
//! are not (forwarded unchanged and only counted), decided from the request head alone.

use http::{HeaderMap, Method};

use mcpscope_engine::wire::oauth::endpoint_label;

/// Whether a request head belongs to MCP: it names an MCP session or revision; it is a POST of
/// JSON that accepts an SSE answer (Streamable HTTP asks clients to accept both); it is a GET
/// for SSE or a DELETE on an origin already seen speaking MCP; it is an OAuth exchange
/// (metadata, registration, token) or any JSON POST on such an origin (the legacy transport's
/// messages).
pub(crate) fn is_mcp(method: &Method, path: &str, headers: &HeaderMap, known_origin: bool) -> bool {
    if headers.contains_key("mcp-session-id") || headers.contains_key("mcp-protocol-version") {
        return true;
    }
    let accepts_sse = list_has(headers, http::header::ACCEPT, "text/event-stream");
    let json_body = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if *method == Method::POST && json_body && accepts_sse {
        return true;
    }
    if endpoint_label(path).is_some() {
        return true;
    }
    known_origin
        && (matches!(*method, Method::GET | Method::DELETE) && accepts_sse
            || *method == Method::DELETE
            || *method == Method::POST && json_body)
}

/// Whether a comma-separated header lists `token` (media types compared without parameters).
fn list_has(headers: &HeaderMap, name: http::header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case(token))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, http::HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn mcp_is_told_from_a_model_api_by_its_head() {
        let init = heads(&[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ]);
        assert!(is_mcp(&Method::POST, "/mcp", &init, false));
        let model = heads(&[
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ]);
        assert!(!is_mcp(&Method::POST, "/v1/messages", &model, false));
        let session = heads(&[("mcp-session-id", "abc")]);
        assert!(is_mcp(&Method::DELETE, "/mcp", &session, false));
        assert!(is_mcp(
            &Method::GET,
            "/.well-known/oauth-protected-resource/mcp",
            &HeaderMap::new(),
            false
        ));
        assert!(is_mcp(&Method::POST, "/token", &HeaderMap::new(), false));
        let sse = heads(&[("accept", "text/event-stream")]);
        assert!(!is_mcp(&Method::GET, "/events", &sse, false));
        assert!(is_mcp(&Method::GET, "/sse", &sse, true));
        assert!(!is_mcp(&Method::GET, "/logo.png", &HeaderMap::new(), true));
    }
}
