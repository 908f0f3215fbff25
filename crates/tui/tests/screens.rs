//! Whole-screen snapshots of the TUI on a `TestBackend`, built from synthetic events.

use chrono::{DateTime, Utc};
use mcpscope_engine::fixtures::{at, scenario, scenario_now};
use mcpscope_engine::model::Model;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::screen::text;
use mcpscope_tui::{App, Pane};
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn app() -> App {
    mcpscope_tui::screen::proxy_view(Some("recordings/run.jsonl"))
}

fn model() -> Model {
    Model::from_events(&scenario()).0
}

/// Lays the view out for a `width` × `height` screen and draws it, as the live loop does.
fn frame(app: &mut App, model: &Model, now: DateTime<Utc>, width: u16, height: u16) -> Buffer {
    render_to_buffer(app, model, now, width, height)
}

fn screen(app: &mut App, model: &Model, now: DateTime<Utc>) -> String {
    text(&frame(app, model, now, 140, 40))
}

fn key(app: &mut App, model: &Model, code: KeyCode) {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), model);
}

fn typed(app: &mut App, model: &Model, s: &str) {
    for c in s.chars() {
        key(app, model, KeyCode::Char(c));
    }
}

#[test]
fn empty_screen() {
    let mut app = app();
    let model = Model::new();
    let s = screen(&mut app, &model, scenario_now());
    assert!(s.contains("no calls yet"), "{s}");
    insta::assert_snapshot!("empty", s);
}

#[test]
fn several_pending_calls() {
    let mut app = app();
    // Before the deaths at +4.5 s: poke and slow are pending on open streams.
    let events = scenario();
    let cut = events
        .iter()
        .position(|e| e.t >= at(4_500))
        .unwrap_or(events.len());
    let model = Model::from_events(&events[..cut]).0;
    let s = screen(&mut app, &model, at(4_000));
    assert_eq!(model.counts().pending, 2);
    for tool in ["tools/call slow", "tools/call poke"] {
        assert!(s.contains(tool), "{tool} missing:\n{s}");
    }
    insta::assert_snapshot!("several_pending", s);
}

#[test]
fn orphaned_call_first_with_its_death_time() {
    let mut app = app();
    let model = model();
    let s = screen(&mut app, &model, scenario_now());
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("tools/call")).collect();
    let first = rows.first().copied().unwrap_or_default();
    assert!(first.contains("poke"), "orphan not first: {first}");
    assert!(
        first.contains("died 19:59:46.500 reset (upstream)"),
        "{first}"
    );
    assert!(first.contains("orphaned"), "{first}");
    assert!(first.contains("new GET"), "reaction missing: {first}");
    insta::assert_snapshot!("orphaned", s);
}

#[test]
fn answered_calls_can_be_hidden() {
    let mut app = app();
    let model = model();
    let before = screen(&mut app, &model, scenario_now());
    assert!(before.contains("tools/call echo"));
    key(&mut app, &model, KeyCode::Char('h'));
    let after = screen(&mut app, &model, scenario_now());
    assert!(!after.contains("tools/call echo"), "{after}");
    assert!(after.contains("tools/call poke"));
}

#[test]
fn tree_expanded_and_linked_to_the_selected_call() {
    let mut app = app();
    let model = model();
    screen(&mut app, &model, scenario_now());
    // The first row (the orphaned poke) selects its stream, POST#3, in the tree.
    let selected = app.tree().selected().to_vec();
    assert_eq!(
        selected,
        vec![
            mcpscope_tui::Node::Session(1),
            mcpscope_tui::Node::Stream(3)
        ]
    );
    key(&mut app, &model, KeyCode::Tab);
    assert_eq!(app.focus(), Pane::Tree);
    key(&mut app, &model, KeyCode::Enter); // open POST#3
    let s = screen(&mut app, &model, scenario_now());
    assert!(s.contains("→ tools/call id=3"), "{s}");
    assert!(s.contains("← notifications/progress"), "{s}");
    // Moving in the tree to another stream selects its call in the table.
    key(&mut app, &model, KeyCode::Down);
    key(&mut app, &model, KeyCode::Down);
    key(&mut app, &model, KeyCode::Down);
    screen(&mut app, &model, scenario_now());
    assert_eq!(
        app.calls().rows.get(app.calls().row),
        Some(&2),
        "tree selection did not select the slow call"
    );
    insta::assert_snapshot!("tree_expanded", s);
}

