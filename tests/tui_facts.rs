//! The TUI shows the facts a first session with a real server needs: tool errors, uncut stream
//! labels, the death behind a failed resumption, and the cursor on the most urgent call.

use chrono::{DateTime, Duration, Utc};
use mcpscope_engine::event::{EndHow, EventKind, Leg};
use mcpscope_engine::fixtures::{Script, last_call};
use mcpscope_engine::model::{Model, RESUME_GRACE_MS, Verdict};
use mcpscope_tui::App;
use mcpscope_tui::render_to_buffer;
use mcpscope_tui::screen::text;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};

const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];

fn app() -> App {
    mcpscope_tui::screen::proxy_view(None)
}

fn call(name: &str, id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":{}}})
}

fn screen(app: &mut App, model: &Model, now: DateTime<Utc>, width: u16) -> String {
    text(&render_to_buffer(app, model, now, width, 40))
}

/// An answered `echo`, a `boom` answered with `isError: true`, a `wait` resumed on `GET#31`,
/// and a `slow` whose POST#22 died and whose two resumptions never reached the upstream.
fn script() -> Script {
    let mut s = Script::ticking();
    s.initialize("2025-11-25");
    s.post(2, S1, call("echo", 1))
        .respond(2, 200, "application/json", &[])
        .json_body(2, json!({"jsonrpc":"2.0","id":1,"result":{"content":[]}}));
    s.post(3, S1, call("boom", 2))
        .respond(3, 200, "application/json", &[])
        .json_body(
            3,
            json!({"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}),
        );
    s.post(30, S1, call("wait", 4))
        .respond(30, 200, "text/event-stream", S1)
        .event(30, Some("w1"), None)
        .finish(30, EndHow::Reset, Leg::Upstream);
    s.open_with(
        31,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "w1")],
    )
    .respond(31, 200, "text/event-stream", S1);
    s.post(22, S1, call("slow", 3))
        .respond(22, 200, "text/event-stream", S1)
        .event(22, Some("e1"), None)
        .finish(22, EndHow::Reset, Leg::Upstream);
    for stream in [23, 24] {
        s.open_with(
            stream,
            "GET",
            &[("mcp-session-id", "s1"), ("last-event-id", "e1")],
        );
        s.push(EventKind::UpstreamUnreachable {
            stream,
            error: "connection refused".into(),
        });
        s.respond(stream, 502, "application/json", &[])
            .finish(stream, EndHow::Eof, Leg::Upstream);
    }
    s
}

#[test]
fn the_cursor_stays_on_the_first_listed_row_until_the_user_moves_it() {
    let s = script();
    let (mut model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    let now = s.now() + Duration::milliseconds(RESUME_GRACE_MS + 1);
    model.advance(now);
    app.sync(&model);
    let slow = last_call(&model, "slow").expect("slow").index;
    assert!(matches!(
        model.calls[slow].verdict,
        Verdict::Orphaned { .. }
    ));
    assert_eq!(
        app.calls().rows.first(),
        Some(&slow),
        "the orphan is listed first"
    );
    assert_eq!((app.calls().row, app.calls().call), (0, Some(slow)));
    let screen = screen(&mut app, &model, now, 160);
    assert!(screen.contains("tools/call slow  id=3"), "{screen}");
    // The call died with POST#22; the detail says so, and what the client tried.
    assert!(screen.contains("died       "), "{screen}");
    assert!(screen.contains("resume tried ×2"), "{screen}");
    insta::assert_snapshot!("first_hour_orphan", screen);
}

#[test]
fn the_user_s_choice_of_row_is_kept_as_rows_move() {
    let s = script();
    let (mut model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    app.handle_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE), &model);
    assert_eq!(app.calls().row, 1);
    let chosen = app.calls().call;
    model.advance(s.now() + Duration::milliseconds(RESUME_GRACE_MS + 1));
    app.sync(&model);
    assert_eq!(app.calls().call, chosen);
}

