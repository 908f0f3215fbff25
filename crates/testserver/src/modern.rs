//! Revision 2026-07-28 of the test server: the per-request envelope and its header checks,
//! the fields every result must carry, and `subscriptions/listen` streams.

use std::sync::{Arc, Mutex, MutexGuard};

use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::stream::StreamLog;
use super::tools;

/// `_meta` key of the revision a request speaks.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities.
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key by which a request opts in to log messages, at or above a level.
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key naming the listen request a stream frame belongs to.
pub(crate) const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
/// JSON-RPC error: the HTTP headers disagree with the body.
pub(crate) const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC error: the revision asked for is not spoken.
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;
/// The revisions served without a session.
pub(crate) const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// Methods a 2026-07-28 client may call here.
const METHODS: [&str; 14] = [
    "server/discover",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "notifications/cancelled",
    "notifications/progress",
];

/// Results the client may cache, which therefore carry `ttlMs` and `cacheScope`.
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

pub(crate) use mcpscope_engine::wire::mirror::name_field;

/// A refused request: the HTTP status and the JSON-RPC error body.
pub(crate) type Refusal = (StatusCode, Value);

fn refuse(status: StatusCode, id: &Value, code: i64, message: &str) -> Refusal {
    (status, tools::error(id, code, message))
}

use mcpscope_engine::wire::mirror::decode_value as decode_header;

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Checks a 2026-07-28 request (an object with `id` and `method`): the `_meta` envelope, the
/// `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers against the body, the revision, the
/// method. `Err` is the answer to send instead of dispatching it.
pub(crate) fn validate(headers: &HeaderMap, msg: &Value) -> Result<(), Box<Refusal>> {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let params = msg.get("params");
    let Some(meta) = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
    else {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            &id,
            tools::INVALID_PARAMS,
            &format!("params._meta must carry {META_VERSION} and {META_CAPABILITIES}"),
        )));
    };
    let missing: Vec<&str> = [META_VERSION, META_CAPABILITIES]
        .into_iter()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            &id,
            tools::INVALID_PARAMS,
            &format!("params._meta is missing {}", missing.join(", ")),
        )));
    }
    let version = meta.get(META_VERSION).and_then(Value::as_str);
    let mismatch = |what: String| {
        Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            &id,
            HEADER_MISMATCH,
            &format!("Header mismatch: {what}"),
        )))
    };
    let header_version = header(headers, "mcp-protocol-version");
    if header_version.is_none() || header_version != version {
        return mismatch(format!(
            "MCP-Protocol-Version header {header_version:?} does not match the body's {version:?}"
        ));
    }
    let header_method = header(headers, "mcp-method");
    if header_method != Some(method) {
        return mismatch(format!(
            "Mcp-Method header {header_method:?} does not match the body's method {method:?}"
        ));
    }
    if let Some(field) = name_field(method)
        && let Some(body_name) = params.and_then(|p| p.get(field)).and_then(Value::as_str)
    {
        let header_name = header(headers, "mcp-name");
        if header_name.and_then(decode_header).as_deref() != Some(body_name) {
            return mismatch(format!(
                "Mcp-Name header {header_name:?} does not match the body's {field} {body_name:?}"
            ));
        }
    }
    let requested = version.unwrap_or("");
    if !MODERN_VERSIONS.contains(&requested) {
        let mut answer = tools::error(
            &id,
            UNSUPPORTED_VERSION,
            &format!("Unsupported protocol version {requested}"),
        );
        answer["error"]["data"] =
            json!({"supported": super::SUPPORTED_VERSIONS, "requested": requested});
        return Err(Box::new((StatusCode::BAD_REQUEST, answer)));
    }
    if !METHODS.contains(&method) {
        return Err(Box::new(refuse(
            StatusCode::NOT_FOUND,
            &id,
            tools::METHOD_NOT_FOUND,
            &format!("Method not found: {method}"),
        )));
    }
    Ok(())
}

/// The revision a POST without a session asks for in its body, if it carries the envelope.
pub(crate) fn body_version(msg: &Value) -> Option<&str> {
    msg.pointer("/params/_meta")
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str)
}

/// Adds what 2026-07-28 requires of the result of `method`: `resultType`, and for cacheable
/// results `ttlMs` (0: stale at once, the counter changes) and `cacheScope`.
pub(crate) fn decorate(method: &str, response: &mut Value) {
    let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) else {
        return;
    };
    result
        .entry("resultType")
        .or_insert_with(|| json!("complete"));
    if CACHEABLE.contains(&method) && result.get("resultType") == Some(&json!("complete")) {
        result.entry("ttlMs").or_insert_with(|| json!(0));
        result
            .entry("cacheScope")
            .or_insert_with(|| json!("private"));
    }
}

