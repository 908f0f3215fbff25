//! The replay viewer's file cursor: a recording read as needed, indexed in the background, and
//! sought through model checkpoints, reaches the same model as folding the file from its start,
//! at every cursor tried, with the retention policy active.

use std::path::PathBuf;
use std::time::Duration;

use mcpscope_engine::model::Retention;
use mcpscope_timeline::FileCursor;
use mcpscope_timeline::indexer::IndexConfig;

use mcpscope_testkit::long_recording::{digest, fold_to, tight, write_recording};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpscope-replay-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

fn dense() -> IndexConfig {
    IndexConfig {
        every: 64,
        checkpoint_every: 256,
        max_checkpoints: 5,
        checkpoint_budget: usize::MAX,
    }
}

#[test]
fn checkpoints_stay_within_their_memory_budget_and_seeks_still_agree() {
    let path = temp("budget.jsonl");
    let events = write_recording(&path, 1_500);
    let len = events.len();
    // A budget smaller than one model: two checkpoints at most (with the empty model and the
    // one before the end).
    let config = IndexConfig {
        checkpoint_budget: 1,
        ..dense()
    };
    let mut cursor = FileCursor::open_with(&path, tight(), config).expect("open");
    assert!(cursor.indexer().wait(Duration::from_secs(60)), "indexed");
    let held = cursor.indexer().state().checkpoints.len();
    assert!(held <= 4, "{held} checkpoints");
    for target in [len / 3, len / 2, len - 1, 1] {
        cursor.seek(target as u64);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&fold_to(&events, target, tight())),
            "at {target} of {len}"
        );
    }
}

#[test]
fn seeking_through_checkpoints_matches_a_fold_from_the_start() {
    let path = temp("seek.jsonl");
    let events = write_recording(&path, 1_500);
    let len = events.len();
    let retention = tight();
    let mut cursor = FileCursor::open_with(&path, retention, dense()).expect("open");
    assert!(cursor.indexer().wait(Duration::from_secs(60)), "indexed");
    {
        let state = cursor.indexer().state();
        assert_eq!(state.events, len as u64);
        assert!(state.error.is_none(), "{:?}", state.error);
        // Thinned: never more than the bound, spaced wider than at first.
        // (At most 5, the empty model and one just before the last 64 events.)
        assert!(state.checkpoints.len() <= 7, "{}", state.checkpoints.len());
        let tail = state.checkpoints.last().map_or(0, |c| c.seq);
        assert!(
            tail + 64 >= len as u64 && tail < len as u64,
            "tail {tail} of {len}"
        );
        assert!(state.spacing > 256, "spacing {}", state.spacing);
        assert!(!state.deaths.is_empty());
    }
    assert_eq!(cursor.total(), Some(len as u64));
    let targets = [
        len,
        len / 2,
        1,
        len - 1,
        3 * len / 4 + 17,
        3 * len / 4 + 16,
        3 * len / 4 + 15,
        64,
        65,
        0,
        len / 3,
        len,
    ];
    for target in targets {
        cursor.seek(target as u64);
        assert_eq!(cursor.position(), target as u64);
        let expected = fold_to(&events, target, retention);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&expected),
            "seek to {target} of {len}"
        );
        assert_eq!(cursor.model_at().calls, expected.calls, "calls at {target}");
    }
    // Stepping back many times from the middle folds from the cursor's own nearby checkpoint.
    cursor.seek(len as u64 / 2);
    for back in 1..=70 {
        cursor.step_back();
        let expected = fold_to(&events, len / 2 - back, retention);
        assert_eq!(digest(cursor.model_at()), digest(&expected), "back {back}");
    }
    // Time seeks land after the last event at or before the time, as in memory.
    for i in [10, len / 2, len - 1] {
        let t = events[i].t;
        cursor.seek_time(t);
        let n = events.partition_point(|e| e.t <= t).max(1);
        assert_eq!(cursor.position(), n as u64, "seek_time {t}");
    }
    // Deaths found by the pass are the same as the in-memory cursor's.
    let mut memory = mcpscope_timeline::ReplayCursor::new(events.clone());
    let mut deaths = Vec::new();
    while let Some(at) = memory.next_death() {
        deaths.push(at as u64);
    }
    cursor.seek(0);
    let mut found = Vec::new();
    while let Some(at) = cursor.next_death() {
        found.push(at);
    }
    assert_eq!(found, deaths);
    std::fs::remove_file(&path).ok();
}

#[test]
fn playing_forward_before_the_index_is_done_reads_the_file_in_order() {
    let path = temp("play.jsonl");
    let events = write_recording(&path, 1_500);
    let retention = tight();
    let mut cursor = FileCursor::open_with(&path, retention, dense()).expect("open");
    // The first screen: one event, read without waiting for anything.
    cursor.step_forward();
    assert_eq!(cursor.position(), 1);
    assert_eq!(cursor.time(), Some(events[0].t));
    for i in (1..3_000).step_by(97) {
        let t = events[i].t;
        assert!(cursor.play_to(t), "at {i}");
        let n = events.partition_point(|e| e.t <= t);
        assert_eq!(cursor.position(), n as u64);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&fold_to(&events, n, retention)),
            "at {i}"
        );
    }
    assert!(!cursor.at_end());
    cursor.seek(u64::MAX);
    assert!(cursor.at_end());
    assert_eq!(cursor.position(), events.len() as u64);
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, events.len(), retention))
    );
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_torn_last_line_is_reported_in_the_note_and_the_rest_replays() {
    let path = temp("torn.jsonl");
    let events = write_recording(&path, 1_500);
    let text = std::fs::read(&path).expect("read");
    std::fs::write(&path, &text[..text.len() - 10]).expect("cut");
    let mut cursor = FileCursor::open_with(&path, tight(), dense()).expect("open");
    assert!(cursor.indexer().wait(Duration::from_secs(60)));
    let note = cursor.note().expect("a note");
    assert!(note.contains("the last line is truncated"), "{note}");
    assert_eq!(cursor.total(), Some(events.len() as u64 - 1));
    cursor.seek(u64::MAX);
    assert_eq!(cursor.position(), events.len() as u64 - 1);
    std::fs::remove_file(&path).ok();
}

#[test]
fn not_a_recording_fails_at_open() {
    let path = temp("bad.jsonl");
    std::fs::write(&path, "hello\n").expect("write");
    let error = FileCursor::open(&path, Retention::default()).expect_err("not a recording");
    assert!(error.to_string().contains(":1: not JSON Lines"), "{error}");
    std::fs::remove_file(&path).ok();
}
