//! OTLP traces, JSON encoding of an OTLP/HTTP `ExportTraceServiceRequest`: one trace per
//! session with a root span for the session and a span per call.
//!
//! Spans follow the OpenTelemetry semantic conventions for MCP as published in semantic
//! conventions v1.39.0 (`docs/gen-ai/mcp.md`, status Development): span name
//! `{mcp.method.name} {gen_ai.tool.name}` (or the method alone), kind CLIENT, attributes
//! `mcp.method.name`, `mcp.session.id`, `mcp.protocol.version`, `jsonrpc.request.id`,
//! `gen_ai.tool.name`, `gen_ai.operation.name`, `network.transport`, `network.protocol.name`,
//! `server.address`, `server.port`, and `error.type` with an error status for calls that
//! failed or were orphaned. Span events mark the stream opening, each SSE event, the stream's
//! death and the client's reaction. Ids are deterministic hashes of the recording's session
//! ids and call indices; a request carrying W3C trace context in `params._meta.traceparent`
//! gets that trace id and parent span id.
//!
//! A task-augmented call (MCP tasks) is one operation: an INTERNAL span `{title} task` from the
//! create to the `tasks/result` answer (attributes `mcp.task.id`, `mcp.task.status`,
//! `mcpscope.task.polls`, `mcpscope.task.waits_lost`), whose children are the spans of its
//! requests: the create (ending when the task was created), each `tasks/get`, `tasks/result` and
//! `tasks/cancel`.

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{Direction, EndHow, Leg, StreamId};
use mcpscope_engine::model::{Call, Model, Session, Verdict};
use mcpscope_engine::wire::ContentKind;
use serde_json::{Value, json};

use crate::{Folded, VERSION};
use mcpscope_analysis::describe;

/// The semantic conventions version the spans follow.
pub const SEMCONV_VERSION: &str = "1.39.0";

const KIND_INTERNAL: u8 = 1;
const KIND_CLIENT: u8 = 3;
const STATUS_ERROR: u8 = 2;

/// FNV-1a over `parts`, starting from `seed`: stable across runs and platforms.
fn hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // A final avalanche (MurmurHash3's fmix64) spreads nearby keys over every digit.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h.max(1)
}

/// A 32-hex-digit trace id for `key`.
pub fn trace_id(key: &str) -> String {
    format!(
        "{:016x}{:016x}",
        hash(1, &["trace", key]),
        hash(2, &["trace", key])
    )
}

/// A 16-hex-digit span id for `parts`.
pub fn span_id(parts: &[&str]) -> String {
    format!("{:016x}", hash(3, parts))
}

/// The trace id and parent span id of a W3C `traceparent` (`00-<trace>-<span>-<flags>`), if
/// it is well formed and not all zeros.
pub fn traceparent(text: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = text.trim().split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    match parts.as_slice() {
        [version, trace, span, flags, ..]
            if hex(version, 2)
                && *version != "ff"
                && hex(trace, 32)
                && hex(span, 16)
                && hex(flags, 2)
                && !zero(trace)
                && !zero(span) =>
        {
            Some((trace.to_ascii_lowercase(), span.to_ascii_lowercase()))
        }
        _ => None,
    }
}

fn nanos(t: DateTime<Utc>) -> String {
    t.timestamp_nanos_opt().unwrap_or(0).max(0).to_string()
}

fn attr(key: &str, value: Value) -> Value {
    let value = match value {
        Value::String(s) => json!({ "stringValue": s }),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({ "intValue": n.to_string() }),
        Value::Number(n) => json!({ "doubleValue": n }),
        other => json!({ "stringValue": other.to_string() }),
    };
    json!({ "key": key, "value": value })
}

fn event(t: DateTime<Utc>, name: &str, attributes: Vec<Value>) -> Value {
    json!({ "timeUnixNano": nanos(t), "name": name, "attributes": attributes })
}

/// `server.address` and `server.port` of the recorded upstream URL.
pub fn server(upstream: &str) -> Option<(String, u16)> {
    let (scheme, rest) = upstream.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after
            .strip_prefix(':')
            .and_then(|p| p.parse().ok())
            .unwrap_or(default);
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((authority.to_string(), default)),
    }
}

