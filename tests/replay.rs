//! Replays: the shipped recordings fold to the verdicts they were made for, a replay to the end
//! equals the live run, the time cursor, and exact errors for bad recordings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpscope::replay;
use mcpscope_engine::event::{EndHow, EventKind};
use mcpscope_engine::model::{Call, Model, Notice, Verdict};
use mcpscope_engine::record::{self, Recording};
use mcpscope_testkit::scenario;

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings")
        .join(format!("{name}.jsonl"))
}

fn load(name: &str) -> Recording {
    let recording = record::read_file(&shipped(name)).expect("read the shipped recording");
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    recording
}

fn call<'a>(model: &'a Model, tool: &str) -> &'a Call {
    model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some(tool))
        .unwrap_or_else(|| panic!("no call of {tool}"))
}

fn orphaned_how(call: &Call) -> Option<EndHow> {
    match &call.verdict {
        Verdict::Orphaned { death, .. } => death.how,
        _ => None,
    }
}

/// (method, tool, verdict) of every call, in order.
fn verdicts(model: &Model) -> Vec<(String, Option<String>, String)> {
    model
        .calls
        .iter()
        .map(|c| {
            (
                c.method.to_string(),
                c.tool.as_deref().map(str::to_string),
                c.verdict.name().to_string(),
            )
        })
        .collect()
}

#[test]
fn healthy_every_call_answered() {
    let (model, _) = replay::fold(&load("healthy").events);
    assert!(model.calls.len() >= 6, "{:?}", verdicts(&model));
    for c in &model.calls {
        assert_eq!(c.verdict, Verdict::Answered, "{}", c.title());
    }
}

#[test]
fn server_dies_poke_orphaned_by_reset_and_get_stream_reset() {
    let recording = load("server-dies");
    let (model, _) = replay::fold(&recording.events);
    let poke = call(&model, "poke");
    assert_eq!(poke.verdict.name(), "orphaned");
    assert_eq!(orphaned_how(poke), Some(EndHow::Reset));
    let get_reset = model
        .streams
        .iter()
        .any(|s| s.method == "GET" && s.ended.as_ref().is_some_and(|e| e.how == EndHow::Reset));
    assert!(get_reset, "the GET stream died with the server");
    let echoes: Vec<&Call> = model
        .calls
        .iter()
        .filter(|c| c.tool.as_deref() == Some("echo"))
        .collect();
    assert_eq!(echoes.len(), 2);
    assert!(echoes.iter().all(|c| c.verdict == Verdict::Answered));
}

#[test]
fn sse_eof_poke_orphaned_by_clean_end() {
    let (model, _) = replay::fold(&load("sse-eof").events);
    let poke = call(&model, "poke");
    assert_eq!(poke.verdict.name(), "orphaned");
    assert_eq!(orphaned_how(poke), Some(EndHow::Eof));
}

#[test]
fn json_reset_poke_orphaned() {
    let (model, _) = replay::fold(&load("json-reset").events);
    let poke = call(&model, "poke");
    assert_eq!(poke.verdict.name(), "orphaned");
    assert_eq!(orphaned_how(poke), Some(EndHow::Reset));
}

#[test]
fn status_503_poke_is_an_error() {
    let (model, _) = replay::fold(&load("status-503").events);
    let poke = call(&model, "poke");
    assert_eq!(poke.verdict.name(), "error", "{:?}", poke.verdict);
}

#[test]
fn resumed_answered_after_a_resumption() {
    let (model, notices) = replay::fold(&load("resumed").events);
    let slow = call(&model, "slow");
    assert_eq!(slow.verdict, Verdict::Answered);
    assert_ne!(
        slow.owner, slow.request_stream,
        "re-owned by the resuming GET"
    );
    let kinds: Vec<String> = notices
        .iter()
        .map(notice_kind)
        .filter(|k| k.starts_with("call_") && k != "call_started")
        .collect();
    let resumable = kinds.iter().position(|k| k == "call_resumable");
    let resumed = kinds.iter().position(|k| k == "call_resumed");
    assert!(
        resumable.is_some() && resumable < resumed,
        "resumable, then resumed: {kinds:?}"
    );
}

