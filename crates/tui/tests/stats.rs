//! The `S` stats overlay on a shipped recording: its per-tool percentiles against a computation
//! by hand from the recording's events, definition bytes, and a replay's cursor (only what
//! happened up to it counts).

use std::collections::BTreeMap;
use std::path::Path;

use mcpscope_engine::event::{Direction, Event, EventKind};
use mcpscope_engine::model::Model;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::screen::text;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;

fn events() -> Vec<Event> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/healthy.jsonl");
    mcpscope_engine::record::read_file(&file)
        .expect("read")
        .events
}

/// The screen with the overlay open, at the model's last event.
fn stats_screen(model: &Model) -> String {
    let mut app = mcpscope_tui::screen::proxy_view(None);
    app.handle_key(KeyEvent::new(KeyCode::Char('S'), KeyModifiers::NONE), model);
    assert!(app.stats());
    let now = model.last_t.unwrap_or_default();
    text(&render_to_buffer(&mut app, model, now, 140, 40))
}

/// Per tool, the milliseconds from each `tools/call` request message to its response message.
fn by_hand(events: &[Event]) -> BTreeMap<String, Vec<f64>> {
    let mut sent = BTreeMap::new();
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for event in events {
        let EventKind::Message { dir, body, .. } = &event.kind else {
            continue;
        };
        let Some(id) = body.get("id").map(Value::to_string) else {
            continue;
        };
        match dir {
            Direction::ClientToServer => {
                if body.get("method").and_then(Value::as_str) == Some("tools/call")
                    && let Some(tool) = body.pointer("/params/name").and_then(Value::as_str)
                {
                    sent.insert(id, (event.t, tool.to_string()));
                }
            }
            Direction::ServerToClient => {
                if let Some((t0, tool)) = sent.remove(&id) {
                    let us = (event.t - t0).num_microseconds().expect("µs");
                    out.entry(tool).or_default().push(us as f64 / 1000.0);
                }
            }
        }
    }
    out
}

/// The overlay's tool rows: name → the cells after it (calls, err %, p50, p95, p99, def B).
fn tool_rows(screen: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for line in screen.lines() {
        let Some(at) = line.find("│ tool ") else {
            continue;
        };
        let cells: Vec<String> = line[at + "│ tool ".len()..]
            .split_whitespace()
            .take_while(|c| !c.starts_with('│'))
            .map(str::to_string)
            .collect();
        if cells.len() == 7 && cells[0] != "/" {
            out.insert(cells[0].clone(), cells[1..].to_vec());
        }
    }
    out
}

/// Nearest rank: sort, take the ⌈p·n⌉-th.
fn rank(mut samples: Vec<f64>, p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((p * samples.len() as f64).ceil() as usize).max(1) - 1]
}

#[test]
fn the_stats_overlay_shows_percentiles_computed_by_hand() {
    let events = events();
    let model = Model::from_events(&events).0;
    let screen = stats_screen(&model);
    let hand = by_hand(&events);
    assert!(!hand.is_empty());
    let rows = tool_rows(&screen);
    for (tool, samples) in &hand {
        let row = rows
            .get(tool)
            .unwrap_or_else(|| panic!("no row for {tool}:\n{screen}"));
        // calls, err %, p50, p95, p99, def B
        assert_eq!(row[0], samples.len().to_string(), "{tool}: {row:?}");
        for (i, p) in [(2, 0.50), (3, 0.95), (4, 0.99)] {
            assert_eq!(
                row[i],
                format!("{:.1}", rank(samples.clone(), p)),
                "{tool} p{}: {row:?}",
                p * 100.0
            );
        }
        let listed = model
            .sessions
            .iter()
            .find_map(|s| s.tools.get(tool))
            .and_then(|info| info.definition.as_ref())
            .expect("definition");
        assert_eq!(row[5], listed.len().to_string(), "{tool}: {row:?}");
    }
    // `fail` was listed but never called: a row with its bytes and no figures.
    assert_eq!(rows["fail"][..5], ["0", "–", "–", "–", "–"], "{screen}");
    insta::assert_snapshot!("stats_overlay", screen);
}

#[test]
fn in_a_replay_only_calls_up_to_the_cursor_count() {
    let events = events();
    let hand = by_hand(&events);
    // The cursor just after the first tools/call's response.
    let first = events
        .iter()
        .position(|e| {
            matches!(&e.kind, EventKind::Message { dir: Direction::ServerToClient, body, .. }
                if body.pointer("/result/content").is_some())
        })
        .expect("a tool result");
    let model = Model::from_events(&events[..=first]).0;
    let screen = stats_screen(&model);
    let called: Vec<String> = tool_rows(&screen)
        .into_iter()
        .filter(|(_, row)| row[0] != "0")
        .map(|(tool, _)| tool)
        .collect();
    assert_eq!(called, ["echo"], "{screen}");
    assert!(hand.len() > 1, "{hand:?}");
    assert!(
        screen.contains("method tools/call                 1 "),
        "{screen}"
    );
}