fn session_key(session: &Session) -> String {
    session.id.clone().unwrap_or_else(|| "(no session)".into())
}

/// The OTLP/JSON document of a recording.
pub fn build(folded: &Folded) -> Value {
    let model = &folded.model;
    let mut spans = Vec::new();
    for (index, _) in model.sessions.indexed() {
        let Some(root) = session_span(model, index) else {
            continue;
        };
        spans.push(root);
        spans.extend(
            model
                .calls
                .iter()
                .filter(|c| c.session == index)
                .flat_map(|call| spans_of_call(model, call)),
        );
    }
    document(spans)
}

/// An OTLP/JSON `ExportTraceServiceRequest` holding `spans`, under mcpscope's resource and scope.
pub fn document(spans: Vec<Value>) -> Value {
    json!({
        "resourceSpans": [{
            "resource": { "attributes": [
                attr("service.name", json!("mcpscope")),
                attr("service.version", json!(VERSION)),
            ]},
            "scopeSpans": [{
                "scope": { "name": "mcpscope", "version": VERSION },
                "schemaUrl": format!("https://opentelemetry.io/schemas/{SEMCONV_VERSION}"),
                "spans": spans,
            }],
        }]
    })
}

/// The end of what `model` has seen: its clock, or its last event's time.
fn end_of_recording(model: &Model) -> DateTime<Utc> {
    model.clock().or(model.last_t).unwrap_or_default()
}

fn upstream_server(model: &Model) -> Option<(String, u16)> {
    model.proxy.as_ref().and_then(|p| server(&p.upstream))
}

/// The root span (OTLP/JSON) of session `index` of `model`, ending when its last stream or
/// call ended; `None` for a session without streams or calls.
pub fn session_span(model: &Model, index: usize) -> Option<Value> {
    let session = model.sessions.get(index)?;
    let calls: Vec<&Call> = model.calls.iter().filter(|c| c.session == index).collect();
    if session.streams.is_empty() && calls.is_empty() {
        return None;
    }
    let key = session_key(session);
    let end = session_end(model, session, &calls).unwrap_or(end_of_recording(model));
    let mut attributes = Vec::new();
    if let Some(id) = &session.id {
        attributes.push(attr("mcp.session.id", json!(id)));
    }
    if let Some(revision) = &session.revision {
        attributes.push(attr("mcp.protocol.version", json!(revision)));
    }
    attributes.extend(server_attrs(upstream_server(model).as_ref()));
    Some(json!({
        "traceId": trace_id(&key),
        "spanId": span_id(&["session", &key]),
        "parentSpanId": "",
        "name": "mcp.session",
        "kind": KIND_INTERNAL,
        "startTimeUnixNano": nanos(session.started_at),
        "endTimeUnixNano": nanos(end.max(session.started_at)),
        "attributes": attributes,
        "events": [],
        "status": {},
    }))
}

fn call_key(model: &Model, call: &Call) -> String {
    model
        .sessions
        .get(call.session)
        .map(session_key)
        .unwrap_or_else(|| "(no session)".into())
}

/// The trace and parent span of a call: its session's root, or what its `traceparent` names.
fn placement(call: &Call, key: &str) -> (String, String) {
    call.params()
        .get("_meta")
        .and_then(|m| m.get("traceparent"))
        .and_then(Value::as_str)
        .and_then(traceparent)
        .unwrap_or_else(|| (trace_id(key), span_id(&["session", key])))
}

/// The task operation a call's span belongs under: the one it begins (the create) or the one it
/// asks about (`tasks/get`, `tasks/result`, `tasks/cancel`).
fn task_operation(model: &Model, call: &Call) -> Option<usize> {
    match call.task() {
        Some(_) => Some(call.index),
        None => call.about_task().filter(|&op| model.calls.contains(op)),
    }
}

fn operation_span_id(key: &str, root: usize) -> String {
    span_id(&["operation", key, &root.to_string()])
}

