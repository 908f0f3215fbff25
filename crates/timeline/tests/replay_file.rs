//! The replay viewer's file cursor: a recording read as needed, indexed in the background, and
//! sought through model checkpoints, reaches the same model as folding the file from its start,
//! at every cursor tried, with the retention policy active.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpscope_engine::event::Event;
use mcpscope_engine::model::Retention;
use mcpscope_timeline::FileCursor;
use mcpscope_timeline::indexer::IndexConfig;

use mcpscope_engine::long_recording::{digest, fold_to, tight, write_recording};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpscope-replay-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

/// Where the in-memory cursor's `next_death` stops, one death after another from the start.
fn deaths_in_memory(events: &[Event]) -> Vec<u64> {
    let mut memory = mcpscope_timeline::ReplayCursor::new(events.to_vec());
    std::iter::from_fn(|| memory.next_death().map(|at| at as u64)).collect()
}

/// The file cursor's deaths, walked from the start, are the in-memory cursor's.
fn assert_same_deaths(cursor: &mut FileCursor, events: &[Event]) {
    cursor.seek(0);
    let found: Vec<u64> = std::iter::from_fn(|| cursor.next_death()).collect();
    assert_eq!(found, deaths_in_memory(events));
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
    assert_same_deaths(&mut cursor, &events);
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

/// A cursor with few checkpoints, far apart (every 4,096 events in a recording of ~10,000):
/// seeks fold thousands of events.
fn sparse(path: &std::path::Path) -> FileCursor {
    let config = IndexConfig {
        checkpoint_budget: 1,
        ..dense()
    };
    let cursor = FileCursor::open_with(path, tight(), config).expect("open");
    assert!(cursor.indexer().wait(Duration::from_secs(60)), "indexed");
    cursor
}

#[test]
fn a_seek_past_its_deadline_stops_with_a_whole_model_and_goes_on_to_where_a_seek_lands() {
    let path = temp("bounded.jsonl");
    let events = write_recording(&path, 1_500);
    let len = events.len();
    let mut cursor = sparse(&path);
    let mut stops = 0;
    assert!(len > 9_000, "{len} events");
    for target in [4_095, 8_191, 3 * len / 4 + 17, 1, len - 1, len] {
        // A deadline already passed: each call folds one step (1,024 events) at most.
        loop {
            let before = cursor.position();
            let there = cursor.seek_until(target as u64, Some(Instant::now()));
            let at = cursor.position() as usize;
            assert_eq!(
                digest(cursor.model_at()),
                digest(&fold_to(&events, at, tight())),
                "stopped at {at} on the way to {target}"
            );
            if there {
                break;
            }
            stops += 1;
            assert!(at < target, "{at} short of {target}");
            assert_ne!(before, at as u64, "each call gets further");
        }
        assert_eq!(cursor.position(), target as u64);
    }
    assert!(stops >= 6, "the seeks stopped {stops} times");

    // Stepping back from a seek that arrived in steps folds from the cursor's own copy, as
    // after a seek in one go.
    cursor.seek(len as u64 / 2 + 300);
    while !cursor.seek_until(len as u64 / 2, Some(Instant::now())) {}
    cursor.step_back();
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, len / 2 - 1, tight()))
    );

    // A seek left on its way, then another: the second lands where a seek does.
    cursor.seek(1);
    assert!(!cursor.seek_until(7_000, Some(Instant::now())));
    cursor.seek(len as u64 / 3);
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, len / 3, tight()))
    );

    // By time: in steps, then after the last event at or before the time.
    let t = events[2 * len / 3].t;
    cursor.seek(1);
    let mut calls = 0;
    while !cursor.seek_time_until(t, Some(Instant::now())) {
        calls += 1;
    }
    assert!(calls >= 1, "the time seek went in one call");
    let n = events.partition_point(|e| e.t <= t).max(1);
    assert_eq!(cursor.position(), n as u64);
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, n, tight()))
    );
    std::fs::remove_file(&path).ok();
}

