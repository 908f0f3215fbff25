//! A model written as JSON and read back goes on exactly as the original: folding the rest of
//! the events into both gives the same calls, streams, messages, counts, notes and notices, for
//! every shipped recording and a long generated session under a tight retention window.

use std::path::Path;

use mcpscope_engine::event::Event;
use mcpscope_engine::fixtures::{many_calls, scenario};
use mcpscope_engine::model::{Model, Notice, Retention};
use mcpscope_engine::record::read_file;

/// A small window, so that eviction has happened before and after the cut.
fn tight() -> Retention {
    Retention {
        keep_calls: 40,
        keep_bytes: 16 << 10,
        max_rows: 120,
        stream_detail: 32,
        stream_detail_bytes: 4 << 10,
        streams_detail_bytes: 16 << 10,
        max_notes: 8,
        max_sessions: 8,
    }
}

fn fold(model: &mut Model, events: &[Event]) -> Vec<Notice> {
    events.iter().flat_map(|e| model.apply(e)).collect()
}

/// Cuts `events` at several places, sends the model through JSON there, and compares.
fn assert_round_trip(name: &str, events: &[Event], retention: Retention) {
    let len = events.len();
    let mut cuts = vec![0, 1, len / 3, len / 2, len.saturating_sub(1), len];
    cuts.dedup();
    for cut in cuts {
        let mut original = Model::with_retention(retention);
        fold(&mut original, &events[..cut]);
        let text = serde_json::to_string(&original).expect("serialize");
        let mut restored: Model = serde_json::from_str(&text).expect("deserialize");
        let from_original = fold(&mut original, &events[cut..]);
        let from_restored = fold(&mut restored, &events[cut..]);
        let at = format!("{name}, cut at {cut} of {len}");
        assert_eq!(from_restored, from_original, "notices, {at}");
        assert_eq!(restored.calls, original.calls, "calls, {at}");
        assert_eq!(restored.streams, original.streams, "streams, {at}");
        assert_eq!(restored.messages, original.messages, "messages, {at}");
        assert_eq!(restored.sessions, original.sessions, "sessions, {at}");
        assert_eq!(restored.notes, original.notes, "notes, {at}");
        assert_eq!(restored.counts(), original.counts(), "counts, {at}");
        assert_eq!(restored.evicted(), original.evicted(), "evicted, {at}");
        assert_eq!(restored.events_applied, original.events_applied, "{at}");
        assert_eq!(restored.clock(), original.clock(), "clock, {at}");
    }
}

#[test]
fn shipped_recordings_survive_a_round_trip_at_every_cut() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("recordings/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let events = read_file(&path).expect("a recording").events;
        let name = path.display().to_string();
        assert_round_trip(&name, &events, Retention::default());
        assert_round_trip(&name, &events, tight());
        seen += 1;
    }
    assert!(seen >= 5, "{seen} recordings");
}

#[test]
fn a_long_session_survives_a_round_trip_with_eviction_on_both_sides() {
    let mut events = scenario();
    events.extend(many_calls(800));
    assert_round_trip("many calls", &events, tight());
    assert_round_trip("many calls, unbounded", &events, Retention::unbounded());
}