/// One open `subscriptions/listen` stream.
#[derive(Debug)]
struct Listener {
    /// The listen request's id, stamped on every frame.
    id: Value,
    filter: Value,
    log: Arc<StreamLog>,
}

/// The open listen streams.
#[derive(Debug, Default)]
pub(crate) struct Listeners(Mutex<Vec<Listener>>);

/// A change a listen stream may have asked to hear of.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// A resource's contents changed.
    ResourceUpdated(String),
}

impl Listeners {
    fn lock(&self) -> MutexGuard<'_, Vec<Listener>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a listen stream on `log` for request `id` with its filter: the acknowledgement is
    /// its first frame; the stream stays open until the client leaves or the server stops.
    pub(crate) fn open(&self, id: &Value, params: &Value, log: Arc<StreamLog>) {
        let asked = params.get("notifications").cloned().unwrap_or(json!({}));
        let mut honored = serde_json::Map::new();
        for flag in [
            "toolsListChanged",
            "promptsListChanged",
            "resourcesListChanged",
        ] {
            if asked.get(flag) == Some(&json!(true)) {
                honored.insert(flag.into(), json!(true));
            }
        }
        if let Some(uris) = asked
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .filter(|u| !u.is_empty())
        {
            honored.insert("resourceSubscriptions".into(), json!(uris));
        }
        let honored = Value::Object(honored);
        log.push_message(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honored, "_meta": {META_SUBSCRIPTION: id}}
        }));
        let mut all = self.lock();
        all.retain(|l| l.log.has_readers());
        all.push(Listener {
            id: id.clone(),
            filter: honored,
            log,
        });
    }

    /// Tells every listen stream that asked for it of `change`.
    pub(crate) fn publish(&self, change: &Change) {
        let mut all = self.lock();
        all.retain(|l| l.log.has_readers() && !l.log.is_finished());
        for l in all.iter() {
            let Change::ResourceUpdated(uri) = change;
            let wanted = l
                .filter
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .is_some_and(|u| u.iter().any(|x| x == uri.as_str()));
            if wanted {
                l.log.push_message(&json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/resources/updated",
                    "params": {"uri": uri, "_meta": {META_SUBSCRIPTION: l.id}}
                }));
            }
        }
    }

    /// Ends every listen stream (server shutdown).
    pub(crate) fn end_all(&self) {
        for l in self.lock().drain(..) {
            l.log.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn hdrs(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {},
            "_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}}}})
    }

    #[test]
    fn headers_must_mirror_the_body() {
        let good = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        assert!(validate(&hdrs(&good), &call("echo")).is_ok());
        // Base64 sentinel: "echo".
        let encoded = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZWNobw==?="),
        ];
        assert!(validate(&hdrs(&encoded), &call("echo")).is_ok());
        let wrong_name = validate(&hdrs(&good), &call("poke")).expect_err("mismatch");
        assert_eq!(wrong_name.0, StatusCode::BAD_REQUEST);
        assert_eq!(wrong_name.1["error"]["code"], HEADER_MISMATCH);
        let wrong_method = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "echo"),
        ];
        let err = validate(&hdrs(&wrong_method), &call("echo")).expect_err("mismatch");
        assert_eq!(err.1["error"]["code"], HEADER_MISMATCH);
        let no_meta = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let err = validate(&hdrs(&good), &no_meta).expect_err("no envelope");
        assert_eq!(err.1["error"]["code"], tools::INVALID_PARAMS);
    }

    #[test]
    fn unknown_versions_and_methods() {
        let mut msg = call("echo");
        msg["params"]["_meta"][META_VERSION] = json!("2099-01-01");
        let h = [
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let err = validate(&hdrs(&h), &msg).expect_err("unsupported");
        assert_eq!(err.1["error"]["code"], UNSUPPORTED_VERSION);
        assert!(err.1["error"]["data"]["supported"].is_array());
        let mut msg = call("echo");
        msg["method"] = json!("initialize");
        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "initialize"),
        ];
        let err = validate(&hdrs(&h), &msg).expect_err("no such method");
        assert_eq!(err.0, StatusCode::NOT_FOUND);
    }

    #[test]
    fn results_gain_the_required_fields() {
        let mut list = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
        decorate("tools/list", &mut list);
        assert_eq!(list["result"]["resultType"], "complete");
        assert_eq!(list["result"]["ttlMs"], 0);
        assert_eq!(list["result"]["cacheScope"], "private");
        let mut asked =
            json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required"}});
        decorate("tools/call", &mut asked);
        assert_eq!(asked["result"]["resultType"], "input_required");
        assert!(asked["result"].get("ttlMs").is_none());
    }
}
