//! One definition per rule: the replay fold (`replay --json`), the replay viewer's cursor and a
//! live view (events as they arrive, the clock ticking between them) reach the same verdicts at
//! every cursor, on every shipped recording and on generated event scripts.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use mcpscope_engine::event::{EndHow, Event, EventKind, Leg};
use mcpscope_engine::fixtures::{Script, scenario};
use mcpscope_engine::model::{Model, Notice, RESUME_GRACE_MS};
use mcpscope_timeline::{FileCursor, ReplayCursor};

/// Everything a view shows of the calls: verdict (with its death), end time and owner.
fn digest(model: &Model) -> Vec<String> {
    model
        .calls
        .iter()
        .map(|c| {
            format!(
                "#{} {:?} ended={:?} owner={}",
                c.index, c.verdict, c.ended_at, c.owner
            )
        })
        .collect()
}

fn notice_digest(notices: &[Notice]) -> Vec<String> {
    notices
        .iter()
        .map(|n| format!("{} {:?}", n.t, n.what))
        .collect()
}

/// A live view: each event applied as it arrives, and the wall clock advancing the model every
/// `tick` between events (as the headless view and the TUI do).
struct Live {
    model: Model,
    notices: Vec<Notice>,
    tick: Duration,
}

impl Live {
    fn new(tick_ms: i64) -> Self {
        Self {
            model: Model::new(),
            notices: Vec::new(),
            tick: Duration::milliseconds(tick_ms),
        }
    }

    /// Ticks from the model's clock up to (not including) `until`.
    fn tick_until(&mut self, until: DateTime<Utc>) {
        let Some(mut t) = self.model.clock() else {
            return;
        };
        loop {
            t += self.tick;
            if t >= until {
                break;
            }
            let notices = self.model.advance(t);
            self.notices.extend(notices);
        }
    }

    fn apply(&mut self, event: &Event) {
        self.tick_until(event.t);
        let notices = self.model.apply(event);
        self.notices.extend(notices);
    }
}

/// Asserts that the three paths agree after every event and at a moment between events.
fn assert_agree(name: &str, events: &[Event]) {
    let mut cursor = ReplayCursor::with_spacing(events.to_vec(), 7);
    let mut live = Live::new(250);
    let mut live_fine = Live::new(1);
    for i in 0..events.len() {
        live.apply(&events[i]);
        live_fine.apply(&events[i]);
        cursor.step_forward();
        let (replayed, replay_notices) = Model::from_events(&events[..=i]);
        let expected = digest(&replayed);
        assert_eq!(digest(cursor.model_at()), expected, "{name}: viewer at {i}");
        assert_eq!(digest(&live.model), expected, "{name}: live at {i}");
        assert_eq!(
            digest(&live_fine.model),
            expected,
            "{name}: live (1 ms ticks) at {i}"
        );
        assert_eq!(
            notice_digest(&live.notices),
            notice_digest(&replay_notices),
            "{name}: notices up to {i}"
        );
        let at_i = mcpscope::replay::model_at(events, events[i].t);
        let same_time = events[..=i]
            .iter()
            .rev()
            .take_while(|e| e.t == events[i].t)
            .count();
        if events.get(i + 1).is_none_or(|next| next.t > events[i].t) {
            assert_eq!(
                digest(&at_i),
                expected,
                "{name}: model_at at {i} ({same_time} at that time)"
            );
        }
    }
    // Past the end, the clock alone closes the windows left open: the same in every path.
    let Some(last) = events.last() else {
        return;
    };
    let later = last.t + Duration::milliseconds(60_000 + RESUME_GRACE_MS);
    live.tick_until(later);
    live.model.advance(later);
    cursor.advance(later);
    let replayed = mcpscope::replay::model_at(events, later);
    assert_eq!(
        digest(cursor.model_at()),
        digest(&replayed),
        "{name}: viewer past the end"
    );
    assert_eq!(
        digest(&live.model),
        digest(&replayed),
        "{name}: live past the end"
    );
    // Seeking back and forth lands on the same state as stepping.
    for target in [events.len() / 2, 1, events.len(), 0, events.len() / 3] {
        cursor.seek(target);
        let (replayed, _) = Model::from_events(&events[..target]);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&replayed),
            "{name}: seek {target}"
        );
    }
}

/// The viewer's file cursor (read as needed, indexed densely in the background) reaches the same
/// state as the fold at every cursor, stepping and seeking through checkpoints.
fn assert_file_agrees(path: &std::path::Path, events: &[Event]) {
    let config = mcpscope_timeline::indexer::IndexConfig {
        every: 3,
        checkpoint_every: 6,
        max_checkpoints: 2,
        checkpoint_budget: usize::MAX,
    };
    let name = path.display();
    let mut cursor = FileCursor::open_with(path, Model::new().retention(), config).expect("opens");
    for i in 0..events.len() {
        cursor.step_forward();
        let (replayed, _) = Model::from_events(&events[..=i]);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&replayed),
            "{name}: file at {i}"
        );
    }
    assert!(cursor.indexer().wait(std::time::Duration::from_secs(30)));
    let len = events.len();
    for target in [len / 2, 1, len, 0, len / 3, len - 1, 2 * len / 3] {
        cursor.seek(target as u64);
        let (replayed, _) = Model::from_events(&events[..target]);
        assert_eq!(
            digest(cursor.model_at()),
            digest(&replayed),
            "{name}: file seek {target}"
        );
    }
}

