//! A task operation in the TUI: one calls-table row with its tool, short task id and status
//! (the requests about the task are not rows of their own), and the detail pane's task timeline.

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{EndHow, Leg};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::Model;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::screen::text;
use serde_json::json;

const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];

fn screen(model: &Model, now: DateTime<Utc>, width: u16, height: u16) -> String {
    let mut app = mcpscope_tui::screen::proxy_view(None);
    app.sync(model);
    text(&render_to_buffer(&mut app, model, now, width, height))
}

/// A task-augmented `slow` (task `task-7f3a9c21d0`), polled once, whose `tasks/result` stream is
/// reset.
fn script() -> Script {
    let mut s = Script::ticking();
    s.initialize("2025-11-25");
    s.post(
        2,
        S1,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
               "params":{"name":"slow","arguments":{},"task":{"ttl":60000}}}),
    )
    .respond(2, 200, "application/json", S1)
    .json_body(
        2,
        json!({"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"task-7f3a9c21d0",
               "status":"working","ttl":60000,"pollInterval":500}}}),
    )
    .finish(2, EndHow::Eof, Leg::Upstream);
    s.wait(400)
        .post(
            3,
            S1,
            json!({"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"task-7f3a9c21d0"}}),
        )
        .respond(3, 200, "application/json", S1)
        .json_body(
            3,
            json!({"jsonrpc":"2.0","id":2,"result":{"taskId":"task-7f3a9c21d0",
                   "status":"completed","ttl":60000}}),
        )
        .finish(3, EndHow::Eof, Leg::Upstream);
    s.post(
        4,
        S1,
        json!({"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"task-7f3a9c21d0"}}),
    )
    .respond(4, 200, "text/event-stream", S1)
    .wait(300)
    .finish(4, EndHow::Reset, Leg::Upstream);
    s
}

#[test]
fn a_task_operation_is_one_row_with_its_task_and_a_dead_result_wait() {
    let s = script();
    let (model, _) = s.fold();
    let screen = screen(&model, s.now(), 180, 40);
    let row = screen
        .lines()
        .find(|l| l.contains("tools/call slow"))
        .unwrap_or_else(|| panic!("no row for slow\n{screen}"));
    assert!(
        row.contains("[task task-7f3 completed, result wait died"),
        "{row}\n{screen}"
    );
    assert!(row.contains("pending"), "{row}");
    let table: Vec<&str> = screen
        .lines()
        .take_while(|l| !l.contains("Sessions"))
        .collect();
    assert!(
        !table
            .iter()
            .any(|l| l.contains("tasks/result") || l.contains("tasks/get")),
        "requests about the task are not rows of their own\n{screen}"
    );
    assert!(!table.iter().any(|l| l.contains("orphaned")), "{screen}");
    assert!(screen.contains("1 pending · 0 orphaned"), "{screen}");
    assert_eq!(model.counts().orphaned, 0);
}

#[test]
fn the_detail_pane_shows_the_task_timeline() {
    let s = script();
    let (model, _) = s.fold();
    let screen = screen(&model, s.now(), 180, 80);
    for wanted in [
        "Task timeline",
        "created (working)",
        "tasks/get",
        "status completed",
        "result wait died on #4",
        "the client must ask again",
    ] {
        assert!(screen.contains(wanted), "{wanted:?} missing\n{screen}");
    }
}
