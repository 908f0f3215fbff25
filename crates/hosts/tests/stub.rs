//! The model stub over real sockets: what it answers in each API, and what it records.

use std::time::Duration;

use mcpscope_hosts::stub::{self, Answer, FINAL_TEXT, Options, SHORT_TEXT};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 POST on its own connection: status, content type, body.
async fn post(addr: std::net::SocketAddr, path: &str, body: &Value) -> (u16, String, String) {
    let body = body.to_string();
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nx-api-key: k\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.expect("write");
    tcp.write_all(body.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut raw))
        .await
        .expect("answer within 5 s")
        .expect("read");
    let raw = String::from_utf8(raw).expect("utf-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head");
    let status = head[9..12].parse().expect("status");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// The `(event, data)` pairs of an SSE body.
fn events(body: &str) -> Vec<(Option<String>, Value)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty() && !block.contains("[DONE]"))
        .map(|block| {
            let event = block
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .map(str::to_string);
            let data = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("data line");
            (event, serde_json::from_str(data).expect("JSON data"))
        })
        .collect()
}

async fn stub_for(tool: &str, args: Value) -> stub::Stub {
    stub::start(Options {
        tool: Some(tool.into()),
        tool_args: args,
        ..Options::default()
    })
    .await
    .expect("stub")
}

fn anthropic_request(messages: Value, stream: bool) -> Value {
    json!({
        "model": "claude-test", "max_tokens": 100, "stream": stream,
        "tools": [{"name": "Bash", "input_schema": {}}, {"name": "mcp__srv__slow", "input_schema": {}}],
        "messages": messages,
    })
}

#[tokio::test]
async fn anthropic_streams_one_tool_call_then_a_final_text_and_records_the_result() {
    let stub = stub_for("slow", json!({"steps": 3})).await;
    let ask = json!([{"role": "user", "content": "go"}]);
    let (status, content_type, body) = post(
        stub.addr,
        "/v1/messages?beta=true",
        &anthropic_request(ask.clone(), true),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    let events = events(&body);
    let names: Vec<&str> = events.iter().filter_map(|(e, _)| e.as_deref()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for (event, data) in &events {
        assert_eq!(data["type"].as_str(), event.as_deref(), "{data}");
    }
    let block = &events[1].1["content_block"];
    assert_eq!(
        (block["type"].as_str(), block["name"].as_str()),
        (Some("tool_use"), Some("mcp__srv__slow"))
    );
    let id = block["id"].as_str().expect("tool_use id").to_string();
    let partial = events[3].1["delta"]["partial_json"]
        .as_str()
        .expect("input_json_delta");
    assert_eq!(
        serde_json::from_str::<Value>(partial).expect("json"),
        json!({"steps": 3})
    );
    assert_eq!(events[5].1["delta"]["stop_reason"], "tool_use");
    assert!(stub.log.first_result().is_none());

    let with_result = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "is_error": true,
            "content": [{"type": "text", "text": "{\"error\": \"stream reset\", \"access_token\": \"hunter2\"}"}]}]},
    ]);
    let before = chrono::Utc::now();
    let (_, _, body) = post(
        stub.addr,
        "/v1/messages",
        &anthropic_request(with_result.clone(), true),
    )
    .await;
    let events = self::events(&body);
    assert_eq!(events[3].1["delta"]["text"], FINAL_TEXT);
    assert_eq!(events[5].1["delta"]["stop_reason"], "end_turn");
    let result = stub
        .log
        .first_result()
        .expect("the result reached the model");
    assert!(result.is_error && result.at >= before, "{result:?}");
    assert_eq!(result.call_id, id);
    assert!(result.text.contains("stream reset"), "{}", result.text);
    assert!(
        !result.text.contains("hunter2"),
        "redacted: {}",
        result.text
    );

    // The same history again (hosts resend it) is no second arrival.
    post(
        stub.addr,
        "/v1/messages",
        &anthropic_request(with_result, false),
    )
    .await;
    let seen = stub.log.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen.iter().map(|s| s.results.len()).sum::<usize>(), 1);
    assert_eq!(seen[0].answer, Answer::ToolCall("mcp__srv__slow".into()));
    assert!(seen[0].stream && seen[0].tools == 2);
}

