//! `subscriptions/listen` streams in the model: what each listens to, and its death.

use mcpscope_engine::event::{EndHow, Leg};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::SubscriptionState;
use serde_json::{Value, json};

fn listen(id: i64, notifications: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": notifications,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

fn ack(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {}, "_meta": {"io.modelcontextprotocol/subscriptionId": id}}})
}

#[test]
fn listen_streams_show_what_they_hear_of_and_their_death() {
    let h: &[(&str, &str)] = &[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    let mut s = Script::ticking();
    s.post(
        1,
        h,
        listen(
            1,
            json!({"toolsListChanged": true, "resourceSubscriptions": ["a://b"]}),
        ),
    )
    .respond(1, 200, "text/event-stream", &[])
    .event(1, None, Some(ack(1)));
    s.post(2, h, listen(2, json!({"promptsListChanged": true})))
        .respond(2, 200, "text/event-stream", &[])
        .event(2, None, Some(ack(2)));
    s.post(3, h, listen(3, json!({"resourcesListChanged": true})))
        .respond(3, 200, "text/event-stream", &[])
        .event(3, None, Some(ack(3)));
    // The upstream drops the first; the client closes the second; the third lives on.
    s.finish(1, EndHow::Reset, Leg::Upstream);
    s.finish(2, EndHow::Cancelled, Leg::Client);
    let (model, _) = s.fold();
    let subs = model.subscriptions();
    assert_eq!(subs.len(), 3, "{subs:?}");
    assert_eq!(subs[0].listens_to, ["tools list", "resource a://b"]);
    assert!(
        matches!(&subs[0].state, SubscriptionState::Dead(why) if why.contains("stream ended")),
        "{:?}",
        subs[0].state
    );
    assert_eq!(subs[1].listens_to, ["prompts list"]);
    assert_eq!(subs[1].state, SubscriptionState::Closed);
    assert_eq!(subs[2].listens_to, ["resources list"]);
    assert_eq!(subs[2].state, SubscriptionState::Live);
    assert_eq!(subs[2].state.describe(), "live");
}
