//! A call's request as a `curl` command line: the same method, path, MCP headers and body, sent
//! to the proxy (so that the answer shows up as a new exchange), secrets redacted.

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

/// The `curl` command that sends the call's request again to `base` (`http://127.0.0.1:9000`),
/// with secrets (by the default redaction rules) replaced by `[redacted]`.
pub fn command(model: &Model, call: &Call, base: &str) -> Option<String> {
    let stream = model.stream(call.request_stream)?;
    let message = model.request_message(call)?;
    let redactor = Redactor::new();
    let mut body = message.body.value();
    redactor.json(&mut body);
    let url = format!("{}{}", base.trim_end_matches('/'), stream.path);
    let mut out = format!("curl -sS -N -X {} {}", stream.method, quote(&url));
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