#[tokio::test]
async fn anthropic_without_the_tool_gets_a_short_text_and_tokens_are_counted() {
    let stub = stub_for("slow", json!({})).await;
    let request =
        json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]});
    let (status, _, body) = post(stub.addr, "/v1/messages", &request).await;
    assert_eq!(status, 200);
    let message: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(message["type"], "message");
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": SHORT_TEXT}])
    );
    assert_eq!(message["stop_reason"], "end_turn");
    let (status, _, body) = post(stub.addr, "/v1/messages/count_tokens", &request).await;
    assert_eq!(status, 200);
    let count: Value = serde_json::from_str(&body).expect("json");
    assert!(
        count["input_tokens"].as_u64().is_some_and(|n| n > 0),
        "{count}"
    );
    let (status, _, _) = post(stub.addr, "/v1/other", &request).await;
    assert_eq!(status, 404);
    let answers: Vec<Answer> = stub.log.seen().into_iter().map(|s| s.answer).collect();
    assert_eq!(
        answers,
        [Answer::Text, Answer::CountTokens, Answer::NotFound]
    );
}

#[tokio::test]
async fn openai_chat_responses_and_gemini_call_the_tool_and_see_its_result() {
    let stub = stub_for("slow", json!({"a": 1})).await;
    let tools =
        json!([{"type": "function", "function": {"name": "mcp__srv__slow", "parameters": {}}}]);
    let (_, _, body) = post(
        stub.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true, "tools": tools, "messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    let chunks = events(&body);
    let call = &chunks[0].1["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "mcp__srv__slow");
    assert_eq!(call["function"]["arguments"], "{\"a\":1}");
    assert_eq!(chunks[1].1["choices"][0]["finish_reason"], "tool_calls");
    let id = call["id"].as_str().expect("id");
    let (_, _, body) = post(
        stub.addr,
        "/v1/chat/completions",
        &json!({"model": "m", "tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": id, "content": "done 3"}]}),
    )
    .await;
    let reply: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(reply["choices"][0]["message"]["content"], FINAL_TEXT);
    assert_eq!(
        stub.log.first_result().map(|r| r.text),
        Some("done 3".into())
    );

    let (_, _, body) = post(
        stub.addr,
        "/v1/responses",
        &json!({"model": "m", "stream": true, "input": [], "tools": [{"type": "function", "name": "mcp__srv__slow"}]}),
    )
    .await;
    let events = events(&body);
    let done = events
        .iter()
        .find(|(e, _)| e.as_deref() == Some("response.output_item.done"))
        .expect("output_item.done");
    assert_eq!(done.1["item"]["type"], "function_call");
    assert_eq!(
        events.last().map(|(e, _)| e.as_deref()),
        Some(Some("response.completed"))
    );

    let (_, _, body) = post(
        stub.addr,
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        &json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "slow"}]}]}),
    )
    .await;
    let chunk = &self::events(&body)[0].1;
    assert_eq!(
        chunk["candidates"][0]["content"]["parts"][0]["functionCall"],
        json!({"name": "slow", "args": {"a": 1}})
    );
}

#[test]
fn the_tool_is_found_whatever_the_host_calls_it() {
    use mcpscope_hosts::stub::offered_as;
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for offered in [
        "slow",
        "mcpscope__slow",
        "mcp__mcpscope__slow",
        "mcp_mcpscope_slow",
        "mcpscope_slow",
        "mcpscope.slow",
        "mcpscope/slow",
    ] {
        let tools = names(&["read_file", offered, "shell"]);
        assert_eq!(
            offered_as(&tools, "slow").map(String::as_str),
            Some(offered),
            "{offered}"
        );
    }
    // The closest shape wins over a tool whose own name only ends the same way.
    let tools = names(&["very_slow", "mcp__mcpscope__slow"]);
    assert_eq!(
        offered_as(&tools, "slow").map(String::as_str),
        Some("mcp__mcpscope__slow")
    );
    let tools = names(&["very_slow", "mcp_mcpscope_slow"]);
    assert_eq!(
        offered_as(&tools, "slow").map(String::as_str),
        Some("mcp_mcpscope_slow")
    );
    assert_eq!(offered_as(&names(&["slowly", "read"]), "slow"), None);
}