#[test]
fn tool_errors_and_long_stream_labels_show_whole() {
    let s = script();
    let (model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    let screen = screen(&mut app, &model, s.now(), 160);
    let boom = screen
        .lines()
        .find(|l| l.contains("tools/call boom"))
        .expect("boom row");
    assert!(boom.contains("isError"), "{boom}");
    let wait = screen
        .lines()
        .find(|l| l.contains("tools/call wait"))
        .expect("wait row");
    assert!(wait.contains("GET#31 resumed "), "{wait}");
}

#[test]
fn a_resumption_mcpscope_answered_itself_is_not_an_upstream_eof() {
    let mut s = script();
    // A third attempt that is still the owner while the detail is read.
    s.open_with(
        25,
        "GET",
        &[("mcp-session-id", "s1"), ("last-event-id", "e1")],
    );
    let (model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    let slow = last_call(&model, "slow").expect("slow").index;
    assert!(app.select_call(&model, slow), "listed");
    app.set_selected(mcpscope_tui::Selected::Stream(23));
    app.set_zoom(true);
    let screen = screen(&mut app, &model, s.now(), 160);
    assert!(
        screen.contains("answered by mcpscope (upstream unreachable: connection refused)"),
        "{screen}"
    );
    assert!(!screen.contains("eof (upstream)"), "{screen}");
}

#[test]
fn a_status_message_is_shown_whole_at_any_width() {
    let s = script();
    let (model, _) = s.fold();
    let message = "fault reset on #8 failed: stream #8 is not live (it ended at 19:59:42.025; \
                   pick a stream that is still open)";
    for width in [40, 80, 100, 160, 260] {
        let mut app = app();
        app.set_flash(message.to_string());
        let screen = screen(&mut app, &model, s.now(), width);
        let lines: Vec<&str> = screen.lines().collect();
        let bar = lines.last().copied().unwrap_or_default();
        assert!(bar.ends_with("? help"), "{width}: {bar:?}");
        let shown = lines
            .iter()
            .rev()
            .skip(1)
            .take(4)
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words(&shown).contains(&words(message)),
            "{width}: {shown:?}\n{screen}"
        );
    }
}

/// The live proxy's fault choices; applying one fails as it does on a stream that ended.
struct Refusing;

impl mcpscope_engine::fault::FaultControl for Refusing {
    fn stream_faults(&self) -> Vec<mcpscope_engine::fault::FaultChoice> {
        mcpscope_proxy::controller::live_choices()
    }
    fn apply_to_stream(&self, stream: u64, _spec: &str) -> Result<(), String> {
        Err(format!("stream #{stream} is not live"))
    }
    fn arm(&self, rule: &str) -> Result<String, String> {
        Ok(rule.to_string())
    }
    fn armed(&self) -> Vec<(mcpscope_engine::fault::RuleId, String)> {
        Vec::new()
    }
    fn disarm(&self, _id: mcpscope_engine::fault::RuleId) -> bool {
        false
    }
}

#[test]
fn the_fault_menu_fits_its_columns_and_enter_reports_at_160_columns() {
    use mcpscope_tui::run::{self, Flow, LiveSource};
    let s = script();
    let (model, _) = s.fold();
    let mut app = app();
    app.set_faults(std::sync::Arc::new(Refusing));
    app.sync(&model);
    let press = |app: &mut App, code: KeyCode| {
        let (_feed, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut source = LiveSource::new(rx, mcpscope_engine::model::Retention::default());
        for effect in app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), &model) {
            let flow = run::perform(app, effect, &mut source, &mut |_| Ok(())).expect("perform");
            assert_eq!(flow, Flow::Continue);
        }
    };
    press(&mut app, KeyCode::Char('x'));
    let menu = screen(&mut app, &model, s.now(), 160);
    for choice in mcpscope_proxy::controller::live_choices() {
        let line = menu
            .lines()
            .find(|l| l.contains(&choice.description))
            .unwrap_or_else(|| panic!("{:?} is not shown whole:\n{menu}", choice.description));
        assert!(
            line.contains(&format!(" {}  ", choice.spec)),
            "{} is not apart from its description: {line}",
            choice.spec
        );
    }
    insta::assert_snapshot!("fault_menu_160", menu);
    press(&mut app, KeyCode::Enter);
    assert!(app.fault_menu().is_none());
    let after = screen(&mut app, &model, s.now(), 160);
    assert!(
        after.contains("fault reset on #22 failed: stream #22 is not live"),
        "{after}"
    );
}

#[test]
fn replay_starts_with_a_hint_and_the_start_is_one_place() {
    use mcpscope_engine::fixtures::scenario;
    use mcpscope_tui::run::{ReplaySource, Source};
    let mut app = app();
    let mut source = ReplaySource::new(scenario());
    source.pump(&mut app);
    let now = source.now();
    let model = source.model().clone();
    let first = screen(&mut app, &model, now, 160);
    assert!(first.contains("space plays"), "{first}");
    let press = |app: &mut App, source: &mut ReplaySource, code: KeyCode| {
        let effects = app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), source.model());
        for e in &effects {
            source.effect(e, app);
        }
        source.pump(app);
    };
    let position = |app: &App| app.replay().as_ref().map(|r| r.position);
    press(&mut app, &mut source, KeyCode::Char(']'));
    press(&mut app, &mut source, KeyCode::Char('['));
    let start = position(&app);
    assert_eq!(start, Some(1));
    press(&mut app, &mut source, KeyCode::Char(']'));
    press(&mut app, &mut source, KeyCode::Char(':'));
    for c in "00:00:00".chars() {
        press(&mut app, &mut source, KeyCode::Char(c));
    }
    press(&mut app, &mut source, KeyCode::Enter);
    assert_eq!(
        position(&app),
        start,
        "seeking before the start goes to the start"
    );
}

