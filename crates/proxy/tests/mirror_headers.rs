//! 2026-07-28 requests whose `Mcp-Method`/`Mcp-Name` headers disagree with their body, through a
//! live proxy in front of the test server on 127.0.0.1: the proxy reports an invalid message
//! naming both values and forwards the request unchanged (the server refuses it with
//! HeaderMismatch, which reaches the client); agreeing headers are not reported.

use std::time::Duration;

use http::Method;
use mcpscope_engine::event::{Direction, EventKind};
use mcpscope_testserver::client::McpClient;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

const BOUND: Duration = Duration::from_secs(20);

fn echo(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "hi"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// The invalid-message reasons reported so far (waits a little for stragglers).
async fn invalid_reasons(
    events: &mut UnboundedReceiver<mcpscope_engine::event::Event>,
) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(300), events.recv()).await {
        if let EventKind::InvalidMessage { dir, reason, .. } = e.kind {
            assert_eq!(dir, Direction::ClientToServer);
            out.push(reason);
        }
    }
    out
}

#[tokio::test]
async fn a_mismatch_is_reported_and_forwarded_unchanged() {
    tokio::time::timeout(BOUND, async {
        let mut live = mcpscope_testkit::live::start().await;
        let mut c = McpClient::new(&live.url).expect("client");

        let agree = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let answer = c
            .send(Method::POST, Some(&echo(1)), &agree)
            .await
            .expect("send")
            .answer(None)
            .await;
        assert_eq!(answer.status, 200);
        assert!(invalid_reasons(&mut live.events).await.is_empty());

        let wrong_name = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "poke"),
        ];
        let answer = c
            .send(Method::POST, Some(&echo(2)), &wrong_name)
            .await
            .expect("send")
            .answer(None)
            .await;
        // Forwarded as it was: the server saw the mismatch too.
        assert_eq!(answer.status, 400);
        assert_eq!(answer.messages[0]["error"]["code"], -32020);
        let reasons = invalid_reasons(&mut live.events).await;
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].contains("\"poke\"") && reasons[0].contains("\"echo\""),
            "{reasons:?}"
        );

        let wrong_method = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "echo"),
        ];
        let answer = c
            .send(Method::POST, Some(&echo(3)), &wrong_method)
            .await
            .expect("send")
            .answer(None)
            .await;
        assert_eq!(answer.status, 400);
        let reasons = invalid_reasons(&mut live.events).await;
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].contains("\"tools/list\"") && reasons[0].contains("\"tools/call\""),
            "{reasons:?}"
        );
        live.proxy.shutdown();
        live.server.shutdown().await;
    })
    .await
    .expect("bounded");
}