#[test]
fn every_shipped_recording_agrees_at_every_cursor() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("recordings/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let recording = mcpscope_engine::record::read_file(&path).expect("a shipped recording");
        assert!(!recording.events.is_empty(), "{}", path.display());
        assert_agree(&path.display().to_string(), &recording.events);
        assert_file_agrees(&path, &recording.events);
        seen += 1;
    }
    assert!(seen >= 6, "only {seen} recordings in {}", dir.display());
}

/// A resumable call whose stream died at `death_ms`, and a resumption `resume_after_ms` later.
fn resumption_script(resume_after_ms: i64, retry_ms: Option<u64>) -> Vec<Event> {
    let mut s = Script::new();
    s.handshake(0, 1, "s1");
    s.call(1_000, 2, "s1", 2, "slow");
    s.events.push(Event::at(
        fixtures_at(1_100),
        EventKind::SseEvent {
            stream: 2,
            id: Some("e1".into()),
            event: None,
            retry: retry_ms,
            data: "".into(),
            start: 0,
            end: 0,
        },
    ));
    s.end(2_000, 2, EndHow::Reset, Leg::Upstream);
    let resume = 2_000 + resume_after_ms;
    s.open(resume, 3, "GET", Some("s1"));
    if let Some(EventKind::StreamOpened { headers, .. }) = s.events.last_mut().map(|e| &mut e.kind)
    {
        headers.push(("last-event-id".into(), "e1".into()));
    }
    s.head(resume + 5, 3, 200, "sse", Some("s1")).sse(
        resume + 10,
        3,
        Some("e2"),
        json!({"jsonrpc":"2.0","id":2,"result":{"content":[]}}),
        (0, 64),
    );
    s.end(resume + 11, 3, EndHow::Eof, Leg::Upstream);
    s.events
}

fn fixtures_at(ms: i64) -> DateTime<Utc> {
    mcpscope_engine::fixtures::at(ms)
}

fn verdict_of_slow(model: &Model) -> &'static str {
    model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("slow"))
        .map_or("missing", |c| c.verdict.name())
}

#[test]
fn a_resumption_after_the_window_finds_the_call_orphaned_everywhere() {
    // 20 s after the death: the window (15 s) has closed; the resumption comes too late.
    let events = resumption_script(20_000, None);
    assert_agree("late resumption", &events);
    // Up to the resumption's request, the call is orphaned in every path…
    let resume = events
        .iter()
        .position(|e| matches!(e.kind, EventKind::StreamOpened { stream: 3, .. }))
        .expect("the resumption");
    let (model, _) = Model::from_events(&events[..=resume]);
    assert_eq!(verdict_of_slow(&model), "orphaned");
    let mut cursor = ReplayCursor::new(events.clone());
    cursor.seek(resume + 1);
    assert_eq!(verdict_of_slow(cursor.model_at()), "orphaned");
    // …dated when the window closed, not when someone looked.
    let slow = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("slow"))
        .expect("slow");
    assert_eq!(
        slow.ended_at,
        Some(fixtures_at(2_000 + RESUME_GRACE_MS)),
        "{:?}",
        slow.verdict
    );
    // The late result still reaches the client, and every path shows it answered.
    let (model, _) = Model::from_events(&events);
    assert_eq!(verdict_of_slow(&model), "answered");
    cursor.seek(events.len());
    assert_eq!(verdict_of_slow(cursor.model_at()), "answered");
}

#[test]
fn a_resumption_inside_the_window_answers_the_call_everywhere() {
    let events = resumption_script(10_000, None);
    assert_agree("timely resumption", &events);
    let (model, _) = Model::from_events(&events);
    assert_eq!(verdict_of_slow(&model), "answered");
    // The server's retry hint widens the window: 20 s is in time with `retry: 10000`.
    let events = resumption_script(20_000, Some(10_000));
    assert_agree("resumption with a retry hint", &events);
    let (model, _) = Model::from_events(&events);
    assert_eq!(verdict_of_slow(&model), "answered");
}

#[test]
fn generated_scripts_agree_at_every_cursor() {
    assert_agree("scenario", &scenario());
    // Resumptions at many distances from the window's end, with and without a retry hint.
    for resume_after in [0, 1, 14_999, 15_000, 15_001, 16_000, 30_000] {
        for retry in [None, Some(1), Some(500)] {
            let events = resumption_script(resume_after, retry);
            assert_agree(
                &format!("resume after {resume_after} ms, retry {retry:?}"),
                &events,
            );
        }
    }
}
