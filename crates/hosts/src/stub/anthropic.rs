//! Anthropic Messages.

use super::*;

pub(super) fn turn(shared: &Shared, at: DateTime<Utc>, request: &Value) -> Turn {
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut results = Vec::new();
    for message in items(request, "messages") {
        for block in items(message, "content") {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                continue;
            };
            if !id.contains("mcpscope") {
                continue;
            }
            let text = content_text(block.get("content").unwrap_or(&Value::Null));
            let is_error = block
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            results.push(shared.tool_result(at, id, &text, is_error));
        }
    }
    Turn {
        tools,
        results,
        stream: request
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

pub(super) fn reply(
    shared: &Shared,
    answer: &Answer,
    model: &str,
    args: &Value,
    stream: bool,
) -> Reply {
    let message_id = shared.log.new_call_id("msg_");
    let (block, stop_reason, input_json) = match answer {
        Answer::ToolCall(name) => (
            json!({"type": "tool_use", "id": shared.log.new_call_id("toolu_"), "name": name, "input": args}),
            "tool_use",
            Some(args.to_string()),
        ),
        other => (
            json!({"type": "text", "text": text_of(other)}),
            "end_turn",
            None,
        ),
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    if !stream {
        return json_reply(
            StatusCode::OK,
            &json!({
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
                "usage": usage,
            }),
        );
    }
    let mut out = String::new();
    sse_event(
        &mut out,
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }}),
    );
    let (start, delta) = match (&input_json, &block) {
        (Some(input), block) => {
            let mut start = block.clone();
            start["input"] = json!({});
            (
                start,
                json!({"type": "input_json_delta", "partial_json": input}),
            )
        }
        (None, block) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        ),
    };
    sse_event(
        &mut out,
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": 0, "content_block": start}),
    );
    sse_event(&mut out, Some("ping"), &json!({"type": "ping"}));
    sse_event(
        &mut out,
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    );
    sse_event(
        &mut out,
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": 0}),
    );
    sse_event(
        &mut out,
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    );
    sse_event(
        &mut out,
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    );
    sse_reply(out)
}
