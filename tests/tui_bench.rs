//! A frame with 100,000 calls renders (the benchmark calls the same helper; no time asserted).

use std::time::Instant;

use mcpscope_engine::model::Model;
use mcpscope_testkit::fixtures::{at, many_calls};
use mcpscope_tui::render_frame_for_bench;

#[test]
fn frame_with_100k_calls_renders() {
    let (model, _) = Model::from_events(&many_calls(100_000));
    assert_eq!(model.calls.len(), 100_001);
    let mut buf = render_frame_for_bench(&model, at(200_000), 160, 48);
    for _ in 0..3 {
        let start = Instant::now();
        buf = render_frame_for_bench(&model, at(200_000), 160, 48);
        eprintln!("100k-call frame: {:?}", start.elapsed());
    }
    let text: String = (0..buf.area.width).map(|x| buf[(x, 2)].symbol()).collect();
    assert!(text.contains("orphaned"), "{text}");
}
