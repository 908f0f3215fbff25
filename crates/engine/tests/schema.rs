//! Schema checks over folded models: a result without `structuredContent` where the tool
//! declares an `outputSchema`, and an accepted elicitation whose content breaks its
//! `requestedSchema`.

use mcpscope_engine::event::{EndHow, Leg};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::Model;
use mcpscope_engine::schema::{Checker, Side, Violation};
use serde_json::json;

/// A session whose `t` declares an `outputSchema`, a call of `t` answered without
/// `structuredContent`, and an elicitation accepted with content that breaks its schema.
fn folded() -> Model {
    let mut s = Script::new();
    s.handshake(0, 1, "s1")
        .open(10, 2, "POST", Some("s1"))
        .send(10, 2, json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .head(11, 2, 200, "json", Some("s1"))
        .reply(
            11,
            2,
            json!({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"t",
            "inputSchema":{"type":"object"},
            "outputSchema":{"type":"object","properties":{"n":{"type":"number"}}}}]}}),
        )
        .end(12, 2, EndHow::Eof, Leg::Upstream)
        .call(20, 3, "s1", 2, "t")
        .sse(
            21,
            3,
            None,
            json!({"jsonrpc":"2.0","id":"e1","method":"elicitation/create",
            "params":{"message":"name?","requestedSchema":{"type":"object",
            "properties":{"name":{"type":"string"}},"required":["name"]}}}),
            (0, 10),
        )
        .open(22, 4, "POST", Some("s1"))
        .send(
            22,
            4,
            json!({"jsonrpc":"2.0","id":"e1","result":{"action":"accept","content":{"name":5}}}),
        )
        .head(23, 4, 202, "", Some("s1"))
        .end(23, 4, EndHow::Eof, Leg::Upstream)
        .sse(
            30,
            3,
            None,
            json!({"jsonrpc":"2.0","id":2,"result":{"content":[]}}),
            (10, 20),
        )
        .end(31, 3, EndHow::Eof, Leg::Upstream);
    s.fold().0
}

#[test]
fn a_missing_structured_content_and_an_elicitation_answer_are_checked() {
    let model = folded();
    let mut checker = Checker::new();
    let all: Vec<Violation> = model
        .calls
        .iter()
        .flat_map(|call| checker.check(&model, call))
        .collect();
    let found: Vec<(Side, &str, &str)> = all
        .iter()
        .map(|v| (v.side, v.path.as_str(), v.keyword.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (Side::Output, "$", "outputSchema"),
            (Side::Elicitation, "$.name", "type")
        ],
        "{all:?}"
    );
}
