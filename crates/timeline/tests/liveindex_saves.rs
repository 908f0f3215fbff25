//! When the live index saves: while the recording grows, only once enough is new for the save
//! to be worth its cost; at the close, whatever is new.

use std::path::Path;
use std::time::{Duration, Instant};

use mcpscope_engine::event::{Event, EventKind};
use mcpscope_engine::model::Retention;
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_timeline::indexer::IndexConfig;
use mcpscope_timeline::liveindex::{LiveConfig, LiveIndex};
use mcpscope_timeline::savedindex::sidecar_for;

/// Saves as often as the index may (every 10 ms), looking at the file every 5 ms.
fn eager() -> LiveConfig {
    LiveConfig {
        save_every: Duration::from_millis(10),
        poll: Duration::from_millis(5),
        ..LiveConfig::default()
    }
}

fn write_notes(recorder: &mut Recorder, from: u64, n: u64) {
    for i in from..from + n {
        let kind = EventKind::Note {
            stream: None,
            text: format!("note {i}"),
        };
        recorder.write(&Event::now(kind)).expect("write");
    }
    recorder.flush().expect("flush");
}

/// Waits up to `within` for `path` to exist.
fn appears(path: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    path.exists()
}

#[test]
fn a_few_spacings_new_are_saved_at_the_close_not_while_the_recording_grows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.jsonl");
    let mut recorder = Recorder::create(&path, Create::New, true).expect("a recording");
    let index = LiveIndex::start_with(&path, Retention::window(100), eager());
    let every = IndexConfig::default().every;
    write_notes(&mut recorder, 0, 3 * every + 10);
    // The traffic pauses: the index reads and folds three spacings, and may save every 10 ms,
    // but three spacings are not worth a save.
    assert!(
        !appears(&sidecar_for(&path), Duration::from_millis(500)),
        "no save of {} events while the recording grows",
        3 * every
    );
    drop(recorder);
    let report = index.finish(Duration::from_secs(30));
    assert_eq!(report.error, None);
    assert_eq!(report.saved, 3 * every, "the close saves what is folded");
    assert!(sidecar_for(&path).exists());
}

#[test]
fn enough_new_is_saved_while_the_recording_grows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.jsonl");
    let mut recorder = Recorder::create(&path, Create::New, true).expect("a recording");
    let index = LiveIndex::start_with(&path, Retention::window(100), eager());
    let every = IndexConfig::default().every;
    let spacings = (1u64 << 16) / every + 1;
    write_notes(&mut recorder, 0, spacings * every + 10);
    assert!(
        appears(&sidecar_for(&path), Duration::from_secs(60)),
        "saved while the recording is still open"
    );
    drop(recorder);
    let report = index.finish(Duration::from_secs(30));
    assert_eq!(report.error, None);
    assert_eq!(report.saved, spacings * every);
}
