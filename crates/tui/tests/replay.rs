//! The replay cursor: the model as of any event, seeking, steps and stream-death jumps.

use mcpscope_engine::event::{EndHow, EventKind};
use mcpscope_engine::fixtures::{at, many_calls, scenario};
use mcpscope_engine::model::Verdict;
use mcpscope_timeline::ReplayCursor;

fn poke_verdict(cursor: &ReplayCursor) -> Option<&'static str> {
    cursor
        .model_at()
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("poke"))
        .map(|c| c.verdict.name())
}

fn death_index(events: &[mcpscope_engine::event::Event]) -> usize {
    events
        .iter()
        .position(|e| {
            matches!(
                e.kind,
                EventKind::StreamEnded {
                    stream: 3,
                    how: EndHow::Reset,
                    ..
                }
            )
        })
        .expect("death in fixture")
}

#[test]
fn pending_before_the_death_orphaned_just_after() {
    let events = scenario();
    let death = death_index(&events);
    let mut cursor = ReplayCursor::new(events);
    cursor.seek(death);
    assert_eq!(poke_verdict(&cursor), Some("pending"));
    cursor.step_forward();
    assert_eq!(poke_verdict(&cursor), Some("orphaned"));
    cursor.step_back();
    assert_eq!(poke_verdict(&cursor), Some("pending"));
    assert_eq!(cursor.time(), Some(at(3_600)));
}

#[test]
fn next_and_previous_death() {
    let events = scenario();
    let death = death_index(&events);
    let mut cursor = ReplayCursor::new(events);
    assert_eq!(cursor.next_death(), Some(death + 1));
    assert_eq!(poke_verdict(&cursor), Some("orphaned"));
    // The GET stream reset at the same moment is the next death, then POST#4 (resumable).
    assert_eq!(cursor.next_death(), Some(death + 2));
    let third = cursor
        .next_death()
        .expect("POST#4 ended with a call pending");
    assert!(
        cursor
            .model_at()
            .calls
            .iter()
            .any(|c| matches!(c.verdict, Verdict::Resumable { .. })),
        "at {third}"
    );
    assert_eq!(cursor.next_death(), None);
    assert_eq!(cursor.prev_death(), Some(third));
    assert_eq!(cursor.prev_death(), Some(death + 2));
    assert_eq!(cursor.prev_death(), Some(death + 1));
    assert_eq!(cursor.prev_death(), None);
}

#[test]
fn seek_time_and_expiry_at_the_cursor() {
    let events = scenario();
    let mut cursor = ReplayCursor::new(events);
    cursor.seek_time(at(4_499));
    assert_eq!(poke_verdict(&cursor), Some("pending"));
    cursor.seek_time(at(4_500));
    assert_eq!(poke_verdict(&cursor), Some("orphaned"));
    cursor.seek(cursor.len());
    let slow = |cursor: &ReplayCursor| {
        cursor
            .model_at()
            .calls
            .iter()
            .find(|c| c.tool.as_deref() == Some("slow"))
            .map(|c| c.verdict.name())
    };
    assert_eq!(slow(&cursor), Some("resumable"));
    // 30 s after the end, the resumable call's window has passed: the cursor's clock moves on
    // and the call is orphaned, as it would be live.
    cursor.advance(at(40_000));
    assert_eq!(slow(&cursor), Some("orphaned"));
    // Stepping back restores the state at that event; the window is open again.
    cursor.step_back();
    assert_eq!(slow(&cursor), Some("resumable"));
}

#[test]
fn checkpoints_give_the_same_model_as_a_full_fold() {
    let events = many_calls(3_000);
    let len = events.len();
    let mut cursor = ReplayCursor::with_spacing(events.clone(), 1_000);
    cursor.seek(len);
    for target in [len / 2, 10, len - 1, 2_500, 0, len] {
        cursor.seek(target);
        let (direct, _) = mcpscope_engine::model::Model::from_events(&events[..target]);
        assert_eq!(cursor.position(), target);
        assert_eq!(cursor.model_at().counts(), direct.counts(), "at {target}");
        assert_eq!(cursor.model_at().calls, direct.calls, "at {target}");
    }
}

#[test]
fn replay_keys_drive_the_cursor_without_a_terminal() {
    use chrono::{Offset, Utc};
    use mcpscope_tui::App;
    use mcpscope_tui::run::{ReplaySource, Source};
    use mcpscope_tui::{Info, Theme};
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    let mut source = ReplaySource::new(scenario());
    source.pump(&mut app);
    let press = |app: &mut App, source: &mut ReplaySource, code: KeyCode| {
        let effects = app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), source.model());
        for e in &effects {
            source.effect(e, app);
        }
        source.pump(app);
    };
    // `:`, the time typed, Enter.
    let seek = |app: &mut App, source: &mut ReplaySource, time: &str| {
        let keys = std::iter::once(KeyCode::Char(':'))
            .chain(time.chars().map(KeyCode::Char))
            .chain([KeyCode::Enter]);
        for code in keys {
            press(app, source, code);
        }
    };
    press(&mut app, &mut source, KeyCode::Char('n'));
    assert_eq!(source.now(), at(4_500));
    assert_eq!(source.model().counts().orphaned, 1);
    press(&mut app, &mut source, KeyCode::Char(','));
    assert_eq!(source.model().counts().orphaned, 0);
    seek(&mut app, &mut source, "19:59:45.0");
    assert_eq!(source.now(), at(3_000));
    seek(&mut app, &mut source, "soon");
    assert_eq!(
        source.now(),
        at(3_000),
        "a time not understood moves nothing"
    );
    assert!(
        app.flash()
            .as_deref()
            .is_some_and(|f| f.contains("bad time \"soon\"")),
        "{:?}",
        app.flash()
    );
    press(&mut app, &mut source, KeyCode::Char(']'));
    assert_eq!(
        app.replay().as_ref().map(|r| r.position),
        Some(source_len())
    );
    press(&mut app, &mut source, KeyCode::Char('+'));
    assert_eq!(app.replay().as_ref().map(|r| r.speed.as_str()), Some("10×"));
}

fn source_len() -> usize {
    scenario().len()
}

#[test]
fn speed_flag_maps_to_the_nearest_playback_speed() {
    use mcpscope_timeline::Speed;
    assert_eq!(Speed::nearest(0.0), Speed::Max);
    assert_eq!(Speed::nearest(1.0), Speed::X1);
    assert_eq!(Speed::nearest(10.0), Speed::X10);
    assert_eq!(Speed::nearest(1000.0), Speed::Max);
}
