//! `e` on a selected call: the effect, then the file with its diagram and row.

use chrono::{Offset, Utc};
use mcpscope_engine::fixtures::{scenario, scenario_now};
use mcpscope_engine::model::Retention;
use mcpscope_tui::run::{self, Flow, LiveSource, Source};
use mcpscope_tui::{App, Effect};
use mcpscope_tui::{Info, Theme, render_to_buffer};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

/// A live source that has folded the scenario, and a view synced to it.
fn live() -> (App, LiveSource) {
    let (feed, rx) = tokio::sync::mpsc::unbounded_channel();
    for event in scenario() {
        feed.send(event).expect("send");
    }
    let mut source = LiveSource::new(rx, Retention::default());
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    source.pump(&mut app);
    app.sync(source.model());
    (app, source)
}

#[test]
fn e_on_a_selected_call_yields_the_export_effect() {
    let (mut app, source) = live();
    app.select_row(source.model(), 2);
    let call = app.calls().call.expect("a call is selected");
    assert_eq!(
        app.handle_key(key('e'), source.model()),
        vec![Effect::Export { call }]
    );
    let buf = render_to_buffer(&mut app, source.model(), scenario_now(), 140, 40);
    assert_eq!(buf.area.width, 140);
}

#[test]
fn e_without_a_call_explains() {
    let (_feed, rx) = tokio::sync::mpsc::unbounded_channel();
    let source = LiveSource::new(rx, Retention::default());
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    assert!(app.handle_key(key('e'), source.model()).is_empty());
    assert!(
        app.flash()
            .as_deref()
            .is_some_and(|f| f.contains("select a call"))
    );
}

#[test]
fn export_writes_the_diagram_to_a_new_private_file_each_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut app, mut source) = live();
    app.set_export_dir(dir.path().to_path_buf());
    app.select_row(source.model(), 2);
    let call = app.calls().call.expect("a call is selected");
    let name = format!("mcpscope-call-{}", call + 1);
    for round in 1..=3 {
        for effect in app.handle_key(key('e'), source.model()) {
            let flow =
                run::perform(&mut app, effect, &mut source, &mut |_| Ok(())).expect("perform");
            assert_eq!(flow, Flow::Continue);
        }
        let file = if round == 1 {
            format!("{name}.md")
        } else {
            format!("{name}-{round}.md")
        };
        let path = dir.path().join(&file);
        let flash = app.flash().clone().unwrap_or_default();
        assert!(flash.contains(&file), "{flash}");
        let text = std::fs::read_to_string(&path).expect("written");
        assert!(text.contains("```mermaid\nsequenceDiagram"), "{text}");
        assert!(text.contains("participant mcpscope"), "{text}");
        assert!(text.contains("| # | time | method |"), "{text}");
        assert!(text.contains(&format!("| {} | ", call + 1)), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}

#[test]
fn the_status_bar_shows_what_the_exporter_dropped() {
    let (_feed, rx) = tokio::sync::mpsc::unbounded_channel();
    let source = LiveSource::new(rx, Retention::default());
    let info = Info {
        telemetry: Some(mcpscope_tui::StatusText(std::sync::Arc::new(|| {
            Some("OTLP dropped: 1 events, 2 spans".to_string())
        }))),
        ..Info::default()
    };
    let mut app = App::new(info, Theme::dark(), Utc.fix());
    let buf = render_to_buffer(&mut app, source.model(), scenario_now(), 160, 30);
    let screen = mcpscope_tui::screen::text(&buf);
    assert!(
        screen.contains("OTLP dropped: 1 events, 2 spans"),
        "{screen}"
    );
}