#[test]
fn detail_pane_of_the_orphaned_call() {
    let mut app = app();
    let model = model();
    screen(&mut app, &model, scenario_now());
    key(&mut app, &model, KeyCode::Enter);
    let s = screen(&mut app, &model, scenario_now());
    assert!(
        s.contains("orphaned — stream ended before the response"),
        "{s}"
    );
    assert!(s.contains("1st byte"), "{s}");
    assert!(s.contains("bytes 0..96"), "{s}");
    assert!(s.contains("\"name\": \"poke\""), "{s}");
    insta::assert_snapshot!("detail", s);
    key(&mut app, &model, KeyCode::Esc);
    assert!(!app.zoom());
}

#[test]
fn help_overlay_lists_every_key() {
    let mut app = app();
    let model = model();
    key(&mut app, &model, KeyCode::Char('?'));
    let s = screen(&mut app, &model, scenario_now());
    for k in [
        "Tab", "PgUp", "filter", "session:", "follow", "pause", "theme", "OSC 52", "stats",
    ] {
        assert!(s.contains(k), "{k} missing from help:\n{s}");
    }
    // A view without the proxy's control handle offers none of its commands.
    for k in ["fault", "re-send", "intercept", "seek"] {
        assert!(!s.contains(k), "{k} offered:\n{s}");
    }
    insta::assert_snapshot!("help", s);
    key(&mut app, &model, KeyCode::Char('x'));
    assert!(!app.help());
}

#[test]
fn filter_applied() {
    let mut app = app();
    let model = model();
    key(&mut app, &model, KeyCode::Char('/'));
    typed(&mut app, &model, "tool:peek");
    key(&mut app, &model, KeyCode::Enter);
    let s = screen(&mut app, &model, scenario_now());
    assert!(s.contains("tools/call peek"), "{s}");
    assert!(!s.contains("tools/call poke"), "{s}");
    assert!(s.contains("filter: tool:peek"), "{s}");
    insta::assert_snapshot!("filter", s);
    key(&mut app, &model, KeyCode::Char('/'));
    key(&mut app, &model, KeyCode::Esc);
    let s = screen(&mut app, &model, scenario_now());
    assert!(s.contains("tools/call poke"), "{s}");
}

#[test]
fn status_filter_token() {
    let mut app = app();
    let model = model();
    key(&mut app, &model, KeyCode::Char('/'));
    typed(&mut app, &model, "status:orphaned");
    key(&mut app, &model, KeyCode::Enter);
    assert_eq!(app.calls().rows.len(), 1);
}

#[test]
fn waterfall_marks_the_death() {
    let mut app = app();
    let model = model();
    let s = screen(&mut app, &model, scenario_now());
    let line = s
        .lines()
        .find(|l| l.contains("POST#3 sse") && l.contains('✕'))
        .unwrap_or_default();
    assert!(line.contains('•'), "event mark missing: {s}");
    let line6 = s
        .lines()
        .find(|l| l.contains("POST#6 sse") && l.contains('├'))
        .unwrap_or_default();
    assert!(line6.contains('◆'), "result mark missing: {s}");
}

#[test]
fn small_sizes_never_panic() {
    let model = model();
    for (w, h) in [(60, 15), (20, 5), (1, 1), (80, 24), (200, 3)] {
        let mut app = app();
        let s = text(&frame(&mut app, &model, scenario_now(), w, h));
        if (w, h) == (60, 15) {
            assert!(s.contains("poke"), "60x15 unusable:\n{s}");
        }
        for code in [
            KeyCode::Tab,
            KeyCode::Char('?'),
            KeyCode::Enter,
            KeyCode::Tab,
        ] {
            key(&mut app, &model, code);
            frame(&mut app, &model, scenario_now(), w, h);
        }
    }
}

