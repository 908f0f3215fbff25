//! What the model let go of to stay within its memory policy is said on screen: the status bar
//! counts it, and the stats overlay says which calls it no longer counts. Nothing is said when
//! nothing was let go of.

use chrono::{DateTime, Offset, Utc};
use mcpscope_engine::event::{EndHow, Leg};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::{Model, Retention};
use mcpscope_tui::App;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::view::stats;
use mcpscope_tui::{Info, Theme};
use serde_json::json;

/// `n` answered `tools/call`s, each on its own stream, folded under `retention`.
fn answered_calls(n: usize, retention: Retention) -> (Model, DateTime<Utc>) {
    let mut script = Script::new();
    script.handshake(0, 1, "s1");
    for i in 0..n {
        let stream = i as u64 + 2;
        let ms = 100 + 10 * i as i64;
        let id = i as i64 + 1;
        script
            .call(ms, stream, "s1", id, "poke")
            .sse(
                ms + 5,
                stream,
                None,
                json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}}),
                (0, 40),
            )
            .end(ms + 6, stream, EndHow::Eof, Leg::Upstream);
    }
    let mut model = Model::with_retention(retention);
    for event in &script.events {
        model.apply(event);
    }
    (model, script.now())
}

/// The last line of the screen: the status bar.
fn status_bar(model: &Model, now: DateTime<Utc>) -> String {
    let (width, height) = (240, 40);
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(model);
    let buf = render_to_buffer(&mut app, model, now, width, height);
    (0..width)
        .map(|x| buf[(x, height - 1)].symbol())
        .collect::<String>()
}

#[test]
fn the_status_bar_counts_what_the_model_evicted_and_the_stats_say_what_they_miss() {
    let (model, now) = answered_calls(3_000, Retention::window(100));
    let evicted = model.evicted();
    assert!(
        evicted.compacted > 0 && evicted.dropped > 0 && evicted.streams > 0,
        "3,000 answered calls under a 100-call window evict: {evicted:?}"
    );
    let bar = status_bar(&model, now);
    let mut expected = format!(
        "evicted {} compacted · {} calls · {} streams",
        evicted.compacted, evicted.dropped, evicted.streams
    );
    if evicted.messages > 0 {
        expected.push_str(&format!(" · {} msgs", evicted.messages));
    }
    assert!(bar.contains(&expected), "{bar:?} lacks {expected:?}");

    let overlay = stats::lines(&model).join("\n");
    assert!(
        overlay.contains(&format!(
            "not counted: {} older calls no longer held in memory",
            evicted.dropped
        )),
        "{overlay}"
    );
}

#[test]
fn nothing_is_said_of_evictions_when_nothing_was_evicted() {
    let (model, now) = answered_calls(50, Retention::window(100));
    assert_eq!(model.evicted(), Default::default());
    let bar = status_bar(&model, now);
    assert!(!bar.contains("evicted"), "{bar:?}");
    assert!(bar.contains("1 sessions"), "the bar is drawn: {bar:?}");
    assert!(!stats::lines(&model).join("\n").contains("not counted"));
}
