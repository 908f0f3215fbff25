//! The fault menu and rule arming, against a fake fault control; the status bar lists armed rules.

use std::sync::{Arc, Mutex};

use chrono::{Offset, Utc};
use mcpscope_engine::event::StreamId;
use mcpscope_engine::fault::{FaultChoice, FaultControl, RuleId};
use mcpscope_engine::fixtures::{scenario, scenario_now};
use mcpscope_engine::model::Model;
use mcpscope_tui::App;
use mcpscope_tui::run::{self, Flow, LiveSource};
use mcpscope_tui::{Info, Theme, render_to_buffer};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Default)]
struct Fake {
    applied: Mutex<Vec<(StreamId, String)>>,
    armed: Mutex<Vec<(RuleId, String)>>,
}

impl Fake {
    /// What a rule firing does to the list: the rule is spent.
    fn fire(&self, id: RuleId) {
        self.armed.lock().expect("lock").retain(|(i, _)| *i != id);
    }
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
        let mut armed = self.armed.lock().expect("lock");
        let id = RuleId(armed.last().map_or(1, |(id, _)| id.0 + 1));
        armed.push((id, rule.to_string()));
        Ok(rule.to_string())
    }
    fn armed(&self) -> Vec<(RuleId, String)> {
        self.armed.lock().expect("lock").clone()
    }
    fn disarm(&self, id: RuleId) -> bool {
        let mut armed = self.armed.lock().expect("lock");
        let before = armed.len();
        armed.retain(|(i, _)| *i != id);
        armed.len() < before
    }
}

/// Presses a key and carries out its effects, as the live loop does.
fn press(app: &mut App, model: &Model, code: KeyCode) {
    let (_feed, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut source = LiveSource::new(rx, mcpscope_engine::model::Retention::default());
    for effect in app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), model) {
        let flow = run::perform(app, effect, &mut source, &mut |_| Ok(())).expect("perform");
        assert_eq!(flow, Flow::Continue);
    }
}

fn screen(app: &mut App, model: &Model) -> String {
    run::read_armed(app);
    let buf = render_to_buffer(app, model, scenario_now(), 140, 40);
    mcpscope_tui::screen::text(&buf)
}

#[test]
fn x_applies_a_fault_to_the_selected_calls_stream() {
    let fake = Arc::new(Fake::default());
    let model = Model::from_events(&scenario()).0;
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.set_faults(fake.clone());
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
    assert!(app.fault_menu().is_none());
}

#[test]
fn a_arms_a_typed_rule_shown_in_the_status_bar() {
    let fake = Arc::new(Fake::default());
    let model = Model::new();
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.set_faults(fake.clone());
    press(&mut app, &model, KeyCode::Char('a'));
    for c in "tool:poke reset".chars() {
        press(&mut app, &model, KeyCode::Char(c));
    }
    press(&mut app, &model, KeyCode::Enter);
    assert_eq!(
        fake.armed(),
        vec![(RuleId(1), "tool:poke reset".to_string())]
    );
    let s = screen(&mut app, &model);
    assert!(s.contains("armed: tool:poke reset"), "{s}");
}

/// The proxy's commands (faults, re-send, intercept) are offered only by a view that holds its
/// control handle: `attach` and a replay neither bind nor list them, a live proxy does both.
#[test]
fn the_proxys_commands_are_offered_only_with_its_control_handle() {
    let model = Model::from_events(&scenario()).0;
    let commands = ['x', 'a', 'D', 'r', 'i', 'I'];
    let listed = [
        "fault menu",
        "arm a fault rule",
        "re-send",
        "intercept",
        "held requests",
    ];

    let mut attached = App::new(Info::default(), Theme::dark(), Utc.fix());
    attached.sync(&model);
    for c in commands {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(attached.action_for(&key), None, "{c} bound without a proxy");
    }
    press(&mut attached, &model, KeyCode::Char('?'));
    let help = screen(&mut attached, &model);
    assert!(help.contains("pause the live view"), "{help}");
    for what in listed {
        assert!(
            !help.contains(what),
            "{what} offered without a proxy:\n{help}"
        );
    }

    let mut live = App::new(Info::default(), Theme::dark(), Utc.fix());
    live.set_faults(Arc::new(Fake::default()));
    live.sync(&model);
    for c in commands {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert!(live.action_for(&key).is_some(), "{c} unbound with a proxy");
    }
    press(&mut live, &model, KeyCode::Char('?'));
    let help = screen(&mut live, &model);
    for what in listed {
        assert!(help.contains(what), "{what} missing with a proxy:\n{help}");
    }
}

#[test]
fn d_disarms_the_rule_shown_even_if_it_fired_since() {
    let fake = Arc::new(Fake::default());
    let model = Model::new();
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    app.set_faults(fake.clone());
    for rule in ["reset when tool=a", "eof when tool=b"] {
        fake.arm(rule).expect("arm");
    }
    let s = screen(&mut app, &model);
    assert!(
        s.contains("armed: reset when tool=a, eof when tool=b"),
        "{s}"
    );
    // The status bar shows #1 as the oldest; it fires before D is pressed.
    fake.fire(RuleId(1));
    press(&mut app, &model, KeyCode::Char('D'));
    assert_eq!(
        fake.armed(),
        vec![(RuleId(2), "eof when tool=b".to_string())],
        "#2 must stay armed"
    );
    assert!(
        app.flash()
            .as_deref()
            .is_some_and(|f| f.contains("fired first")),
        "{:?}",
        app.flash()
    );
    press(&mut app, &model, KeyCode::Char('D'));
    assert!(fake.armed().is_empty());
    assert_eq!(app.flash().as_deref(), Some("disarmed: eof when tool=b"));
}
