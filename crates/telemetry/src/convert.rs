//! OTLP/JSON (as `mcpscope_export::otlp` builds it) into the protobuf messages of the official
//! OpenTelemetry proto definitions: hex ids to bytes, decimal-string times to integers.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span};
use serde_json::Value;

fn list<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// An integer field written as a number or as a decimal string (as OTLP/JSON writes 64-bit ones).
fn number(v: &Value, key: &str) -> u64 {
    match v.get(key) {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(n) => n.as_u64().unwrap_or(0),
        None => 0,
    }
}

/// Bytes of a hex id; empty when it is not hex.
pub fn hex(text: &str) -> Vec<u8> {
    let digits: Option<Vec<u8>> = text
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .collect();
    digits
        .filter(|_| text.len().is_multiple_of(2))
        .unwrap_or_default()
}

fn any(v: &Value) -> Option<AnyValue> {
    let value = if let Some(s) = v.get("stringValue").and_then(Value::as_str) {
        any_value::Value::StringValue(s.to_string())
    } else if let Some(b) = v.get("boolValue").and_then(Value::as_bool) {
        any_value::Value::BoolValue(b)
    } else if let Some(i) = v.get("intValue") {
        let n = match i {
            Value::String(s) => s.parse().unwrap_or(0),
            n => n.as_i64().unwrap_or(0),
        };
        any_value::Value::IntValue(n)
    } else if let Some(d) = v.get("doubleValue").and_then(Value::as_f64) {
        any_value::Value::DoubleValue(d)
    } else {
        return None;
    };
    Some(AnyValue { value: Some(value) })
}

fn attributes(v: &Value) -> Vec<KeyValue> {
    list(v, "attributes")
        .map(|kv| KeyValue {
            key: text(kv, "key"),
            value: kv.get("value").and_then(any),
            ..Default::default()
        })
        .collect()
}

/// One span.
pub fn span(v: &Value) -> Span {
    let status = v.get("status").filter(|s| s.get("code").is_some());
    Span {
        trace_id: hex(&text(v, "traceId")),
        span_id: hex(&text(v, "spanId")),
        parent_span_id: hex(&text(v, "parentSpanId")),
        name: text(v, "name"),
        kind: number(v, "kind") as i32,
        start_time_unix_nano: number(v, "startTimeUnixNano"),
        end_time_unix_nano: number(v, "endTimeUnixNano"),
        attributes: attributes(v),
        events: list(v, "events")
            .map(|e| span::Event {
                time_unix_nano: number(e, "timeUnixNano"),
                name: text(e, "name"),
                attributes: attributes(e),
                ..Default::default()
            })
            .collect(),
        status: status.map(|s| Status {
            message: text(s, "message"),
            code: number(s, "code") as i32,
        }),
        ..Default::default()
    }
}

/// A whole `ExportTraceServiceRequest`.
pub fn request(document: &Value) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: list(document, "resourceSpans")
            .map(|rs| ResourceSpans {
                resource: rs.get("resource").map(|r| Resource {
                    attributes: attributes(r),
                    ..Default::default()
                }),
                scope_spans: list(rs, "scopeSpans")
                    .map(|ss| ScopeSpans {
                        scope: ss.get("scope").map(|s| InstrumentationScope {
                            name: text(s, "name"),
                            version: text(s, "version"),
                            ..Default::default()
                        }),
                        spans: list(ss, "spans").map(span).collect(),
                        schema_url: text(ss, "schemaUrl"),
                    })
                    .collect(),
                schema_url: text(rs, "schemaUrl"),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_ids_become_bytes() {
        assert_eq!(hex("00ff10"), vec![0, 255, 16]);
        assert_eq!(hex(""), Vec::<u8>::new());
        assert_eq!(hex("0g"), Vec::<u8>::new());
        assert_eq!(hex("abc"), Vec::<u8>::new());
    }

    #[test]
    fn a_span_keeps_its_ids_times_attributes_and_status() {
        let v = serde_json::json!({
            "traceId": "0102", "spanId": "03", "parentSpanId": "",
            "name": "tools/call slow", "kind": 3,
            "startTimeUnixNano": "5", "endTimeUnixNano": "9",
            "attributes": [{"key": "server.port", "value": {"intValue": "80"}}],
            "events": [{"timeUnixNano": "7", "name": "stream_died", "attributes": []}],
            "status": {"code": 2, "message": "orphaned"},
        });
        let s = span(&v);
        assert_eq!(s.trace_id, vec![1, 2]);
        assert!(s.parent_span_id.is_empty());
        assert_eq!((s.start_time_unix_nano, s.end_time_unix_nano), (5, 9));
        assert_eq!(
            s.attributes[0].value,
            Some(AnyValue {
                value: Some(any_value::Value::IntValue(80))
            })
        );
        assert_eq!(s.events[0].name, "stream_died");
        assert_eq!(s.status.map(|st| st.code), Some(2));
    }
}
