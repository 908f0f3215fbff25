//! A message as the model keeps it: its JSON text, parsed when it is read.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// One JSON-RPC message held as compact JSON text (a few hundred bytes where its parsed tree
/// takes a kilobyte or more), shared between the copies of a model and parsed when read: the
/// model keeps thousands of messages and views read a screenful.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Body(Arc<str>);

impl Body {
    /// The message's compact JSON text.
    pub fn new(value: &Value) -> Self {
        // Straight into a buffer (a value's `Display` goes through the formatter per token);
        // a value always serializes, the fallback is never taken.
        let text = serde_json::to_string(value).unwrap_or_else(|_| value.to_string());
        Self(text.into())
    }

    /// The message's compact JSON text, taken from `text` (the SSE data the message was parsed
    /// from, unchanged; shared, not copied) when it is exactly what [`Body::new`] would write,
    /// else written out. `text` must parse to `value`; the check reads it once and writes
    /// nothing.
    pub fn of(value: &Value, text: &Arc<str>) -> Self {
        if writes_as(text, value) {
            Self(Arc::clone(text))
        } else {
            Self::new(value)
        }
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// Bytes of JSON text.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no text at all (never for a body made by [`Body::new`]).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `other` is this very text (shared), not an equal copy.
    pub fn is_shared_with(&self, other: &Body) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The message, parsed (`null` if the text is not JSON, which [`Body::new`] never makes).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// One member of the message, parsed (`None` when it is absent or the message is no object).
    pub fn member(&self, key: &str) -> Option<Value> {
        match self.value() {
            Value::Object(mut map) => map.swap_remove(key),
            _ => None,
        }
    }
}

/// Nesting past which [`writes_as`] says no: well under the parser's limit, past which a
/// message is kept with its deepest members cut ([`crate::wire::jsonrpc::parse_body`]) and no
/// longer parses back from its text.
const NESTING_TAKEN: usize = 64;

/// Whether `text`, which parses to `value`, is what `serde_json` writes for `value`: no space
/// outside strings, in strings only the escapes the writer uses, integers only (a fraction or
/// an exponent may be written back otherwise), no key given twice (the parsed object keeps
/// one), nesting under [`NESTING_TAKEN`]. Conservative: `false` only costs a write.
fn writes_as(text: &str, value: &Value) -> bool {
    let bytes = text.as_bytes();
    let mut keys = 0usize;
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'{' | b'[' => {
                depth += 1;
                if depth >= NESTING_TAKEN {
                    return false;
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                i += 1;
                loop {
                    let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
                        return false;
                    };
                    i += at;
                    if bytes[i] == b'"' {
                        i += 1;
                        break;
                    }
                    // The writer's own escapes; `\u…` and `\/` may be written back otherwise.
                    match bytes.get(i + 1) {
                        Some(b'"' | b'\\' | b'n' | b'r' | b't' | b'b' | b'f') => i += 2,
                        _ => return false,
                    }
                }
                if bytes.get(i) == Some(&b':') {
                    keys += 1;
                }
            }
            b'-' | b'0'..=b'9' => {
                let negative = b == b'-';
                let start = i + usize::from(negative);
                let mut end = start;
                while bytes.get(end).is_some_and(u8::is_ascii_digit) {
                    end += 1;
                }
                let digits = &bytes[start..end];
                // 18 digits always fit an i64 or a u64, written back digit for digit.
                let plain = !digits.is_empty()
                    && digits.len() <= 18
                    && (digits.len() == 1 || digits[0] != b'0')
                    && !(negative && digits == b"0");
                if !plain || matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) {
                    return false;
                }
                i = end;
            }
            b' ' | b'\t' | b'\n' | b'\r' => return false,
            _ => i += 1,
        }
    }
    keys == key_count(value)
}

/// Keys in every object of `value`.
fn key_count(value: &Value) -> usize {
    match value {
        Value::Object(map) => map.len() + map.values().map(key_count).sum::<usize>(),
        Value::Array(items) => items.iter().map(key_count).sum(),
        _ => 0,
    }
}