fn notice_kind(notice: &Notice) -> String {
    serde_json::to_value(notice)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// Notices as JSON, without fields that depend on sub-millisecond rounding.
fn comparable(notices: &[Notice]) -> Vec<serde_json::Value> {
    notices
        .iter()
        .map(|n| {
            let mut v = serde_json::to_value(n).expect("notice JSON");
            if let Some(obj) = v.as_object_mut() {
                obj.remove("elapsed_ms");
            }
            v
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_to_the_end_equals_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in scenario::SCENARIOS {
        let (live_model, live) =
            tokio::time::timeout(Duration::from_secs(30), scenario::record(name, dir.path()))
                .await
                .unwrap_or_else(|_| panic!("{name}: timed out"))
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let recording = record::read_file(&dir.path().join(format!("{name}.jsonl")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (model, replayed) = Model::from_events(&recording.events);
        assert_eq!(comparable(&replayed), comparable(&live), "{name}: notices");
        assert_eq!(verdicts(&model), verdicts(&live_model), "{name}: verdicts");
        let (shipped_model, _) = replay::fold(&load(name).events);
        assert_eq!(
            verdicts(&model),
            verdicts(&shipped_model),
            "{name}: the shipped recording shows what a fresh run shows"
        );
    }
}

#[test]
fn cursor_before_the_death_pending_just_after_orphaned() {
    let events = load("server-dies").events;
    let (model, _) = replay::fold(&events);
    let poke = call(&model, "poke");
    let death = poke.verdict.death().copied().expect("poke died");
    let before = replay::model_at(&events, death.at - chrono::Duration::microseconds(1));
    assert_eq!(call(&before, "poke").verdict, Verdict::Pending);
    let after = replay::model_at(&events, death.at);
    assert_eq!(call(&after, "poke").verdict.name(), "orphaned");
    let start = replay::model_at(&events, events[0].t);
    assert!(
        start
            .calls
            .iter()
            .all(|c| c.tool.as_deref() != Some("poke"))
    );
}

#[test]
fn cursor_on_a_resumable_stream_resumable_then_answered() {
    let events = load("resumed").events;
    let died = events
        .iter()
        .find(|e| {
            matches!(
                e.kind,
                EventKind::StreamEnded {
                    how: EndHow::Reset,
                    ..
                }
            )
        })
        .map(|e| e.t)
        .expect("the cut");
    let at = replay::model_at(&events, died);
    assert_eq!(call(&at, "slow").verdict.name(), "resumable");
    let end = replay::model_at(&events, events[events.len() - 1].t);
    assert_eq!(call(&end, "slow").verdict, Verdict::Answered);
}

#[test]
fn a_recording_of_several_sessions_replays_them_all() {
    // Two runs' events merged into one recording, the second run's streams renumbered.
    let a = load("healthy").events;
    let b = load("server-dies").events;
    let offset = 1000;
    let mut events = a.clone();
    for mut e in b {
        shift_stream(&mut e.kind, offset);
        events.push(e);
    }
    events.sort_by_key(|e| e.t);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("two.jsonl");
    let mut rec = record::Recorder::create(&path, record::Create::New, true).expect("create");
    for e in &events {
        rec.write(e).expect("write");
    }
    drop(rec);
    let recording = record::read_file(&path).expect("read");
    let (model, _) = replay::fold(&recording.events);
    let sessions = model
        .sessions
        .iter()
        .filter(|s| s.id.is_some() && !s.streams.is_empty())
        .count();
    assert_eq!(sessions, 2);
    assert_eq!(model.calls.len(), a_calls() + b_calls());
    assert_eq!(
        model
            .calls
            .iter()
            .filter(|c| c.verdict.name() == "orphaned")
            .count(),
        1
    );
}

fn a_calls() -> usize {
    replay::fold(&load("healthy").events).0.calls.len()
}

fn b_calls() -> usize {
    replay::fold(&load("server-dies").events).0.calls.len()
}

fn shift_stream(kind: &mut EventKind, offset: u64) {
    if let Some(stream) = kind.stream_mut() {
        *stream += offset;
    }
}

// ---- bad recordings: one file each, exact error text ----

const HEADER: &str = r#"{"format":"mcpscope-recording","version":1,"created":"2025-01-01T00:00:00.000Z","tool_version":"0.1.0","redacted":true}"#;
const EVENT: &str = r#"{"t":"2025-01-01T00:00:00.000001Z","kind":"note","text":"hello"}"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn error_of(path: &Path) -> String {
    match record::read_file(path) {
        Ok(r) => panic!("{} loaded: {} events", path.display(), r.events.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_not_json_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "plain.txt", "hello world\n");
    assert_eq!(
        error_of(&path),
        format!(
            "{}:1: not JSON Lines: expected value (column 1)",
            path.display()
        )
    );
}

#[test]
fn bad_not_a_recording() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "other.jsonl", "{\"hello\":1}\n");
    assert_eq!(
        error_of(&path),
        format!(
            "{}:1: not an mcpscope recording (no \"format\": \"mcpscope-recording\" header)",
            path.display()
        )
    );
}

#[test]
fn bad_unknown_format_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "{}\n{EVENT}\n",
        HEADER.replace("\"version\":1", "\"version\":7")
    );
    let path = write(dir.path(), "v7.jsonl", &text);
    assert_eq!(
        error_of(&path),
        format!(
            "{}:1: unknown format version 7 (this mcpscope reads versions 1 to 2)",
            path.display()
        )
    );
}

#[test]
fn bad_empty_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "empty.jsonl", "");
    assert_eq!(
        error_of(&path),
        format!(
            "{}:1: empty file: not an mcpscope recording",
            path.display()
        )
    );
}

