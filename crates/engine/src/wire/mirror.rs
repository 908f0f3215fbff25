//! The request headers that mirror the JSON-RPC body (2026-07-28): `Mcp-Method` carries the
//! `method`, `Mcp-Name` the `params.name` (`tools/call`, `prompts/get`) or `params.uri`
//! (`resources/read`), possibly Base64-encoded as `=?base64?…?=`. A request whose headers
//! disagree with its body is an invalid message: intermediaries may route on the header while
//! the server acts on the body.

use serde_json::Value;

use crate::event::{Direction, EventKind, StreamId};

/// The first revision whose requests carry the mirror headers.
pub const FIRST_MIRRORED_VERSION: &str = "2026-07-28";

/// Whether a request sent with these headers is checked against its body at all: it names a
/// revision that requires the mirror, or mirrors something. [`mismatch`] finds nothing
/// otherwise.
pub fn checked(headers: Mirrored<'_>) -> bool {
    let required = headers
        .version
        .is_some_and(|v| crate::revision::at_least(v.trim(), FIRST_MIRRORED_VERSION));
    required || headers.method.is_some() || headers.name.is_some()
}

/// The body field `Mcp-Name` mirrors for `method`, if it has one.
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The mirror headers of one request, as sent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mirrored<'a> {
    /// `MCP-Protocol-Version`.
    pub version: Option<&'a str>,
    /// `Mcp-Method`.
    pub method: Option<&'a str>,
    /// `Mcp-Name`.
    pub name: Option<&'a str>,
}

/// [`Mirrored`] headers kept, for a request whose body is checked later (by the thread that
/// parses it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirroredOwned {
    /// `MCP-Protocol-Version`.
    pub version: Option<String>,
    /// `Mcp-Method`.
    pub method: Option<String>,
    /// `Mcp-Name`.
    pub name: Option<String>,
}

impl MirroredOwned {
    /// The headers kept.
    pub fn of(sent: Mirrored<'_>) -> Self {
        Self {
            version: sent.version.map(str::to_string),
            method: sent.method.map(str::to_string),
            name: sent.name.map(str::to_string),
        }
    }

    /// The headers, borrowed.
    pub fn borrowed(&self) -> Mirrored<'_> {
        Mirrored {
            version: self.version.as_deref(),
            method: self.method.as_deref(),
            name: self.name.as_deref(),
        }
    }
}

/// The `invalid_message` report of a request whose mirror headers disagree with its body (the
/// request is forwarded unchanged all the same).
pub fn report(stream: StreamId, sent: Mirrored<'_>, msg: &Value) -> Option<EventKind> {
    let reason = mismatch(sent, msg)?;
    Some(EventKind::InvalidMessage {
        stream,
        dir: Direction::ClientToServer,
        reason,
        raw: sent.quoted(),
    })
}

impl Mirrored<'_> {
    /// The headers as text, for the report of a mismatch.
    pub fn quoted(&self) -> String {
        let mut lines = Vec::new();
        if let Some(v) = self.method {
            lines.push(format!("Mcp-Method: {v}"));
        }
        if let Some(v) = self.name {
            lines.push(format!("Mcp-Name: {v}"));
        }
        lines.join("\n")
    }
}

/// Why the headers of a request disagree with its body (`msg`, a JSON-RPC request), naming
/// both values; `None` when they agree, or when neither header is sent by a revision that
/// does not require them.
pub fn mismatch(headers: Mirrored<'_>, msg: &Value) -> Option<String> {
    let method = msg.get("method").and_then(Value::as_str)?;
    msg.get("id")?;
    if !checked(headers) {
        return None;
    }
    match headers.method.map(str::trim) {
        None => {
            return Some(format!(
                "Mcp-Method header missing; the body's method is {method:?}"
            ));
        }
        Some(h) if h != method => {
            return Some(format!(
                "Mcp-Method header {h:?} does not match the body's method {method:?}"
            ));
        }
        Some(_) => {}
    }
    let field = name_field(method)?;
    let body = msg
        .get("params")
        .and_then(|p| p.get(field))
        .and_then(Value::as_str)?;
    match headers.name.map(str::trim) {
        None => Some(format!(
            "Mcp-Name header missing; the body's {field} is {body:?}"
        )),
        Some(h) if decode_value(h).as_deref() != Some(body) => Some(format!(
            "Mcp-Name header {h:?} does not match the body's {field} {body:?}"
        )),
        Some(_) => None,
    }
}

/// Decodes a mirrored header value: `=?base64?PAYLOAD?=` is Base64 of UTF-8, anything else is
/// taken as it is. `None` for a malformed encoding.
pub fn decode_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(payload) => String::from_utf8(base64_decode(payload)?).ok(),
        None => Some(value.to_string()),
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}})
    }

    fn h<'a>(method: Option<&'a str>, name: Option<&'a str>) -> Mirrored<'a> {
        Mirrored {
            version: Some("2026-07-28"),
            method,
            name,
        }
    }

    #[test]
    fn agreeing_headers_pass() {
        assert_eq!(
            mismatch(h(Some("tools/call"), Some("echo")), &call("echo")),
            None
        );
        assert_eq!(
            mismatch(
                h(Some("tools/call"), Some("=?base64?ZWNobw==?=")),
                &call("echo")
            ),
            None
        );
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        assert_eq!(mismatch(h(Some("tools/list"), None), &list), None);
        // Older revisions send neither header.
        let old = Mirrored {
            version: Some("2025-11-25"),
            ..Mirrored::default()
        };
        assert_eq!(mismatch(old, &call("echo")), None);
        // Notifications are not checked.
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled"});
        assert_eq!(mismatch(h(Some("x"), None), &note), None);
    }

    #[test]
    fn disagreeing_headers_name_both_values() {
        let why = mismatch(h(Some("tools/list"), Some("echo")), &call("echo")).expect("method");
        assert!(
            why.contains("\"tools/list\"") && why.contains("\"tools/call\""),
            "{why}"
        );
        let why = mismatch(h(Some("tools/call"), Some("poke")), &call("echo")).expect("name");
        assert!(
            why.contains("\"poke\"") && why.contains("\"echo\""),
            "{why}"
        );
        let why = mismatch(h(None, None), &call("echo")).expect("missing");
        assert!(why.contains("Mcp-Method header missing"), "{why}");
        let why = mismatch(h(Some("tools/call"), None), &call("echo")).expect("missing name");
        assert!(why.contains("Mcp-Name header missing"), "{why}");
        let read = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "a://b"}});
        let why = mismatch(h(Some("resources/read"), Some("a://c")), &read).expect("uri");
        assert!(why.contains("uri"), "{why}");
    }
}