#[test]
fn slash_searches_message_bodies_and_highlights_the_matches() {
    let mut s = script();
    s.post(
        40,
        S1,
        json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a Needle here"}}}),
    )
    .respond(40, 200, "application/json", &[])
    .json_body(
        40,
        json!({"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"a needle here"}]}}),
    );
    let (model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    let press = |app: &mut App, code: KeyCode| {
        app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), &model);
    };
    press(&mut app, KeyCode::Char('/'));
    for c in "needle".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        app.calls().rows.len(),
        1,
        "only the call whose body holds it"
    );
    app.set_zoom(true);
    let buf = render_to_buffer(&mut app, &model, s.now(), 120, 60);
    let mut marked = Vec::new();
    for y in 0..buf.area.height {
        let mut run = String::new();
        for x in 0..buf.area.width {
            let cell = &buf[(x, y)];
            if cell.modifier.contains(ratatui::style::Modifier::REVERSED) {
                run.push_str(cell.symbol());
            } else if !run.is_empty() {
                marked.push(std::mem::take(&mut run));
            }
        }
        if !run.is_empty() {
            marked.push(run);
        }
    }
    assert_eq!(marked, ["Needle", "needle"], "{}", text(&buf));
}

#[test]
fn l_lists_the_session_s_notifications_and_logs_with_levels() {
    let mut s = Script::ticking();
    s.initialize("2025-06-18");
    s.post(2, S1, call("work", 1))
        .respond(2, 200, "text/event-stream", S1);
    let note = |method: &str, params: Value| {
        Some(json!({"jsonrpc":"2.0","method":method,"params":params}))
    };
    s.event(
        2,
        None,
        note(
            "notifications/message",
            json!({"level":"warning","logger":"db","data":"disk almost full"}),
        ),
    );
    s.event(
        2,
        None,
        note(
            "notifications/progress",
            json!({"progressToken":1,"progress":2,"total":5,"message":"copying"}),
        ),
    );
    s.event(
        2,
        None,
        note("notifications/tools/list_changed", Value::Null),
    );
    s.event(
        2,
        None,
        note(
            "notifications/resources/updated",
            json!({"uri":"file:///a.txt"}),
        ),
    );
    s.event(
        2,
        None,
        note(
            "notifications/message",
            json!({"level":"error","data":{"code":7}}),
        ),
    );
    let (model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    app.handle_key(
        KeyEvent::new(KeyCode::Char('L'), KeyModifiers::NONE),
        &model,
    );
    assert!(app.zoom());
    let screen = screen(&mut app, &model, s.now(), 120);
    for line in [
        "Notifications and logs (5)",
        "warning  ← notifications/message [db] disk almost full",
        "← notifications/progress 2/5 copying",
        "← notifications/tools/list_changed",
        "← notifications/resources/updated file:///a.txt",
        "error    ← notifications/message {\"code\":7}",
    ] {
        assert!(screen.contains(line), "{line:?} missing:\n{screen}");
    }
    // The error is drawn in the theme's error colour.
    let model_lines = mcpscope_tui::view::notifications::lines(&app, &model, 1);
    let error_line = model_lines.last().expect("a line");
    assert_eq!(error_line.spans[1].style, app.theme().error());
}

#[test]
fn a_probe_the_client_fell_back_from_is_not_shown_as_an_error() {
    let mut s = Script::ticking();
    s.post(
        1,
        &[],
        json!({"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}),
    )
    .respond(1, 400, "text/plain", &[])
    .finish(1, EndHow::Eof, Leg::Upstream);
    s.post(2, &[], json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}))
        .respond(2, 200, "application/json", &[("mcp-session-id", "s1")])
        .json_body(2, json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}));
    let (model, _) = s.fold();
    let mut app = app();
    app.sync(&model);
    assert!(app.select_call(&model, 0), "probe row");
    let screen = screen(&mut app, &model, s.now(), 160);
    let probe = screen
        .lines()
        .find(|l| l.contains("server/discover"))
        .expect("probe row");
    assert!(
        probe.contains("fell back") && !probe.contains("error"),
        "{probe}"
    );
    assert!(
        screen.contains("a probe that failed (HTTP 400); the client fell back to initialize id=1"),
        "{screen}"
    );
}
