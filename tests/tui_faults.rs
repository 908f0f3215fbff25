//! The fault menu and rule arming, against a fake fault control; the status bar lists armed rules.

use std::sync::{Arc, Mutex};

use chrono::{Offset, Utc};
use mcpscope_engine::event::StreamId;
use mcpscope_engine::fault::{FaultChoice, FaultControl};
use mcpscope_engine::model::Model;
use mcpscope_testkit::fixtures::{scenario, scenario_now};
use mcpscope_tui::app::App;
use mcpscope_tui::{Info, Theme, render_app};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Default)]
struct Fake {
    applied: Mutex<Vec<(StreamId, String)>>,
    armed: Mutex<Vec<String>>,
}

impl FaultControl for Fake {
    fn stream_faults(&self) -> Vec<FaultChoice> {
        ["reset", "eof", "stall"]
            .iter()
            .map(|s| FaultChoice {
                spec: s.to_string(),
                description: format!("{s} the stream"),
            })
            .collect()
    }
    fn apply_to_stream(&self, stream: StreamId, spec: &str) -> Result<(), String> {
        self.applied
            .lock()
            .expect("lock")
            .push((stream, spec.to_string()));
        Ok(())
    }
    fn arm(&self, rule: &str) -> Result<String, String> {
        if rule.is_empty() {
            return Err("empty rule".into());
        }
        self.armed.lock().expect("lock").push(rule.to_string());
        Ok(rule.to_string())
    }
    fn armed(&self) -> Vec<String> {
        self.armed.lock().expect("lock").clone()
    }
    fn disarm(&self, index: usize) {
        self.armed.lock().expect("lock").remove(index);
    }
}

fn press(app: &mut App, model: &Model, code: KeyCode) {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), model);
}

fn screen(app: &mut App, model: &Model) -> String {
    let buf = render_app(app, model, scenario_now(), 140, 40);
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

#[test]
fn x_applies_a_fault_to_the_selected_calls_stream() {
    let fake = Arc::new(Fake::default());
    let model = Model::from_events(&scenario()).0;
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.faults = Some(fake.clone());
    app.sync(&model);
    app.select_row(&model, 2); // the pending peek, on POST#7
    press(&mut app, &model, KeyCode::Char('x'));
    let s = screen(&mut app, &model);
    assert!(s.contains("Inject a fault on #7"), "{s}");
    assert!(s.contains("stall the stream"), "{s}");
    press(&mut app, &model, KeyCode::Down);
    press(&mut app, &model, KeyCode::Enter);
    assert_eq!(
        *fake.applied.lock().expect("lock"),
        vec![(7, "eof".to_string())]
    );
    assert!(app.fault_menu.is_none());
}

#[test]
fn a_arms_a_typed_rule_shown_in_the_status_bar() {
    let fake = Arc::new(Fake::default());
    let model = Model::new();
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.faults = Some(fake.clone());
    press(&mut app, &model, KeyCode::Char('a'));
    for c in "tool:poke reset".chars() {
        press(&mut app, &model, KeyCode::Char(c));
    }
    press(&mut app, &model, KeyCode::Enter);
    assert_eq!(fake.armed(), vec!["tool:poke reset".to_string()]);
    let s = screen(&mut app, &model);
    assert!(s.contains("armed: tool:poke reset"), "{s}");
}

#[test]
fn without_faults_x_explains() {
    let model = Model::from_events(&scenario()).0;
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.sync(&model);
    press(&mut app, &model, KeyCode::Char('x'));
    assert!(app.fault_menu.is_none());
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("unavailable"))
    );
}
