//! The waterfall draws a task operation as one span from its request to its result, under the
//! stream whose answer created the task, with its polls, its dead result wait and its result
//! inside it.

use chrono::{Offset, Utc};
use mcpscope_engine::model::Model;
use mcpscope_engine::record::read_file;
use mcpscope_tui::App;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::{Info, Theme};
use std::path::Path;

/// The screen's lines for the shipped recording of a task whose first `tasks/result` stream
/// was reset (the TypeScript SDK's task client and server through the proxy).
fn screen() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/tasks-reset.jsonl");
    let recording = read_file(&path).expect("the shipped recording reads");
    let mut model = Model::new();
    for event in &recording.events {
        model.apply(event);
    }
    let now = recording.events.last().expect("events").t;
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(&model);
    let buf = render_to_buffer(&mut app, &model, now, 160, 48);
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

#[test]
fn a_task_operation_is_one_span_with_its_polls_its_dead_wait_and_its_result() {
    let lines = screen();
    let text = lines.join("\n");
    let at = lines
        .iter()
        .position(|l| l.contains("⧗ slow_task"))
        .unwrap_or_else(|| panic!("no task row:\n{text}"));
    let row = &lines[at];
    let bar: String = row
        .split("⧗ slow_task")
        .nth(1)
        .unwrap_or_default()
        .chars()
        .collect();
    // One poll, the reset result wait, the result; it began before its task was created.
    assert!(bar.contains('·'), "no tasks/get mark: {row}");
    assert!(bar.contains('✕'), "the dead result wait is missing: {row}");
    assert!(bar.contains('◆'), "no result: {row}");
    let open = bar.find('├').expect("its start");
    let died = bar.find('✕').expect("its dead wait");
    let result = bar.find('◆').expect("its result");
    assert!(open < died && died < result, "out of order: {row}");
    // Drawn under the stream whose answer created the task (the tools/call POST, stream 4).
    assert!(
        lines[at - 1].contains("POST#4"),
        "not under its stream:\n{text}"
    );
    // Exactly one span for the one task.
    assert_eq!(
        lines.iter().filter(|l| l.contains('⧗')).count(),
        1,
        "{text}"
    );
}
