//! A long recording with eviction, deaths and notes, and what a model says of it: shared by the
//! replay-from-file and saved-index tests.

use std::path::Path;

use serde_json::json;

use crate::event::{EndHow, Event, EventKind, Leg};
use crate::fixtures::{Script, many_calls};
use crate::model::{Model, Retention};
use crate::record::{Create, Recorder, read_file};

/// Everything the views show of the state: every call held (verdict, end, owner, sequence span),
/// the counts, the notes, what retention evicted, and how many messages and streams are held.
pub fn digest(model: &Model) -> String {
    let calls: Vec<String> = model
        .calls
        .iter()
        .map(|c| {
            format!(
                "#{} {:?} ended={:?} owner={} seq={:?}",
                c.index, c.verdict, c.ended_at, c.owner, c.seq
            )
        })
        .collect();
    format!(
        "{calls:?}\ncounts={:?} notes={:?} applied={} last={:?} messages={} streams={} evicted={:?}",
        model.counts(),
        model.notes,
        model.events_applied,
        model.last_t,
        model.messages.iter().count(),
        model.streams.iter().count(),
        model.evicted(),
    )
}

/// A small window, so that eviction happens many times in a few thousand events.
pub fn tight() -> Retention {
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

/// `calls` calls (answered, orphaned, pending), a GET stream flooded with progress
/// notifications that dies halfway, and notes (`note 0000`, `note 0400`, …), in time order as a
/// proxy records them, written as a recording at `path`; the events read back.
pub fn write_recording(path: &Path, calls: usize) -> Vec<Event> {
    let mut s = Script::new();
    s.events = many_calls(calls);
    let base = 5_000;
    s.open(base, 90_000, "GET", Some("s1"))
        .head(base + 1, 90_000, 200, "sse", Some("s1"));
    for i in 0..2_000u64 {
        s.sse(
            base + 2 + i as i64,
            90_000,
            Some(&format!("e{i}")),
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":i}}),
            (i * 90, i * 90 + 89),
        );
        if i % 400 == 0 {
            s.push(EventKind::Note {
                stream: Some(90_000),
                text: format!("note {i:04}"),
            });
        }
    }
    s.end(base + 2_100, 90_000, EndHow::Reset, Leg::Upstream);
    s.events.sort_by_key(|e| e.t);
    let mut recorder = Recorder::create(path, Create::Replace, true).expect("create");
    for event in &s.events {
        recorder.write(event).expect("write");
    }
    recorder.flush().expect("flush");
    read_file(path).expect("read back").events
}

/// The model after the first `n` events.
pub fn fold_to(events: &[Event], n: usize, retention: Retention) -> Model {
    let mut model = Model::with_retention(retention);
    for event in &events[..n] {
        model.apply(event);
    }
    model
}
