//! Gemini `generateContent` / `streamGenerateContent`.

use super::*;

pub(super) fn turn(shared: &Shared, at: DateTime<Utc>, request: &Value, path: &str) -> Turn {
    let tools = items(request, "tools")
        .flat_map(|t| {
            t.get("functionDeclarations")
                .or_else(|| t.get("function_declarations"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    // Gemini's function responses carry no call id: the n-th response answers the n-th call.
    let mut n = 0;
    let mut results = Vec::new();
    for content in items(request, "contents") {
        for part in items(content, "parts") {
            let Some(response) = part
                .get("functionResponse")
                .or_else(|| part.get("function_response"))
            else {
                continue;
            };
            let body = response.get("response").unwrap_or(&Value::Null);
            let is_error = body.get("error").is_some();
            let text = match body.get("output").or_else(|| body.get("error")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => body.to_string(),
            };
            let id = format!("gemini-mcpscope-{n}");
            n += 1;
            results.push(shared.tool_result(at, &id, &text, is_error));
        }
    }
    Turn {
        tools,
        results,
        stream: path.contains(":streamGenerateContent"),
    }
}

pub(super) fn reply(answer: &Answer, args: &Value, stream: bool) -> Reply {
    let part = match answer {
        Answer::ToolCall(name) => json!({"functionCall": {"name": name, "args": args}}),
        other => json!({"text": text_of(other)}),
    };
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": MODEL,
    });
    if stream {
        let mut out = String::new();
        sse_event(&mut out, None, &body);
        sse_reply(out)
    } else {
        json_reply(StatusCode::OK, &body)
    }
}
