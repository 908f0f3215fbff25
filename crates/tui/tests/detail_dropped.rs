//! The detail pane says how many of a stream's events the model no longer holds, beside the
//! ones it shows, and says nothing of the kind for a stream that lost none.

use chrono::{Offset, Utc};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::{Model, Retention};
use mcpscope_tui::App;
use mcpscope_tui::{Info, Theme};
use ratatui::layout::Rect;
use serde_json::json;

/// The detail pane's text for the selected call `tool`.
fn detail_of(model: &Model, tool: &str) -> String {
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(model);
    let index = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some(tool))
        .map(|c| c.index)
        .expect("the call");
    assert!(app.select_call(model, index), "its row");
    app.layout(model, Utc::now(), Rect::new(0, 0, 160, 48));
    app.detail()
        .lines()
        .iter()
        .map(|line| {
            line.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

#[test]
fn a_stream_past_its_detail_limit_says_how_many_events_it_no_longer_holds() {
    let mut script = Script::new();
    script.handshake(0, 1, "s1").call(100, 2, "s1", 7, "slow");
    for i in 0..5_000u64 {
        let progress = json!({"jsonrpc":"2.0","method":"notifications/progress",
            "params":{"progressToken":"t","progress":i}});
        script.sse(200 + i as i64, 2, None, progress, (i * 100, i * 100 + 100));
    }
    script.call(6_000, 3, "s1", 8, "quick");
    script.sse(
        4_010,
        3,
        None,
        json!({"jsonrpc":"2.0","id":8,"result":{"content":[]}}),
        (0, 64),
    );
    let mut model = Model::with_retention(Retention::window(100));
    for event in &script.events {
        model.apply(event);
    }
    let slow = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("slow"))
        .expect("slow");
    let dropped = model
        .stream(slow.request_stream)
        .expect("its stream")
        .dropped_marks;
    assert!(
        dropped > 0,
        "5,000 events on one stream exceed twice its detail limit"
    );

    let text = detail_of(&model, "slow");
    assert!(
        text.contains(&format!("… {dropped} earlier events not held in memory")),
        "{text}"
    );
    let text = detail_of(&model, "quick");
    assert!(!text.contains("earlier events not held"), "{text}");
}