/// The spans (OTLP/JSON) of one call: its own span, preceded, when it begins a task operation,
/// by the operation's span.
pub fn spans_of_call(model: &Model, call: &Call) -> Vec<Value> {
    let mut out = Vec::with_capacity(2);
    out.extend(operation_span(model, call));
    out.push(span_of_call(model, call));
    out
}

/// The span (OTLP/JSON) of the task operation `call` begins (create → `tasks/result` answer),
/// or `None` when it begins none. A child of the session's root span (or of the create's
/// `traceparent`); the spans of its requests are its children.
pub fn operation_span(model: &Model, call: &Call) -> Option<Value> {
    let task = call.task()?;
    let operation = model.operation(call.index)?;
    let key = call_key(model, call);
    let (trace, parent) = placement(call, &key);
    let end = operation
        .ended_at
        .or_else(|| call.verdict.death().map(|d| d.at))
        .unwrap_or(end_of_recording(model))
        .max(operation.started_at);
    let polls = operation.requests[1..]
        .iter()
        .filter_map(|&c| model.calls.get(c))
        .filter(|c| c.method == "tasks/get")
        .count();
    let mut attributes = vec![
        attr("mcp.method.name", json!(call.method)),
        attr("mcp.task.id", json!(task.id)),
        attr("mcp.task.status", json!(task.status.name())),
        attr("mcpscope.task.polls", json!(polls)),
        attr("mcpscope.task.waits_lost", json!(task.waits_lost)),
        attr("mcpscope.task.requests", json!(operation.requests.len())),
        attr("mcpscope.verdict", json!(operation.verdict.name())),
    ];
    if let Some(id) = model.sessions.get(call.session).and_then(|s| s.id.clone()) {
        attributes.push(attr("mcp.session.id", json!(id)));
    }
    if let Some(tool) = &call.tool {
        attributes.push(attr("gen_ai.tool.name", json!(tool)));
        attributes.push(attr("gen_ai.operation.name", json!("execute_tool")));
    }
    let status = match operation.verdict {
        Verdict::Error { .. } | Verdict::Orphaned { .. } => {
            attributes.push(attr("error.type", json!(operation.verdict.name())));
            json!({"code": STATUS_ERROR, "message": describe::cause(call).unwrap_or_default()})
        }
        _ => json!({}),
    };
    let events: Vec<Value> = task
        .steps
        .iter()
        .map(|step| event(step.at, &step.what.describe(), Vec::new()))
        .collect();
    Some(json!({
        "traceId": trace,
        "spanId": operation_span_id(&key, call.index),
        "parentSpanId": parent,
        "name": format!("{} task", call.title()),
        "kind": KIND_INTERNAL,
        "startTimeUnixNano": nanos(operation.started_at),
        "endTimeUnixNano": nanos(end),
        "attributes": attributes,
        "events": events,
        "status": status,
    }))
}

/// The span (OTLP/JSON) of one call of `model`: a child of its session's root span, of the span
/// its `traceparent` names, or of its task operation's span.
pub fn span_of_call(model: &Model, call: &Call) -> Value {
    let key = call_key(model, call);
    let (trace, parent) = match task_operation(model, call) {
        Some(op) => {
            let (trace, _) = placement(&model.calls[op], &key);
            (trace, operation_span_id(&key, op))
        }
        None => placement(call, &key),
    };
    call_span(
        model,
        call,
        (&trace, &parent, &key),
        upstream_server(model).as_ref(),
        end_of_recording(model),
    )
}

fn server_attrs(server: Option<&(String, u16)>) -> Vec<Value> {
    let mut out = vec![
        attr("network.transport", json!("tcp")),
        attr("network.protocol.name", json!("http")),
    ];
    if let Some((address, port)) = server {
        out.push(attr("server.address", json!(address)));
        out.push(attr("server.port", json!(port)));
    }
    out
}

fn session_end(model: &Model, session: &Session, calls: &[&Call]) -> Option<DateTime<Utc>> {
    let streams = session
        .streams
        .iter()
        .filter_map(|&s| model.stream(s))
        .filter_map(|s| s.ended.as_ref().map(|e| e.at).or(s.head_at));
    let calls = calls.iter().filter_map(|c| c.ended_at);
    streams.chain(calls).max()
}

