//! A session with many streams: the tree builds only the streams around the selection (a few
//! panes' worth), and moving the selection walks the streams one at a time across the edges of
//! that window, the selected stream always on screen.

use chrono::{DateTime, Offset, Utc};
use mcpscope_engine::fixtures::{Script, many_calls};
use mcpscope_engine::model::Model;
use mcpscope_tui::screen::text;
use mcpscope_tui::{App, Info, Node, Pane, Selected, Theme, render_to_buffer};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

/// `n` calls in one session, each on its own stream (streams 2 to n + 1), folded.
fn session_of(n: usize) -> (Model, DateTime<Utc>) {
    let events = many_calls(n);
    let mut model = Model::new();
    for event in &events {
        model.apply(event);
    }
    let now = events.last().map_or_else(Utc::now, |e| e.t);
    (model, now)
}

#[test]
fn the_tree_walks_a_long_session_one_stream_at_a_time_across_its_window() {
    let (model, now) = session_of(600);
    let (width, height) = (200, 50);
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(&model);
    app.set_focus(Pane::Tree);
    let screen = text(&render_to_buffer(&mut app, &model, now, width, height));
    // The first call's stream is selected: nothing before it is left out.
    assert!(!screen.contains("earlier streams"), "{screen}");

    let down = KeyEvent::new(KeyCode::Down, KeyModifiers::NONE);
    let mut seen = Vec::new();
    for _ in 0..400 {
        app.handle_key(down, &model);
        app.sync(&model);
        let screen = text(&render_to_buffer(&mut app, &model, now, width, height));
        if let Some(stream) = app.selected_stream(&model) {
            assert!(
                screen.contains(&format!("POST#{stream} ")),
                "the selected stream is on screen\n{screen}"
            );
            seen.push(stream);
        }
    }
    // Down walks the streams one by one, none skipped at the window's edge.
    let streams = seen;
    assert!(streams.len() > 300, "{streams:?}");
    for pair in streams.windows(2) {
        assert_eq!(pair[0] + 1, pair[1], "{streams:?}");
    }
}

/// Keys faster than frames: the selection runs past the window's edge onto the count of the
/// streams left out. The next frame selects the stream that count begins with, and the walk
/// goes on from there, one stream a key.
#[test]
fn keys_faster_than_frames_walk_on_past_the_window_edge() {
    let (model, now) = session_of(600);
    let (width, height) = (200, 50);
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(&model);
    app.set_focus(Pane::Tree);
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    render_to_buffer(&mut app, &model, now, width, height);
    app.handle_key(key(KeyCode::End), &model);
    render_to_buffer(&mut app, &model, now, width, height);
    assert_eq!(app.selected_stream(&model), Some(601));
    // Up, with no frame drawn in between, until the count of earlier streams is selected.
    let mut presses = 0;
    while !matches!(app.tree().selected().last(), Some(Node::More(..))) {
        app.handle_key(key(KeyCode::Up), &model);
        presses += 1;
        assert!(presses < 200, "{:?}", app.tree().selected());
    }
    let screen = text(&render_to_buffer(&mut app, &model, now, width, height));
    // `presses - 1` streams walked (601 down to the window's first), the count is the next.
    let beyond = 601 - presses as u64;
    assert_eq!(app.selected_stream(&model), Some(beyond), "{screen}");
    assert!(screen.contains(&format!("POST#{beyond} ")), "{screen}");
    for n in 1..=100 {
        app.handle_key(key(KeyCode::Up), &model);
        render_to_buffer(&mut app, &model, now, width, height);
        assert_eq!(app.selected_stream(&model), Some(beyond - n));
    }
}

/// A stream of 2,000 progress notifications, opened in the tree: its messages are built a
/// window at a time too, and walking them moves one message per key, the selection on screen.
#[test]
fn an_open_stream_walks_its_many_messages_one_at_a_time() {
    let mut script = Script::new();
    script.handshake(0, 1, "s1");
    script.call(100, 2, "s1", 1, "slow");
    for n in 0..2_000i64 {
        script.sse(
            101 + n,
            2,
            None,
            json!({"jsonrpc":"2.0","method":"notifications/progress",
                   "params":{"progressToken":"t","progress":n,"message":format!("step {n}")}}),
            (0, 40),
        );
    }
    let (model, _) = script.fold();
    let now = script.now();
    let (width, height) = (200, 50);
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(&model);
    app.set_focus(Pane::Tree);
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    let mut screen = String::new();
    // Down to the call's stream (its call is selected, so it is already), and open it.
    for _ in 0..10 {
        render_to_buffer(&mut app, &model, now, width, height);
        if app.tree().selected().last() == Some(&Node::Stream(2)) {
            break;
        }
        app.handle_key(key(KeyCode::Down), &model);
    }
    assert_eq!(app.tree().selected().last(), Some(&Node::Stream(2)));
    app.handle_key(key(KeyCode::Right), &model);
    let mut walked = Vec::new();
    for _ in 0..300 {
        app.handle_key(key(KeyCode::Down), &model);
        app.sync(&model);
        screen = text(&render_to_buffer(&mut app, &model, now, width, height));
        if let Selected::Message(m) = app.selected() {
            walked.push(m);
        }
    }
    assert!(walked.len() > 250, "{walked:?}\n{screen}");
    for pair in walked.windows(2) {
        assert_eq!(pair[0] + 1, pair[1], "{walked:?}");
    }
    // The detail pane shows the message selected last.
    let last = model.messages.get(walked[walked.len() - 1]).expect("held");
    let progress = &last.body.value()["params"]["progress"];
    assert!(progress.as_u64().is_some_and(|p| p > 250), "{progress}");
    assert!(
        screen.contains(&format!("\"progress\": {progress}")),
        "progress {progress} selected and shown\n{screen}"
    );
}
