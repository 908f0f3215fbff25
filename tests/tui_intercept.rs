//! The intercept from the TUI, end to end on real sockets (the test server behind the proxy):
//! `i` sets the filter, the status bar counts what is held, `I` lists it, `a` forwards, `E`
//! answers with an error, `e` asks for the editor, and quitting releases what is still held.

use std::time::{Duration, Instant};

use chrono::{Offset, Utc};
use mcpscope_engine::model::Model;
use mcpscope_proxy::controller as fault;
use mcpscope_testserver::client::{Answer, McpClient, Outcome};
use mcpscope_tui::run::{self, LiveSource};
use mcpscope_tui::{App, Effect};
use mcpscope_tui::{Info, Theme, render_to_buffer};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

fn echo(url: &str, text: &str) -> JoinHandle<Answer> {
    let (url, text) = (url.to_string(), text.to_string());
    tokio::spawn(async move {
        let mut c = McpClient::new(&url).expect("client");
        c.handshake().await.expect("initialize");
        c.call("echo", json!({"text": text}), false)
            .await
            .expect("echo")
    })
}

/// Presses a key and carries out its effects as the live loop does; returns the effects that
/// need the terminal (the editor).
fn press(app: &mut App, model: &Model, code: KeyCode) -> Vec<Effect> {
    let (_feed, rx) = mpsc::unbounded_channel();
    let mut source = LiveSource::new(rx, mcpscope_engine::model::Retention::default());
    let mut left = Vec::new();
    for effect in app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), model) {
        if matches!(effect, Effect::EditHeld { .. }) {
            left.push(effect);
            continue;
        }
        run::perform(app, effect, &mut source, &mut |_| Ok(())).expect("perform");
    }
    left
}

async fn until_held(app: &mut App, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        run::read_armed(app);
        if app.intercepted().len() == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} held, not {n}",
            app.intercepted().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn screen(app: &mut App, model: &Model) -> String {
    let buf = render_to_buffer(app, model, Utc::now(), 160, 40);
    mcpscope_tui::screen::text(&buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i_holds_i_lists_a_forwards_e_refuses_and_quitting_releases() {
    let run = async {
        let mcpscope_testkit::live::Live {
            server,
            proxy,
            engine,
            events: _rx,
            url,
        } = mcpscope_testkit::live::start().await;
        let model = Model::new();
        let info = Info {
            listen: Some(proxy.addr.to_string()),
            ..Info::default()
        };
        let mut app = App::new(info, Theme::dark(), Utc.fix());
        app.set_faults(fault::controller(&proxy, engine));

        press(&mut app, &model, KeyCode::Char('i'));
        for c in "tool:echo".chars() {
            press(&mut app, &model, KeyCode::Char(c));
        }
        press(&mut app, &model, KeyCode::Enter);
        assert_eq!(app.intercept().as_deref(), Some("tool:echo"));

        let first = echo(&url, "as sent");
        until_held(&mut app, 1).await;
        let s = screen(&mut app, &model);
        assert!(s.contains("INTERCEPT tool:echo · 1 held"), "{s}");
        press(&mut app, &model, KeyCode::Char('I'));
        let s = screen(&mut app, &model);
        assert!(s.contains("Held by the intercept (tool:echo)"), "{s}");
        assert!(s.contains("tools/call echo id="), "{s}");
        press(&mut app, &model, KeyCode::Char('a'));
        assert_eq!(first.await.expect("task").text(), Some("as sent"));

        let refused = echo(&url, "refused");
        until_held(&mut app, 1).await;
        let edit = press(&mut app, &model, KeyCode::Char('e'));
        assert!(
            matches!(&edit[..], [Effect::EditHeld { body, .. }] if body.contains("refused")),
            "{edit:?}"
        );
        press(&mut app, &model, KeyCode::Char('E'));
        let answer = refused.await.expect("task");
        let Outcome::Response(v) = &answer.outcome else {
            panic!("{:?}", answer.outcome)
        };
        assert!(
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .is_some_and(|m| m.starts_with("mcpscope intercept")),
            "{v}"
        );

        // Quitting lets go of what is held: it goes on unchanged.
        let last = echo(&url, "at quit");
        until_held(&mut app, 1).await;
        press(&mut app, &model, KeyCode::Esc);
        run::release_intercept(&mut app);
        assert_eq!(last.await.expect("task").text(), Some("at quit"));
        server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("bounded");
}