fn call_span(
    model: &Model,
    call: &Call,
    (trace, parent, key): (&str, &str, &str),
    server: Option<&(String, u16)>,
    end_of_recording: DateTime<Utc>,
) -> Value {
    let index = call.index.to_string();
    // The create of a task operation ends when the task was created; the operation goes on.
    let end = call
        .task()
        .map(|task| task.created_at)
        .or(call.ended_at)
        .or_else(|| call.verdict.death().map(|d| d.at))
        .unwrap_or(end_of_recording)
        .max(call.started_at);

    let mut attributes = vec![
        attr("mcp.method.name", json!(call.method)),
        attr("jsonrpc.request.id", json!(call.id_text())),
        attr("jsonrpc.protocol.version", json!("2.0")),
    ];
    if let Some(id) = model.sessions.get(call.session).and_then(|s| s.id.clone()) {
        attributes.push(attr("mcp.session.id", json!(id)));
    }
    if let Some(revision) = &call.revision {
        attributes.push(attr("mcp.protocol.version", json!(revision)));
    }
    if let Some(task) = task_operation(model, call).and_then(|op| model.calls[op].task()) {
        attributes.push(attr("mcp.task.id", json!(task.id)));
        attributes.push(attr("mcp.task.status", json!(task.status.name())));
    }
    if let Some(tool) = &call.tool {
        attributes.push(attr("gen_ai.tool.name", json!(tool)));
        attributes.push(attr("gen_ai.operation.name", json!("execute_tool")));
    }
    attributes.extend(server_attrs(server));
    attributes.push(attr("mcpscope.verdict", json!(call.verdict.name())));
    attributes.push(attr(
        "mcpscope.direction",
        json!(match call.dir {
            Direction::ClientToServer => "client_to_server",
            Direction::ServerToClient => "server_to_client",
        }),
    ));

    let mut status = json!({});
    let error = match &call.verdict {
        Verdict::Error { .. } => Some(
            call.response()
                .and_then(|r| r.get("code").map(|c| c.to_string()))
                .unwrap_or_else(|| "_OTHER".to_string()),
        ),
        Verdict::Orphaned { .. } => Some("orphaned".to_string()),
        _ if describe::tool_error(call) => Some("tool_error".to_string()),
        _ => None,
    };
    if let Some(error_type) = error {
        if let Some(code) = call
            .response()
            .and_then(|r| r.get("code").cloned())
            .filter(|_| matches!(call.verdict, Verdict::Error { .. }))
        {
            attributes.push(attr("rpc.response.status_code", json!(code.to_string())));
        }
        attributes.push(attr("error.type", json!(error_type)));
        status = json!({
            "code": STATUS_ERROR,
            "message": describe::cause(call).unwrap_or_default(),
        });
    }

    json!({
        "traceId": trace,
        "spanId": span_id(&["call", key, &index]),
        "parentSpanId": parent,
        "name": call.title(),
        "kind": KIND_CLIENT,
        "startTimeUnixNano": nanos(call.started_at),
        "endTimeUnixNano": nanos(end),
        "attributes": attributes,
        "events": events(model, call),
        "status": status,
    })
}

