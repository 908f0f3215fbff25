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
}
