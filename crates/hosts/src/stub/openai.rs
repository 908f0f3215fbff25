//! OpenAI Chat Completions and Responses.

use super::*;

/// Offered tool names; a Responses `namespace` tool's functions as `NAMESPACE__NAME`
/// (Codex offers an MCP server's tools as the namespace `mcp__SERVER`).
fn names(tools: Option<&Value>) -> Vec<String> {
    let mut names = Vec::new();
    for t in tools.and_then(Value::as_array).into_iter().flatten() {
        let name = t
            .get("function")
            .and_then(|f| f.get("name"))
            .or_else(|| t.get("name"))
            .and_then(Value::as_str);
        match (t.get("type").and_then(Value::as_str), name) {
            (Some("namespace"), Some(ns)) => names.extend(
                t.get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.get("name").and_then(Value::as_str))
                    .map(|f| format!("{ns}{NAMESPACE_SEP}{f}")),
            ),
            (_, Some(name)) => names.push(name.to_string()),
            _ => {}
        }
    }
    names
}

/// The offered names that come from a namespace.
pub(super) fn namespaced(tools: Option<&Value>) -> Vec<String> {
    let plain: Vec<Value> = tools
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("type").and_then(Value::as_str) != Some("namespace"))
        .cloned()
        .collect();
    let plain = names(Some(&Value::Array(plain)));
    names(tools)
        .into_iter()
        .filter(|n| !plain.contains(n))
        .collect()
}

/// Between a namespace and its function's name in [`names`].
const NAMESPACE_SEP: &str = "__";

/// A Responses `function_call`'s name and namespace for an offered name.
fn split_namespace(name: &str, namespaced: bool) -> (String, Option<String>) {
    match name.rsplit_once(NAMESPACE_SEP) {
        Some((ns, f)) if namespaced => (f.to_string(), Some(ns.to_string())),
        _ => (name.to_string(), None),
    }
}

fn stream_of(request: &Value) -> bool {
    request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

pub(super) fn chat_turn(shared: &Shared, at: DateTime<Utc>, request: &Value) -> Turn {
    let results = items(request, "messages")
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .filter_map(|m| {
            let id = m.get("tool_call_id").and_then(Value::as_str)?;
            id.contains("mcpscope").then(|| {
                let text = content_text(m.get("content").unwrap_or(&Value::Null));
                shared.tool_result(at, id, &text, false)
            })
        })
        .collect();
    Turn {
        tools: names(request.get("tools")),
        results,
        stream: stream_of(request),
    }
}

pub(super) fn responses_turn(shared: &Shared, at: DateTime<Utc>, request: &Value) -> Turn {
    let results = items(request, "input")
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call_output"))
        .filter_map(|i| {
            let id = i.get("call_id").and_then(Value::as_str)?;
            id.contains("mcpscope").then(|| {
                let output = i.get("output").unwrap_or(&Value::Null);
                let text = match output {
                    Value::String(s) => s.clone(),
                    other => content_text(other),
                };
                shared.tool_result(at, id, &text, false)
            })
        })
        .collect();
    Turn {
        tools: names(request.get("tools")),
        results,
        stream: stream_of(request),
    }
}

pub(super) fn chat_reply(
    shared: &Shared,
    answer: &Answer,
    model: &str,
    args: &Value,
    stream: bool,
) -> Reply {
    let id = shared.log.new_call_id("chatcmpl-");
    let created = Utc::now().timestamp();
    let (message, finish) = match answer {
        Answer::ToolCall(name) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": shared.log.new_call_id("call_"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()},
            }]}),
            "tool_calls",
        ),
        other => (
            json!({"role": "assistant", "content": text_of(other)}),
            "stop",
        ),
    };
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    if !stream {
        let mut message = message;
        if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for call in calls {
                if let Some(call) = call.as_object_mut() {
                    call.remove("index");
                }
            }
        }
        return json_reply(
            StatusCode::OK,
            &json!({
                "id": id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut out = String::new();
    sse_event(&mut out, None, &chunk(message, Value::Null));
    sse_event(&mut out, None, &chunk(json!({}), json!(finish)));
    mcpscope_engine::wire::sse::encode_into(&mut out, None, None, None, "[DONE]");
    sse_reply(out)
}

pub(super) fn responses_reply(
    shared: &Shared,
    namespaced: &[String],
    answer: &Answer,
    model: &str,
    args: &Value,
    stream: bool,
) -> Reply {
    let id = shared.log.new_call_id("resp_");
    let item = match answer {
        Answer::ToolCall(name) => {
            let (name, namespace) = split_namespace(name, namespaced.contains(name));
            let mut item = json!({
                "type": "function_call", "id": shared.log.new_call_id("fc_"),
                "call_id": shared.log.new_call_id("call_"), "name": name,
                "arguments": args.to_string(), "status": "completed",
            });
            if let Some(namespace) = namespace {
                item["namespace"] = json!(namespace);
            }
            item
        }
        other => json!({
            "type": "message", "id": shared.log.new_call_id("msg_"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text_of(other), "annotations": []}],
        }),
    };
    let usage = json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15});
    let response = |status: &str, output: Value| {
        json!({"id": id, "object": "response", "created_at": Utc::now().timestamp(),
            "status": status, "model": model, "output": output, "usage": usage})
    };
    if !stream {
        return json_reply(StatusCode::OK, &response("completed", json!([item])));
    }
    let mut out = String::new();
    let mut event = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        sse_event(&mut out, Some(name), &data);
    };
    event(
        "response.created",
        json!({"response": response("in_progress", json!([]))}),
    );
    event(
        "response.output_item.added",
        json!({"output_index": 0, "item": item}),
    );
    if let Some(text) = item["content"][0]["text"].as_str() {
        event(
            "response.output_text.delta",
            json!({"output_index": 0, "content_index": 0, "item_id": item["id"], "delta": text}),
        );
    }
    event(
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    );
    event(
        "response.completed",
        json!({"response": response("completed", json!([item]))}),
    );
    sse_reply(out)
}
