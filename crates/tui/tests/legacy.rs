//! The TUI on a legacy HTTP+SSE session (revision 2024-11-05): the session's revision in the
//! tree, and the rewritten `endpoint` in its SSE stream's detail.

use chrono::Duration;
use mcpscope_engine::event::{Direction, EventKind};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::Model;
use mcpscope_tui::Pane;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::screen::text;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

const ENDPOINT: &str = "http://127.0.0.1:9000/messages/?session_id=5e55";

fn legacy_model() -> Model {
    let mut s = Script::ticking();
    s.push(EventKind::StreamOpened {
        stream: 1,
        conn: 1,
        method: "GET".into(),
        path: "/sse".into(),
        headers: vec![("accept".into(), "text/event-stream".into())],
        origin: None,
    });
    s.push(EventKind::ResponseHead {
        stream: 1,
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
    });
    s.push(EventKind::Rewritten {
        stream: 1,
        what: "endpoint".into(),
        from: "http://127.0.0.1:8000/messages/?session_id=5e55".into(),
        to: ENDPOINT.into(),
    });
    s.push(EventKind::SseEvent {
        stream: 1,
        id: None,
        event: Some("endpoint".into()),
        retry: None,
        data: ENDPOINT.into(),
        start: 0,
        end: 80,
    });
    s.push(EventKind::StreamOpened {
        stream: 2,
        conn: 2,
        method: "POST".into(),
        path: "/messages/?session_id=5e55".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        origin: None,
    });
    s.push(EventKind::Message {
        stream: 2,
        dir: Direction::ClientToServer,
        body: json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}),
    });
    s.push(EventKind::ResponseHead {
        stream: 2,
        status: 202,
        headers: Vec::new(),
    });
    s.fold().0
}

#[test]
fn a_legacy_session_shows_its_revision_and_the_rewrite() {
    let model = legacy_model();
    let now = model.last_t.expect("events") + Duration::milliseconds(100);
    let mut app = mcpscope_tui::screen::proxy_view(None);
    let draw = |app: &mut mcpscope_tui::App| text(&render_to_buffer(app, &model, now, 140, 40));
    let key = |app: &mut mcpscope_tui::App, code| {
        app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), &model)
    };
    let s = draw(&mut app);
    assert!(s.contains("5e55  2024-11-05"), "{s}");
    assert!(s.contains("pending"), "the 202 is no answer: {s}");
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.focus(), Pane::Tree);
    // The session row, then its first stream: the SSE GET.
    key(&mut app, KeyCode::Home);
    key(&mut app, KeyCode::Down);
    let s = draw(&mut app);
    assert!(s.contains("GET#1 sse  conn 1  session 5e55"), "{s}");
    assert!(
        s.contains("note: rewrote endpoint: http://127.0.0.1:8000/messages/?session_id=5e55"),
        "no rewrite in the SSE stream's detail: {s}"
    );
}