impl Default for Body {
    /// An empty object, `{}`.
    fn default() -> Self {
        Self("{}".into())
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&Value> for Body {
    fn from(value: &Value) -> Self {
        Self::new(value)
    }
}

/// Written as the JSON it is (not as a string of it), so a saved model stays small and reads
/// back without unescaping.
impl serde::Serialize for Body {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match serde_json::value::RawValue::from_string(self.0.to_string()) {
            Ok(raw) => raw.serialize(serializer),
            Err(_) => serializer.serialize_str(&self.0),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Body {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        Ok(Self(raw.get().into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_reads_back_the_message_it_was_made_of() {
        for v in [
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","z":1.5,"a":[1,"two",null]}}),
            json!("raw text of an invalid message"),
            json!([{"jsonrpc":"2.0","id":"a","result":{}}]),
            json!({"big": u64::MAX, "neg": i64::MIN, "f": 0.1}),
        ] {
            let body = Body::new(&v);
            assert_eq!(body.value(), v);
            assert_eq!(body.text(), v.to_string());
        }
        let body = Body::new(&json!({"b":1,"a":{"c":2}}));
        assert_eq!(body.member("a"), Some(json!({"c":2})));
        assert_eq!(body.member("missing"), None);
        assert_eq!(Body::default().value(), json!({}));
        let message = Body::new(&json!({"a":"x\"y","b":[1,2]}));
        let saved = serde_json::to_string(&message).expect("serializes");
        assert_eq!(saved, message.text());
        let back: Body = serde_json::from_str(&saved).expect("reads back");
        assert_eq!(back, message);
    }

    #[test]
    fn a_body_takes_the_text_it_came_in_only_when_that_is_the_text_it_writes() {
        // (text, whether it is taken as it is: only ever when it is what the value writes;
        // a fraction is written out even when it would come back the same)
        let cases = [
            (
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}"#,
                true,
            ),
            (
                r#"{"a":"x\"y\\z\n\r\t\b\f","b":[1,-2,0,-7,true,false,null],"c":{}}"#,
                true,
            ),
            (r#"{"é":"ünïcödé ✓","k":"a:b","":""}"#, true),
            (
                r#"[{"jsonrpc":"2.0","id":"a","result":{}},{"x":123456789012345678}]"#,
                true,
            ),
            (r#"{"a": 1}"#, false),
            (r#" {"a":1}"#, false),
            (
                r#"{"a":1}
"#,
                false,
            ),
            (r#"{"a":1.0}"#, false),
            (r#"{"a":1.5}"#, false),
            (r#"{"a":1e3}"#, false),
            (r#"{"a":-0}"#, false),
            (r#"{"a":1234567890123456789012}"#, false),
            (r#"{"a":"\u0041"}"#, false),
            (r#"{"a":"\/"}"#, false),
            (r#"{"a":1,"a":2}"#, false),
            (r#"{"a":{"b":1,"b":1}}"#, false),
        ];
        // Nested past what is taken as it is (a message cut by the parser's limit never is).
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(70), "]".repeat(70));
        let value: Value = serde_json::from_str(&deep).expect("deep");
        assert!(!writes_as(&deep, &value));
        let cut = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        let message = crate::wire::jsonrpc::parse_body(cut.as_bytes()).expect("kept, cut");
        let body = Body::of(&message, &cut.as_str().into());
        assert_eq!(body, Body::new(&message));
        assert_eq!(body.value(), message);
        for (text, canonical) in cases {
            let value: Value = serde_json::from_str(text).expect(text);
            let written = serde_json::to_string(&value).expect("writes");
            assert_eq!(writes_as(text, &value), canonical, "{text}");
            assert!(!canonical || written == text, "{text} writes as {written}");
            let shared: Arc<str> = text.into();
            let body = Body::of(&value, &shared);
            assert_eq!(body.is_shared_with(&Body(Arc::clone(&shared))), canonical);
            assert_eq!(body, Body::new(&value), "{text}");
            assert_eq!(body.text(), written);
        }
    }
}
