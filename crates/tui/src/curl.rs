//! A call's request as a `curl` command line: the same method, path, MCP headers and body, sent
//! to the proxy (so that the answer shows up as a new exchange), secrets redacted. Through a
//! forward proxy the command names the request's own server and the proxy (`--proxy`), trusting
//! the local CA for an `https://` server.

use std::path::Path;

use mcpscope_engine::model::{Call, Model};
use mcpscope_engine::redact::Redactor;

/// Request headers worth repeating; the rest (host, length, connection) are curl's own.
const KEPT: &[&str] = &[
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "authorization",
    "cookie",
];

/// Where a copied request goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target<'a> {
    /// A reverse proxy at `base` (`http://127.0.0.1:9000`): the request's path is sent there.
    Reverse {
        /// The proxy's base URL.
        base: &'a str,
    },
    /// A forward proxy at `proxy` (`http://127.0.0.1:9000`): the request goes to its own
    /// server through it.
    Forward {
        /// The proxy's URL, for `curl --proxy`.
        proxy: &'a str,
        /// The local CA's certificate, trusted for an `https://` server; when not known, the
        /// command asks `mcpscope ca` for it.
        ca_cert: Option<&'a Path>,
    },
}

/// The `curl` command that sends the call's request again through the proxy, with secrets (by
/// the default redaction rules) replaced by `[redacted]`; `None` when the call's request is not
/// held, or (through a forward proxy) its server is not known.
pub(crate) fn command(model: &Model, call: &Call, target: &Target) -> Option<String> {
    let stream = model.stream(call.request_stream)?;
    let message = model.request_message(call)?;
    let redactor = Redactor::new();
    let mut body = message.body.value();
    redactor.json(&mut body);
    let mut out = String::from("curl -sS -N");
    let url = match target {
        Target::Reverse { base } => format!("{}{}", base.trim_end_matches('/'), stream.path),
        Target::Forward { proxy, ca_cert } => {
            let origin = stream.origin.as_deref()?;
            if !origin.starts_with("http://") && !origin.starts_with("https://") {
                return None;
            }
            out.push_str(&format!(" --proxy {}", quote(proxy)));
            if origin.starts_with("https://") {
                match ca_cert {
                    Some(path) => {
                        out.push_str(&format!(" --cacert {}", quote(&path.display().to_string())))
                    }
                    None => out.push_str(r#" --cacert "$(mcpscope ca | head -n 1)""#),
                }
            }
            format!("{origin}{}", stream.path)
        }
    };
    out.push_str(&format!(" -X {} {}", stream.method, quote(&url)));
    for (name, value) in &stream.request_headers {
        let lower = name.to_ascii_lowercase();
        if !KEPT.contains(&lower.as_str()) {
            continue;
        }
        let value = redactor.header_value(name, value);
        out.push_str(&format!(" \\\n  -H {}", quote(&format!("{name}: {value}"))));
    }
    out.push_str(&format!(" \\\n  --data-raw {}", quote(&body.to_string())));
    Some(out)
}

/// Single-quotes a word for a POSIX shell.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_single_quotes() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
