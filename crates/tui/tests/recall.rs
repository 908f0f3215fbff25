//! An answered call past the view's `--keep` window is a compact row in memory; opening it reads
//! its detail back from the recording (or, without a recording, says why it cannot).

use chrono::{Offset, Utc};
use mcpscope_tui::screen::text;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use mcpscope_engine::fixtures::many_calls;
use mcpscope_engine::model::{Retention, Verdict};
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_tui::run::{self, LiveSource, Source};
use mcpscope_tui::{App, Effect, Selected};
use mcpscope_tui::{Info, Theme, render_to_buffer};

/// A live view holding the last 100 calls of a 3,000-call session, and the recording written
/// as the session ran (`None`: `--no-record`).
fn view(recording: Option<&std::path::Path>) -> (App, LiveSource, usize) {
    let events = many_calls(3_000);
    if let Some(path) = recording {
        let mut recorder = Recorder::create(path, Create::New, true).expect("recording");
        for event in &events {
            recorder.write(event).expect("write");
        }
        recorder.flush().expect("flush");
    }
    let (feed, rx) = tokio::sync::mpsc::unbounded_channel();
    for event in events {
        feed.send(event).expect("send");
    }
    let mut source = LiveSource::new(rx, Retention::window(100));
    let info = Info {
        recording: recording.map(|p| p.to_path_buf()),
        ..Info::default()
    };
    let mut app = App::new(info, Theme::dark(), Utc.fix());
    while source.pump(&mut app) {}
    let model = source.model();
    assert!(
        model.evicted().compacted > 0,
        "the window evicted something"
    );
    // An answered one: calls that went wrong are held in full longer (up to the window's
    // size of them), but past it they too become rows.
    let call = model
        .calls
        .iter()
        .find(|c| c.evicted.is_some() && c.method == "tools/call" && c.verdict == Verdict::Answered)
        .expect("an evicted answered call");
    assert!(model.request_message(call).is_none(), "its detail is gone");
    let index = call.index;
    app.sync(source.model());
    app.set_selected(Selected::Call(index));
    (app, source, index)
}

fn screen(app: &mut App, source: &LiveSource) -> String {
    let now = Utc::now();
    text(&render_to_buffer(app, source.model(), now, 160, 50))
}

fn enter() -> KeyEvent {
    KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)
}

#[test]
fn enter_on_an_evicted_call_reads_its_detail_back_from_the_recording() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.jsonl");
    let (mut app, mut source, index) = view(Some(&path));
    let before = screen(&mut app, &source);
    assert!(
        before.contains("Enter reads it back from the recording"),
        "{before}"
    );
    assert!(!before.contains("Request"), "{before}");
    let effects = app.handle_key(enter(), source.model());
    assert!(
        matches!(effects.as_slice(), [Effect::Recall { call, .. }] if *call == index),
        "{effects:?}"
    );
    for effect in effects {
        run::perform(&mut app, effect, &mut source, &mut |_| Ok(())).expect("perform");
    }
    let after = screen(&mut app, &source);
    assert!(after.contains("read back from the recording"), "{after}");
    assert!(after.contains("Request"), "{after}");
    assert!(after.contains("Response"), "{after}");
    assert!(after.contains("tools/call"), "{after}");
    // Asking again does not read the file again.
    assert!(app.handle_key(enter(), source.model()).is_empty());
}

#[test]
fn without_a_recording_the_view_says_the_detail_was_not_kept() {
    let (mut app, mut source, _) = view(None);
    let before = screen(&mut app, &source);
    assert!(
        before.contains("evicted (past --keep 100); not recorded (--no-record)"),
        "{before}"
    );
    for effect in app.handle_key(enter(), source.model()) {
        run::perform(&mut app, effect, &mut source, &mut |_| Ok(())).expect("perform");
    }
    let after = screen(&mut app, &source);
    assert!(after.contains("only the last 100 calls"), "{after}");
}