#[test]
fn bad_garbage_in_the_middle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!("{HEADER}\n{EVENT}\nnot json\n{EVENT}\n");
    let path = write(dir.path(), "garbage.jsonl", &text);
    assert_eq!(
        error_of(&path),
        format!(
            "{}:3: not JSON Lines: expected ident (column 2)",
            path.display()
        )
    );
}

#[test]
fn bad_unknown_event_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "{HEADER}\n{EVENT}\n{}\n",
        r#"{"t":"2025-01-01T00:00:01Z","kind":"teleport"}"#
    );
    let path = write(dir.path(), "kind.jsonl", &text);
    let err = error_of(&path);
    assert!(
        err.starts_with(&format!(
            "{}:3: bad event: unknown variant `teleport`, expected one of",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn bad_concatenated_recordings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!("{HEADER}\n{EVENT}\n{HEADER}\n{EVENT}\n");
    let path = write(dir.path(), "cat.jsonl", &text);
    assert_eq!(
        error_of(&path),
        format!(
            "{}:3: a second recording header: concatenated recordings are not supported \
             (record several sessions through one proxy run instead)",
            path.display()
        )
    );
}

#[test]
fn truncated_last_line_loads_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!("{HEADER}\n{EVENT}\n{}", &EVENT[..30]);
    let path = write(dir.path(), "cut.jsonl", &text);
    let recording = record::read_file(&path).expect("loads");
    assert_eq!(recording.events.len(), 1);
    assert_eq!(
        recording.warnings,
        vec![format!(
            "{}:3: the last line is truncated (the recording was cut off); ignored",
            path.display()
        )]
    );
}

#[test]
fn the_binary_replays_headless_and_reports_bad_files() {
    let bin = env!("CARGO_BIN_EXE_mcpscope");
    let out = std::process::Command::new(bin)
        .args(["replay", "--headless", "--speed", "0"])
        .arg(shipped("server-dies"))
        .output()
        .expect("run mcpscope");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("CALL ORPHANED") && l.contains("poke") && l.contains("reset")),
        "{text}"
    );
    let json = std::process::Command::new(bin)
        .args(["replay", "--json", "--speed", "0"])
        .arg(shipped("healthy"))
        .output()
        .expect("run mcpscope");
    assert!(json.status.success());
    let lines = String::from_utf8_lossy(&json.stdout);
    assert!(lines.lines().count() > 5);
    for line in lines.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("one JSON object per line");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = write(dir.path(), "bad.jsonl", "nope\n");
    let out = std::process::Command::new(bin)
        .args(["replay", "--headless"])
        .arg(&bad)
        .output()
        .expect("run mcpscope");
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "mcpscope: {}:1: not JSON Lines: expected ident (column 2)",
            bad.display()
        )
    );
}
