//! A frame with 100,000 calls renders (the benchmark draws the same way; no time asserted).

use std::time::Instant;

use chrono::{Offset, Utc};
use mcpscope_engine::fixtures::{at, many_calls};
use mcpscope_engine::model::{Model, Retention};
use mcpscope_tui::{App, Info, Theme, render_to_buffer};
use ratatui::buffer::Buffer;

/// One frame of a fresh view (a new `App`, laid out, then drawn).
fn fresh_frame(model: &Model) -> Buffer {
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    render_to_buffer(&mut app, model, at(200_000), 160, 48)
}

#[test]
fn frame_with_100k_calls_renders() {
    // Every call held: the frame's cost with the whole table, not the default window's.
    let mut model = Model::with_retention(Retention::unbounded());
    for event in &many_calls(100_000) {
        model.apply(event);
    }
    assert_eq!(model.calls.len(), 100_001);
    let mut buf = fresh_frame(&model);
    for _ in 0..3 {
        let start = Instant::now();
        buf = fresh_frame(&model);
        eprintln!("100k-call frame: {:?}", start.elapsed());
    }
    let text: String = (0..buf.area.width).map(|x| buf[(x, 2)].symbol()).collect();
    assert!(text.contains("orphaned"), "{text}");
}
