//! JSON-RPC 2.0 classification: requests, notifications, responses, batches.

use serde_json::Value;

/// What one JSON-RPC message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind<'a> {
    /// A request: has `method` and `id`.
    Request {
        /// The id.
        id: &'a Value,
        /// The method.
        method: &'a str,
        /// The params (or `null`).
        params: &'a Value,
    },
    /// A notification: has `method`, no `id`.
    Notification {
        /// The method.
        method: &'a str,
        /// The params (or `null`).
        params: &'a Value,
    },
    /// A successful response: has `id` and `result`.
    Result {
        /// The id.
        id: &'a Value,
        /// The result.
        result: &'a Value,
    },
    /// An error response: has `id` (possibly null) and `error`.
    Error {
        /// The id.
        id: &'a Value,
        /// The error object.
        error: &'a Value,
    },
    /// Anything else, with the reason.
    Invalid(&'static str),
}

/// A JSON-RPC error response answering the request with `id`: `{"jsonrpc": "2.0", "id": id,
/// "error": {"code": code, "message": message}}`. The one builder of the error answers
/// mcpscope writes (the proxy's own answers, the mock upstream, serve-test).
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

static NULL: Value = Value::Null;

/// Classifies one JSON-RPC message object.
pub fn classify(msg: &Value) -> Kind<'_> {
    let Some(obj) = msg.as_object() else {
        return Kind::Invalid("not a JSON object");
    };
    // One pass over the members (a message has a handful) instead of a hashed lookup per
    // member asked for; the parsed object holds each key once.
    let (mut params, mut method, mut id, mut result, mut error) = (None, None, None, None, None);
    for (key, value) in obj {
        match key.as_str() {
            "params" => params = Some(value),
            "method" => method = Some(value),
            "id" => id = Some(value),
            "result" => result = Some(value),
            "error" => error = Some(value),
            _ => {}
        }
    }
    let params = params.unwrap_or(&NULL);
    match (method, id) {
        (Some(Value::String(method)), Some(id)) if !id.is_null() => {
            Kind::Request { id, method, params }
        }
        (Some(Value::String(method)), _) => Kind::Notification { method, params },
        (Some(_), _) => Kind::Invalid("method is not a string"),
        (None, id) => {
            let id = id.unwrap_or(&NULL);
            if let Some(result) = result {
                Kind::Result { id, result }
            } else if let Some(error) = error {
                Kind::Error { id, error }
            } else {
                Kind::Invalid("neither method, result nor error")
            }
        }
    }
}

/// The messages of a body: the elements of a batch, or the one message.
pub fn messages(body: &Value) -> Vec<&Value> {
    match body {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// A display form of a JSON-RPC id (`7`, `"abc"`).
pub fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// What stands for a member nested past the parser's depth limit (see [`parse_body`]).
pub const TOO_DEEP: &str = "[too deep to inspect]";

/// Parses a body as JSON; the error text says why it is not JSON-RPC.
///
/// Valid JSON of any depth is accepted: a body nested past the parser's limit (128 levels) is
/// taken apart one level at a time (the message's own members, and each message of a batch), and
/// a member still too deep is kept as the text [`TOO_DEEP`] followed by its size, so that the
/// message's `id`, `method`, `result` or `error` still say what it is.
pub fn parse_body(bytes: &[u8]) -> Result<Value, String> {
    message_of(serde_json::from_slice(bytes), bytes)
}

/// [`parse_body`] of a text (SSE data): its strings are not checked for UTF-8 again.
pub fn parse_text(text: &str) -> Result<Value, String> {
    message_of(serde_json::from_str(text), text.as_bytes())
}

/// The message `parsed` from `bytes`, or why it is none.
fn message_of(parsed: serde_json::Result<Value>, bytes: &[u8]) -> Result<Value, String> {
    let value: Value = match parsed {
        Ok(value) => value,
        Err(e) if too_deep(&e) => shallow(bytes).map_err(|e| format!("invalid JSON: {e}"))?,
        Err(e) => return Err(format!("invalid JSON: {e}")),
    };
    match &value {
        Value::Object(_) => Ok(value),
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => Ok(value),
        Value::Array(_) => Err("a batch must be a non-empty array of objects".into()),
        _ => Err("a JSON-RPC message must be an object or a batch".into()),
    }
}

/// Whether a parse failed only on the parser's depth limit.
fn too_deep(e: &serde_json::Error) -> bool {
    e.is_syntax() && e.to_string().starts_with("recursion limit exceeded")
}

/// An object's members in the order they came, each left unparsed (any depth: skipping a value
/// does not recurse).
struct Members(Vec<(String, Box<serde_json::value::RawValue>)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        de.deserialize_map(Visit)
    }
}

/// One value parsed to the depth the parser allows: past it, the [`TOO_DEEP`] text.
fn bounded(raw: &serde_json::value::RawValue) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(raw.get()) {
        Ok(value) => Ok(value),
        Err(e) if too_deep(&e) => Ok(Value::String(format!(
            "{TOO_DEEP} ({} bytes)",
            raw.get().len()
        ))),
        Err(e) => Err(e),
    }
}

