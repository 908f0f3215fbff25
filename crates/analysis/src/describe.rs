//! Words and numbers shared by every report: times, deaths, causes, labels.

use chrono::{DateTime, SecondsFormat, Utc};
use mcpscope_engine::model::{Call, Death, Model, Verdict};

/// RFC 3339 with milliseconds and `Z`.
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The time of day with milliseconds (`23:08:53.423`).
pub fn clock(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S%.3f").to_string()
}

/// The call's number as the calls table shows it: its index plus one.
pub fn number(call: &Call) -> usize {
    call.index + 1
}

/// The session's id, or `(no session)`.
pub fn session(model: &Model, call: &Call) -> String {
    model
        .sessions
        .get(call.session)
        .map(|s| s.label())
        .unwrap_or_default()
}

/// The label of the stream that owns the call's response (`POST#6 sse`).
pub fn owner(model: &Model, call: &Call) -> String {
    model
        .stream(call.owner)
        .map(|s| s.label())
        .unwrap_or_else(|| format!("#{}", call.owner))
}

/// A death in words: `23:08:53.423 reset (upstream leg) on POST#6 sse`.
pub fn death(model: &Model, death: &Death) -> String {
    let how = death.how.map(|h| h.as_str()).unwrap_or("ended");
    let leg = death
        .leg
        .map(|l| format!(" ({} leg)", l.as_str()))
        .unwrap_or_default();
    let stream = model
        .stream(death.stream)
        .map(|s| s.label())
        .unwrap_or_else(|| format!("#{}", death.stream));
    format!("{} {how}{leg} on {stream}", clock(death.at))
}

/// Why the call ended as it did, or `None` when it was answered.
pub fn cause(call: &Call) -> Option<String> {
    match &call.verdict {
        Verdict::Answered if tool_error(call) => Some(format!(
            "the tool reported an error{}",
            tool_error_text(call)
                .map(|t| format!(": {t}"))
                .unwrap_or_default()
        )),
        Verdict::Answered => None,
        Verdict::Pending => Some("still waiting for its response when the recording ends".into()),
        Verdict::Error { message } => Some(format!("error: {message}")),
        Verdict::Orphaned { cause, .. } => Some(cause.describe().to_string()),
        Verdict::Resumable { last_event_id, .. } => Some(format!(
            "its stream died; resumable{}, never resumed by the end of the recording",
            last_event_id
                .as_ref()
                .map(|id| format!(" after event {id}"))
                .unwrap_or_default()
        )),
        Verdict::Cancelled { at } => Some(format!("cancelled by the client at {}", clock(*at))),
    }
}

/// Whether a `tools/call` result says `isError: true`.
pub fn tool_error(call: &Call) -> bool {
    call.method == "tools/call"
        && call
            .response()
            .and_then(|r| r.get("isError").and_then(serde_json::Value::as_bool))
            == Some(true)
}

fn tool_error_text(call: &Call) -> Option<String> {
    let response = call.response()?;
    let content = response.get("content")?.as_array()?;
    let text = content
        .iter()
        .filter_map(|c| c.get("text").and_then(serde_json::Value::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then_some(text)
}

/// Milliseconds from the request to its end, or to `end` if it never ended.
pub fn elapsed_ms(call: &Call, end: DateTime<Utc>) -> i64 {
    call.elapsed_ms(end)
}

/// Makes text safe inside a table cell: pipes escaped, line breaks flattened.
pub fn markdown_cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\r', '\n'], " ")
}
