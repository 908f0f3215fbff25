//! JSON: the values of secret keys wherever they appear in a body, and in a text that may hold
//! JSON (parsed; read raw when it does not parse) or a form body.

use std::borrow::Cow;

use serde_json::Value;

use super::{REDACTED, Redactor};

impl Redactor {
    /// Redacts secret values in a JSON value, wherever their keys appear; returns whether it
    /// changed anything.
    pub fn json(&self, value: &mut Value) -> bool {
        if !self.enabled {
            return false;
        }
        match value {
            Value::Object(map) => {
                let mut changed = false;
                for (key, item) in map.iter_mut() {
                    if self.is_secret_json_key(key) {
                        if item.as_str() != Some(REDACTED) {
                            *item = Value::String(REDACTED.to_string());
                            changed = true;
                        }
                    } else {
                        changed |= self.json(item);
                    }
                }
                changed
            }
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.json(item) | changed),
            _ => false,
        }
    }

    /// Redacts a text that may hold JSON or an `application/x-www-form-urlencoded` body
    /// (an OAuth token request); returns the redacted text when anything changed.
    pub fn text(&self, text: &str) -> Option<String> {
        if !self.enabled || text.is_empty() {
            return None;
        }
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            if !self.may_hold_secret_key(text) {
                return None;
            }
            return match serde_json::from_str::<Value>(text) {
                Ok(mut value) => self.json(&mut value).then(|| value.to_string()),
                // Text that does not parse (a brace missing, a cut body) still loses the values
                // of its secret keys.
                Err(_) => self.raw_json_keys(text),
            };
        }
        if text.contains('=')
            && !text.contains(char::is_whitespace)
            && let Cow::Owned(form) = self.params(text, '&')
        {
            return Some(form);
        }
        None
    }

    /// A cheap check before parsing: whether `text` has a key that is a secret's. It reads
    /// the text's strings as JSON does: a string followed by `:` is a key. A key with an
    /// escape in it (which parsing would decode) or a string that does not end counts as one
    /// that may be, so the text is then parsed (or, not parsing, read raw) as before.
    fn may_hold_secret_key(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            let Some(end) = string_end(bytes, i) else {
                return true;
            };
            let mut j = end;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if bytes.get(j) == Some(&b':') {
                let key = &text[i + 1..end - 1];
                if key.contains('\\') || self.is_secret_json_key(key) {
                    return true;
                }
            }
            i = end;
        }
        false
    }

    /// Redacts the values of secret keys in text that looks like JSON but does not parse:
    /// `"password": "…"` (any scalar, object or array, up to where it ends or the text does)
    /// becomes `"password": "[redacted]"`. Returns the text when anything changed.
    fn raw_json_keys(&self, text: &str) -> Option<String> {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut changed = false;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            let key_end = string_end(bytes, i);
            let Some(key_end) = key_end else { break };
            let key = &text[i + 1..key_end - 1];
            let mut j = key_end;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= bytes.len() || bytes[j] != b':' || !self.is_secret_json_key(key) {
                i = key_end;
                continue;
            }
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let value_end = value_end(bytes, j);
            if &text[j..value_end] != "\"[redacted]\"" && value_end > j {
                out.push_str(&text[copied..j]);
                out.push('"');
                out.push_str(REDACTED);
                out.push('"');
                copied = value_end;
                changed = true;
            }
            i = value_end.max(j);
        }
        if !changed {
            return None;
        }
        out.push_str(&text[copied..]);
        Some(out)
    }
}

