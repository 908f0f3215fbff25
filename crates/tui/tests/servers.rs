//! Two servers behind one forward proxy, on screen: the tree has a level per server, the
//! calls table gains a server column (wide screens only: narrow ones keep a death's cause and
//! age first), and the filter takes `server:`.

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId};
use mcpscope_engine::fixtures::{Script, at};
use mcpscope_engine::model::Model;
use mcpscope_tui::App;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::screen::text;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

const A: &str = "http://127.0.0.1:4001";
const B: &str = "https://tools.example";

fn open(s: &mut Script, stream: StreamId, origin: &str, session: &str) {
    s.push(EventKind::StreamOpened {
        stream,
        conn: stream,
        method: "POST".into(),
        path: "/mcp".into(),
        headers: vec![
            ("mcp-session-id".into(), session.into()),
            ("mcp-protocol-version".into(), "2025-06-18".into()),
        ],
        origin: Some(origin.into()),
    });
}

/// A's `poke` dies with its stream; B's `slow` (same session id, same JSON-RPC id) is pending,
/// B's `echo` answered.
fn model() -> (Model, DateTime<Utc>) {
    let mut s = Script::new();
    let calls = [(1, A, "poke", 1), (2, B, "slow", 1), (3, B, "echo", 2)];
    for (i, &(stream, origin, tool, id)) in calls.iter().enumerate() {
        s.at(100 * i as i64);
        open(&mut s, stream, origin, "s1");
        s.push(EventKind::Message {
            stream,
            dir: Direction::ClientToServer,
            body: json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":tool,"arguments":{}}}),
        });
        s.respond(stream, 200, "text/event-stream", &[]);
    }
    s.at(500)
        .event(3, None, Some(json!({"jsonrpc":"2.0","id":2,"result":{}})))
        .finish(3, EndHow::Eof, Leg::Upstream);
    s.at(1_000).finish(1, EndHow::Reset, Leg::Upstream);
    (Model::from_events(&s.events).0, at(4_000))
}

fn screen(app: &mut App, model: &Model, now: DateTime<Utc>, width: u16, height: u16) -> String {
    text(&render_to_buffer(app, model, now, width, height))
}

fn key(app: &mut App, model: &Model, code: KeyCode) {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), model);
}

#[test]
fn wide_the_calls_name_their_server_and_the_tree_groups_by_server() {
    let (model, now) = model();
    let mut app = mcpscope_tui::screen::proxy_view(Some("recordings/run.jsonl"));
    let s = screen(&mut app, &model, now, 160, 40);
    assert!(s.contains(" server "), "no server column:\n{s}");
    let row = |tool: &str| {
        s.lines()
            .find(|l| l.contains(&format!("tools/call {tool}")))
            .unwrap_or_else(|| panic!("no {tool} row:\n{s}"))
            .to_string()
    };
    assert!(row("poke").contains("127.0.0.1:4001"), "{}", row("poke"));
    assert!(row("poke").contains("orphaned"), "{}", row("poke"));
    assert!(row("slow").contains("tools.example"), "{}", row("slow"));
    assert!(row("slow").contains("pending"), "{}", row("slow"));
    // A node per server, in the order first seen, each over its own session named s1.
    let tree: Vec<&str> = s
        .lines()
        .filter(|l| l.contains("sessions)") || l.contains("▶ s1") || l.contains("▼ s1"))
        .collect();
    assert_eq!(tree.len(), 4, "{s}");
    let expected = [
        "▼ 127.0.0.1:4001  (1 sessions)",
        "  ▼ s1  2025-06-18  (1 streams)",
        "▼ tools.example  (1 sessions)",
        "  ▶ s1  2025-06-18  (2 streams)",
    ];
    for (line, want) in tree.iter().zip(expected) {
        assert!(line.contains(want), "{line:?} should show {want:?}");
    }
    insta::assert_snapshot!("servers_160x40", s);
}