/// A message object with each member parsed as deep as allowed.
fn shallow_object(raw: &serde_json::value::RawValue) -> Result<Value, serde_json::Error> {
    if !raw.get().starts_with('{') {
        return bounded(raw);
    }
    let Members(members) = serde_json::from_str(raw.get())?;
    let mut object = serde_json::Map::new();
    for (key, value) in members {
        object.insert(key, bounded(&value)?);
    }
    Ok(Value::Object(object))
}

/// A body too deep for the parser, taken apart a level at a time.
fn shallow(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let raw: Box<serde_json::value::RawValue> = serde_json::from_slice(bytes)?;
    if raw.get().starts_with('[') {
        let items: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(raw.get())?;
        return items
            .iter()
            .map(|item| shallow_object(item))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    shallow_object(&raw)
}

/// Writes a value with object keys sorted, so equal params compare equal as text.
pub fn canonical(value: &Value) -> String {
    canonical_without(value, &[])
}

/// [`canonical`] without the members of the outermost object named in `skip`.
pub fn canonical_without(value: &Value, skip: &[&str]) -> String {
    fn write(value: &Value, skip: &[&str], out: &mut Vec<u8>) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map
                    .keys()
                    .filter(|key| !skip.contains(&key.as_str()))
                    .collect();
                keys.sort();
                out.push(b'{');
                for (i, key) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    // Writing into a vector cannot fail.
                    let _ = serde_json::to_writer(&mut *out, key);
                    out.push(b':');
                    if let Some(v) = map.get(*key) {
                        write(v, &[], out);
                    }
                }
                out.push(b'}');
            }
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write(item, &[], out);
                }
                out.push(b']');
            }
            other => {
                let _ = serde_json::to_writer(&mut *out, other);
            }
        }
    }
    let mut out = Vec::new();
    write(value, skip, &mut out);
    // serde_json writes UTF-8 and the brackets are ASCII.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_each_kind() {
        let req = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poke"}});
        assert!(matches!(
            classify(&req),
            Kind::Request {
                method: "tools/call",
                ..
            }
        ));
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        assert!(matches!(classify(&note), Kind::Notification { .. }));
        let res = json!({"jsonrpc":"2.0","id":1,"result":{}});
        assert!(matches!(classify(&res), Kind::Result { .. }));
        let err = json!({"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}});
        assert!(matches!(classify(&err), Kind::Error { .. }));
        assert!(matches!(classify(&json!(3)), Kind::Invalid(_)));
        assert!(matches!(classify(&json!({"id":1})), Kind::Invalid(_)));
    }

    #[test]
    fn parse_body_rejects_non_messages() {
        assert!(parse_body(b"{\"a\":1}").is_ok());
        assert!(parse_body(b"[{\"a\":1}]").is_ok());
        assert!(parse_body(b"[]").is_err());
        assert!(parse_body(b"42").is_err());
        assert!(parse_body(b"{broken").unwrap_err().contains("invalid JSON"));
    }

    #[test]
    fn canonical_ignores_key_order() {
        let a = json!({"b":1,"a":{"y":2,"x":[1,{"q":1,"p":2}]}});
        let b = json!({"a":{"x":[1,{"p":2,"q":1}],"y":2},"b":1});
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&json!({"é\"k":"a\nb","n":[-1, 2.5, 1e300, null, true],"a":{}})),
            r#"{"a":{},"n":[-1,2.5,1e+300,null,true],"é\"k":"a\nb"}"#
        );
    }

    #[test]
    fn canonical_without_leaves_out_only_the_outer_members_named() {
        let v = json!({"name":"x","_meta":{"p":1},"arguments":{"_meta":2}});
        assert_eq!(
            canonical_without(&v, &["_meta"]),
            r#"{"arguments":{"_meta":2},"name":"x"}"#
        );
        assert_eq!(
            canonical_without(&json!([1, {"_meta":1}]), &["_meta"]),
            r#"[1,{"_meta":1}]"#
        );
    }

    #[test]
    fn a_body_past_the_depth_limit_keeps_its_id_and_kind() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let one = format!(r#"{{"jsonrpc":"2.0","id":9,"result":{{"v":{deep}}}}}"#);
        let body = parse_body(one.as_bytes()).expect("valid JSON of any depth");
        assert!(matches!(classify(&body), Kind::Result { id, .. } if id == &json!(9)));
        let v = body["result"]
            .as_str()
            .expect("the too-deep member as text");
        assert!(v.starts_with(TOO_DEEP), "{v}");
        let batch = format!(r#"[{one},{{"jsonrpc":"2.0","id":10,"result":{{}}}}]"#);
        let body = parse_body(batch.as_bytes()).expect("a deep batch");
        assert_eq!(messages(&body).len(), 2);
        assert_eq!(body[1], json!({"jsonrpc":"2.0","id":10,"result":{}}));
        let broken = format!(r#"{{"id":1,"result":{}"#, "[".repeat(300));
        assert!(
            parse_body(broken.as_bytes()).is_err(),
            "deep and broken stays invalid"
        );
    }

    #[test]
    fn an_error_answer_is_a_response_with_its_id_code_and_message() {
        let answer = error(&serde_json::json!(7), -32601, "no such method");
        assert_eq!(
            answer.to_string(),
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no such method"}}"#
        );
        assert!(matches!(classify(&answer), Kind::Error { .. }), "{answer}");
    }
}