#[test]
fn keys_move_the_selection() {
    let mut app = app();
    let model = model();
    screen(&mut app, &model, scenario_now());
    assert_eq!(app.calls().row, 0);
    key(&mut app, &model, KeyCode::Char('j'));
    assert_eq!(app.calls().row, 1);
    key(&mut app, &model, KeyCode::Char('G'));
    assert_eq!(app.calls().row, app.calls().rows.len() - 1);
    key(&mut app, &model, KeyCode::Char('g'));
    assert_eq!(app.calls().row, 0);
    key(&mut app, &model, KeyCode::PageDown);
    assert_eq!(app.calls().row, app.calls().rows.len() - 1);
    let quit = app.handle_key(
        KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE),
        &model,
    );
    assert_eq!(quit, vec![mcpscope_tui::Effect::Quit]);
    let quit = app.handle_key(
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        &model,
    );
    assert_eq!(quit, vec![mcpscope_tui::Effect::Quit]);
}

#[test]
fn copy_yields_the_request_json() {
    let mut app = app();
    let model = model();
    screen(&mut app, &model, scenario_now());
    let effects = app.handle_key(
        KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE),
        &model,
    );
    match effects.as_slice() {
        [mcpscope_tui::Effect::Copy(text)] => assert!(text.contains("\"poke\""), "{text}"),
        other => panic!("expected a copy, got {other:?}"),
    }
}

#[test]
fn detail_pane_says_what_a_rescued_call_got() {
    let mut events = scenario();
    let base = Model::from_events(&events).0;
    let orphan = base
        .calls
        .iter()
        .find(|c| matches!(c.verdict, mcpscope_engine::model::Verdict::Orphaned { .. }))
        .expect("the scenario has an orphan");
    let t = events.last().map(|e| e.t).expect("events");
    events.push(mcpscope_engine::event::Event::at(
        t,
        mcpscope_engine::event::EventKind::CallRescued {
            stream: orphan.owner,
            id: orphan.id.value(),
            message: "upstream stream reset 5 ms after the last event; mcpscope --rescue".into(),
        },
    ));
    let model = Model::from_events(&events).0;
    let mut app = app();
    screen(&mut app, &model, scenario_now());
    key(&mut app, &model, KeyCode::Enter);
    let s = screen(&mut app, &model, scenario_now());
    assert!(
        s.contains("orphaned — stream ended before the response"),
        "{s}"
    );
    assert!(
        s.contains("the client got: upstream stream reset 5 ms after the last event"),
        "{s}"
    );
}

/// At 80 × 24 and 60 × 20 the orphan's row gives the death's cause and age first; at 100 × 30
/// its clock time too.
#[test]
fn narrow_screens_give_an_orphans_cause_and_age_first() {
    let model = model();
    let now = scenario_now();
    for (width, height, name) in [
        (80, 24, "narrow_80x24"),
        (100, 30, "narrow_100x30"),
        (60, 20, "narrow_60x20"),
    ] {
        let mut app = app();
        let s = text(&frame(&mut app, &model, now, width, height));
        let row = s
            .lines()
            .find(|l| l.contains("poke"))
            .unwrap_or_else(|| panic!("no poke row at {width}x{height}:\n{s}"));
        assert!(
            row.contains("reset ") && row.contains("s ago"),
            "{width}x{height}: {row}\n{s}"
        );
        if width >= 100 {
            assert!(row.contains("19:59:46.500"), "{width}x{height}: {row}");
        }
        if width >= 80 {
            assert!(row.contains("orphaned"), "{width}x{height}: {row}");
        }
        insta::assert_snapshot!(name, s);
    }
}

/// At 80 × 24 the Sessions pane names the selected stream's session even when the tree has
/// scrolled past the session's own row (a call on a late stream selected).
#[test]
fn narrow_sessions_pane_keeps_the_session_row() {
    let model = model();
    let now = scenario_now();
    let mut app = app();
    frame(&mut app, &model, now, 80, 24);
    key(&mut app, &model, KeyCode::Down);
    key(&mut app, &model, KeyCode::Down);
    let s = text(&frame(&mut app, &model, now, 80, 24));
    let tree: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.contains("Sessions") && !l.contains("· streams"))
        .take(7)
        .collect();
    assert!(
        tree.iter()
            .any(|l| l.chars().take(32).collect::<String>().contains("s1")),
        "the session's row is gone:\n{s}"
    );
}