/// The tree pane's rows, as on screen.
fn tree_rows(screen: &str) -> Vec<String> {
    let start = screen
        .lines()
        .position(|l| l.contains("Sessions · streams"))
        .expect("the tree pane");
    screen
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with('└'))
        .map(|l| {
            l.trim_start_matches('│')
                .split('│')
                .next()
                .unwrap_or("")
                .trim_end()
                .to_string()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn a_server_is_a_level_of_the_tree_that_closes_and_tells_how_its_calls_stand() {
    let (model, now) = model();
    let mut app = mcpscope_tui::screen::proxy_view(None);
    screen(&mut app, &model, now, 160, 40);
    key(&mut app, &model, KeyCode::Tab);
    key(&mut app, &model, KeyCode::Home);
    let s = screen(&mut app, &model, now, 160, 40);
    assert!(s.contains("┌ Server "), "the first row is a server:\n{s}");
    assert!(s.contains("http://127.0.0.1:4001"), "{s}");
    assert!(s.contains("1 held · 0 waiting · 1 orphaned"), "{s}");
    assert!(s.contains("sessions   1 (0 ended)"), "{s}");

    // Down to the second server: its two calls, one waiting.
    for _ in 0..3 {
        key(&mut app, &model, KeyCode::Down);
    }
    let s = screen(&mut app, &model, now, 160, 40);
    assert!(s.contains("https://tools.example"), "{s}");
    assert!(s.contains("2 held · 1 waiting · 0 orphaned"), "{s}");

    // Left closes the server: its session goes from the tree; the other server's stays.
    key(&mut app, &model, KeyCode::Left);
    let s = screen(&mut app, &model, now, 160, 40);
    let rows = tree_rows(&s);
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert!(rows[3].starts_with("▶ tools.example"), "{rows:#?}");
}

#[test]
fn the_tree_keeps_the_selection_when_a_second_server_appears() {
    let mut s = Script::new();
    open(&mut s, 1, A, "s1");
    s.push(EventKind::Message {
        stream: 1,
        dir: Direction::ClientToServer,
        body: json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poke"}}),
    });
    let first = s.events.len();
    s.at(100);
    open(&mut s, 2, B, "s2");
    s.push(EventKind::Message {
        stream: 2,
        dir: Direction::ClientToServer,
        body: json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}),
    });
    let (before, _) = Model::from_events(&s.events[..first]);
    let (after, _) = Model::from_events(&s.events);

    let mut app = mcpscope_tui::screen::proxy_view(None);
    app.sync(&before);
    screen(&mut app, &before, at(500), 160, 40);
    app.select_row(&before, 0);
    let s1 = screen(&mut app, &before, at(500), 160, 40);
    let rows = tree_rows(&s1);
    assert!(
        rows[0].starts_with("▼ s1"),
        "one server: sessions on top\n{rows:#?}"
    );

    app.sync(&after);
    let s2 = screen(&mut app, &after, at(500), 160, 40);
    let rows = tree_rows(&s2);
    assert!(rows[0].starts_with("▼ 127.0.0.1:4001"), "{rows:#?}");
    assert!(
        rows[1].starts_with("  ▼ s1"),
        "the open session stays open\n{rows:#?}"
    );
    assert!(rows[2].starts_with("    ▶ POST#1"), "{rows:#?}");
    assert!(
        rows.iter().any(|r| r.starts_with("▼ tools.example")),
        "{rows:#?}"
    );
    assert_eq!(
        app.tree().selected(),
        &[
            mcpscope_tui::server_node(Some(A)),
            mcpscope_tui::Node::Session(before.stream(1).expect("stream 1").session),
            mcpscope_tui::Node::Stream(1),
        ],
        "the selected stream is still selected, under its server"
    );
}

#[test]
fn narrow_the_server_gives_way_to_the_deaths_cause_and_age() {
    let (model, now) = model();
    for (width, height, name) in [
        (80, 24, "servers_80x24"),
        (100, 30, "servers_100x30"),
        (140, 40, "servers_140x40"),
    ] {
        let mut app = mcpscope_tui::screen::proxy_view(Some("recordings/run.jsonl"));
        let s = screen(&mut app, &model, now, width, height);
        let row = s
            .lines()
            .find(|l| l.contains("poke"))
            .unwrap_or_else(|| panic!("no poke row at {width}x{height}:\n{s}"));
        assert!(row.contains("reset "), "{width}x{height}: {row}\n{s}");
        if width < 110 {
            assert!(row.contains("s ago"), "{width}x{height}: {row}\n{s}");
        }
        assert!(!s.contains(" server "), "{width}x{height}:\n{s}");
        insta::assert_snapshot!(name, s);
    }
}

#[test]
fn one_server_shows_no_server_column() {
    let mut s = Script::new();
    open(&mut s, 1, A, "s1");
    s.push(EventKind::Message {
        stream: 1,
        dir: Direction::ClientToServer,
        body: json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poke"}}),
    });
    let model = Model::from_events(&s.events).0;
    let mut app = mcpscope_tui::screen::proxy_view(None);
    let screen = screen(&mut app, &model, at(1_000), 160, 40);
    assert!(screen.contains("tools/call poke"), "{screen}");
    assert!(!screen.contains(" server "), "{screen}");
    assert!(!screen.contains("sessions)"), "no server level:\n{screen}");
}

#[test]
fn the_filter_takes_a_server() {
    let (model, now) = model();
    // (filter, the tools left)
    let table: &[(&str, &[&str])] = &[
        ("server:tools.example", &["slow", "echo"]),
        ("server:127.0.0.1:4001", &["poke"]),
        ("server:4001", &["poke"]),
        ("server:https://tools.example", &["slow", "echo"]),
        ("server:elsewhere", &[]),
    ];
    for &(filter, tools) in table {
        let mut app = mcpscope_tui::screen::proxy_view(None);
        key(&mut app, &model, KeyCode::Char('/'));
        for c in filter.chars() {
            key(&mut app, &model, KeyCode::Char(c));
        }
        key(&mut app, &model, KeyCode::Enter);
        screen(&mut app, &model, now, 140, 40);
        let mut shown: Vec<&str> = app
            .calls()
            .rows
            .iter()
            .filter_map(|&ci| model.calls.get(ci)?.tool.as_deref())
            .collect();
        shown.sort_unstable();
        let mut want = tools.to_vec();
        want.sort_unstable();
        assert_eq!(shown, want, "{filter}");
    }
}