#[test]
fn the_player_seeks_a_slice_a_tick_says_so_and_a_key_stops_it_where_it_got() {
    use mcpscope_timeline::Speed;
    use mcpscope_timeline::player::{Command, Player};
    let path = temp("player.jsonl");
    let events = write_recording(&path, 1_500);
    let len = events.len();
    let cursor = sparse(&path);
    let mut player = Player::new(Box::new(cursor), Speed::X1).with_fold_slice(Duration::ZERO);

    // `:` to a time: on its way after the command, the status bar says so; each tick gets
    // further; it lands where a seek does.
    assert!(len > 9_000, "{len} events");
    let t = events[4_000].t;
    player.command(Command::SeekTime(t));
    assert!(player.busy());
    let note = player.status().note.unwrap_or_default();
    assert!(note.contains("seeking to "), "{note}");
    let mut ticks = 0;
    while player.busy() {
        let before = player.status().position;
        assert!(player.tick().changed);
        assert!(player.status().position > before);
        ticks += 1;
        assert!(ticks < len, "the seek never ends");
    }
    assert!(ticks >= 2, "{ticks} ticks");
    let status = player.status();
    let n = events.partition_point(|e| e.t <= t);
    assert_eq!(status.position, n);
    assert!(status.note.is_none(), "{:?}", status.note);
    assert_eq!(
        digest(player.model()),
        digest(&fold_to(&events, n, tight()))
    );

    // `]` from there: the last checkpoint is near the end, one tick.
    player.command(Command::End);
    assert!(!player.busy());
    assert_eq!(player.status().position, len);

    // `:` to a time, stopped by a step: the cursor stays where it got, one event on.
    player.command(Command::Start);
    while player.busy() {
        player.tick();
    }
    let t = events[8_000].t;
    player.command(Command::SeekTime(t));
    assert!(player.busy());
    let got = player.status().position;
    assert!(got < 8_000, "{got}");
    player.command(Command::StepForward);
    assert!(!player.busy());
    assert_eq!(player.status().position, got + 1);
    assert_eq!(
        digest(player.model()),
        digest(&fold_to(&events, got + 1, tight()))
    );

    // `n` goes to the next death through the same steps.
    player.command(Command::Start);
    while player.busy() {
        player.tick();
    }
    let deaths = deaths_in_memory(&events);
    let far = deaths
        .iter()
        .map(|&d| d as usize)
        .find(|&d| d > len / 2)
        .expect("a death in the second half");
    let before_far = deaths.iter().filter(|&&d| (d as usize) < far).count();
    for _ in 0..=before_far {
        player.command(Command::NextDeath);
        while player.busy() {
            player.tick();
        }
    }
    assert_eq!(player.status().position, far);
    std::fs::remove_file(&path).ok();
}

#[test]
fn seeks_that_read_ahead_on_a_thread_land_where_a_fold_from_the_start_does() {
    let path = temp("ahead.jsonl");
    let events = write_recording(&path, 1_500);
    let len = events.len();
    // Every seek of more than one event reads ahead.
    let mut cursor = sparse(&path).read_ahead_after(2);
    for target in [
        4_095,
        8_191,
        3 * len / 4 + 17,
        1,
        len - 1,
        len,
        len / 2,
        2,
        6_000,
    ] {
        cursor.seek(target as u64);
        assert_eq!(cursor.position(), target as u64);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&fold_to(&events, target, tight())),
            "seek to {target} of {len}"
        );
    }
    // The copy kept near the target (its index point from the pass, the reader being ahead)
    // serves stepping back.
    cursor.seek(1);
    cursor.seek(7_000);
    for back in 1..=70 {
        cursor.step_back();
        assert_eq!(
            digest(cursor.model_at()),
            digest(&fold_to(&events, 7_000 - back, tight())),
            "back {back}"
        );
    }
    // Playing on after a seek reads on from the thread, in order, to the end.
    cursor.seek(1);
    cursor.seek(3_000);
    let t = events[9_000].t;
    cursor.play_to(t);
    let n = events.partition_point(|e| e.t <= t);
    assert_eq!(cursor.position(), n as u64);
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, n, tight()))
    );
    cursor.seek(u64::MAX);
    assert!(cursor.at_end());
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, len, tight()))
    );
    // In steps, too.
    cursor.seek(1);
    while !cursor.seek_until(8_000, Some(Instant::now())) {}
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(&events, 8_000, tight()))
    );
    // Deaths as the in-memory cursor finds them.
    assert_same_deaths(&mut cursor, &events);
    std::fs::remove_file(&path).ok();
}