/// The end (one past the closing quote) of the JSON string starting at `start`, if it closes.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end of the JSON value starting at `start`: a string, an object or array up to its
/// matching bracket, or a scalar up to a delimiter; the text's end when it does not close.
fn value_end(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        None => start,
        Some(b'"') => string_end(bytes, start).unwrap_or(bytes.len()),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = start;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i).unwrap_or(bytes.len());
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            bytes.len()
        }
        Some(_) => {
            let mut i = start;
            while i < bytes.len() && !matches!(bytes[i], b',' | b'}' | b']' | b'\n' | b'\r') {
                i += 1;
            }
            while i > start && bytes[i - 1].is_ascii_whitespace() {
                i -= 1;
            }
            i
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_keys_anywhere_and_oauth_forms() {
        let r = Redactor::new();
        let mut body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
            "name":"fetch","arguments":{"apiKey":"LEAK","nested":[{"password":"P"}],"q":"x"},
            "_meta":{"progressToken":7}}});
        assert!(r.json(&mut body));
        let text = body.to_string();
        assert!(!text.contains("LEAK") && !text.contains("\"P\""), "{text}");
        assert!(text.contains("\"progressToken\":7"), "{text}");
        let mut error = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}});
        assert!(!r.json(&mut error));
        let token =
            r#"{"access_token":"AT","refresh_token":"RT","id_token":"IT","token_type":"Bearer"}"#;
        let redacted = r.text(token).expect("a token response");
        assert!(!redacted.contains("AT\"") && !redacted.contains("RT") && !redacted.contains("IT"));
        assert!(redacted.contains("Bearer"));
        let form = "grant_type=authorization_code&code=C0DE&code_verifier=V&client_secret=S&redirect_uri=http%3A%2F%2Flocalhost";
        let redacted = r.text(form).expect("a form body");
        assert_eq!(
            redacted,
            "grant_type=authorization_code&code=[redacted]&code_verifier=[redacted]&client_secret=[redacted]&redirect_uri=http%3A%2F%2Flocalhost"
        );
        assert_eq!(r.text("plain words, nothing = here"), None);
        let custom = r.clone().with_json_keys(&["ssn"]);
        let mut v = json!({"SSN":"123"});
        assert!(custom.json(&mut v));
        assert_eq!(v, json!({"SSN": REDACTED}));
    }

    #[test]
    fn secret_keys_in_text_that_does_not_parse() {
        let r = Redactor::new();
        let text = r#"{"params":{"arguments":{"password":"P\"W","access_token":12345, "q":"x", "apiKey":{"a":[1,"}"]}}"#;
        let redacted = r.text(text).expect("redacted");
        assert_eq!(
            redacted,
            r#"{"params":{"arguments":{"password":"[redacted]","access_token":"[redacted]", "q":"x", "apiKey":"[redacted]"}"#
        );
        assert_eq!(r.text(&redacted), None);
        assert_eq!(r.text(r#"{"password":"#), None);
    }

    /// Only a key that is a secret's (whole, as parsing would read it) makes a text parsed:
    /// a key that merely contains one (`progressToken`), or a value that mentions one, does not.
    #[test]
    fn the_check_before_parsing_reads_keys_as_json_does() {
        let r = Redactor::new().with_json_keys(&["session-ticket"]);
        // (text, what it becomes; None: unchanged)
        let table: &[(&str, Option<&str>)] = &[
            (
                r#"{"method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#,
                None,
            ),
            (r#"{"note":"token: abc","text":"password\":1"}"#, None),
            (
                r#"{"a" : {"Access_Token" : "x"}}"#,
                Some(r#"{"a":{"Access_Token":"[redacted]"}}"#),
            ),
            (r#"{"\u0074oken":"x"}"#, Some(r#"{"token":"[redacted]"}"#)),
            (
                r#"[{"sessionTicket":"x"}]"#,
                Some(r#"[{"sessionTicket":"[redacted]"}]"#),
            ),
            (
                r#"{"clientSecret":"s","#,
                Some(r#"{"clientSecret":"[redacted]","#),
            ),
            (r#"{"a":"never ends"#, None),
            (r#"{"k":"\"token\":1"}"#, None),
        ];
        for &(text, want) in table {
            assert_eq!(r.text(text).as_deref(), want, "{text}");
        }
        let long = format!(r#"{{"{}":"v","token":"t"}}"#, "k".repeat(100));
        assert!(
            r.text(&long).is_some_and(|t| !t.contains(r#""t""#)),
            "{long}"
        );
        let unicode = r#"{"clé":"v","pässword":"x"}"#;
        assert_eq!(r.text(unicode), None);
    }
}