/// The call's span events, in time order.
fn events(model: &Model, call: &Call) -> Vec<Value> {
    let mut out: Vec<(DateTime<Utc>, Value)> = Vec::new();
    let mut streams: Vec<StreamId> = vec![call.request_stream];
    if call.owner != call.request_stream {
        streams.push(call.owner);
    }
    for stream in streams.iter().filter_map(|&s| model.stream(s)) {
        out.push((
            stream.opened_at,
            event(
                stream.opened_at,
                "stream_opened",
                vec![
                    attr("stream", json!(stream.id)),
                    attr("http.request.method", json!(stream.method)),
                    attr("label", json!(stream.label())),
                ],
            ),
        ));
        if let Some(end) = &stream.ended
            && end.how != EndHow::Eof
            && call.verdict.death().is_none_or(|d| d.stream != stream.id)
        {
            out.push((
                end.at,
                died(stream.id, Some(end.how), Some(end.leg), end.at),
            ));
        }
        if stream.body != Some(ContentKind::Sse) {
            continue;
        }
        let mine = |m: Option<usize>| {
            m.and_then(|m| model.messages.get(m))
                .is_some_and(|m| m.call == Some(call.index))
        };
        for mark in &stream.marks {
            if stream.method == "POST" || stream.resumes.is_some() || mine(mark.message) {
                let mut attributes = vec![attr("stream", json!(stream.id))];
                if let Some(id) = &mark.id {
                    attributes.push(attr("id", json!(id)));
                }
                out.push((mark.at, event(mark.at, "sse_event", attributes)));
            }
        }
    }
    if let Some(death) = call.verdict.death() {
        out.push((death.at, died(death.stream, death.how, death.leg, death.at)));
    }
    for (at, reaction) in reactions(model, call) {
        out.push((
            at,
            event(
                at,
                "client_reaction",
                vec![attr("reaction", json!(reaction))],
            ),
        ));
    }
    out.sort_by_key(|(t, _)| *t);
    out.into_iter().map(|(_, e)| e).collect()
}

fn died(stream: StreamId, how: Option<EndHow>, leg: Option<Leg>, at: DateTime<Utc>) -> Value {
    let mut attributes = vec![attr("stream", json!(stream))];
    if let Some(how) = how {
        attributes.push(attr("how", json!(how.as_str())));
    }
    if let Some(leg) = leg {
        attributes.push(attr("leg", json!(leg.as_str())));
    }
    event(at, "stream_died", attributes)
}

/// What the client did after the call's stream died or it was left waiting: retries,
/// cancellation, a new `initialize`, a new GET stream, each with when it happened.
pub fn reactions(model: &Model, call: &Call) -> Vec<(DateTime<Utc>, &'static str)> {
    let mut out = Vec::new();
    let after = call
        .verdict
        .death()
        .map(|d| d.at)
        .unwrap_or(call.started_at);
    for retry in model
        .calls
        .iter()
        .filter(|c| c.retry_of == Some(call.index))
    {
        out.push((retry.started_at, "retry"));
    }
    if let Verdict::Cancelled { at } = call.verdict {
        out.push((at, "cancel"));
    }
    if call.reaction.reinitialized
        && let Some(init) = model
            .calls
            .iter()
            .find(|c| c.method == "initialize" && c.started_at >= after)
    {
        out.push((init.started_at, "re-initialize"));
    }
    if call.reaction.new_get
        && let Some(get) = model
            .streams
            .iter()
            .find(|s| s.method == "GET" && s.session == call.session && s.opened_at >= after)
    {
        out.push((get.opened_at, "new GET"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_right_lengths_and_are_stable() {
        let trace = trace_id("abc");
        assert_eq!(trace.len(), 32);
        assert_eq!(trace, trace_id("abc"));
        assert_ne!(trace, trace_id("abd"));
        assert_eq!(span_id(&["call", "abc", "1"]).len(), 16);
        assert_ne!(
            span_id(&["call", "abc", "1"]),
            span_id(&["call", "abc", "2"])
        );
    }

    #[test]
    fn traceparent_is_read_strictly() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            traceparent(good),
            Some((
                "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                "00f067aa0ba902b7".into()
            ))
        );
        assert_eq!(traceparent("00-0000-00f067aa0ba902b7-01"), None);
        assert_eq!(
            traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(traceparent("nonsense"), None);
    }

    #[test]
    fn server_address_and_port_come_from_the_upstream() {
        assert_eq!(
            server("http://127.0.0.1:8765/mcp"),
            Some(("127.0.0.1".into(), 8765))
        );
        assert_eq!(
            server("https://example.com/mcp"),
            Some(("example.com".into(), 443))
        );
        assert_eq!(server("http://[::1]:9/x"), Some(("::1".into(), 9)));
        assert_eq!(server("http://u:p@h:81"), Some(("h".into(), 81)));
    }
}
