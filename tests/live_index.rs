//! The live index: a recording written by the real proxy carries a sidecar index, written as
//! it is recorded, that matches what the viewer's own pass computes and that its first opening
//! starts from; a recording cut short after it, or grown past it with a torn last line, opens
//! with exactly its events; a planted sidecar (a link, a FIFO, wrong offsets, writable by
//! others) is never followed nor trusted, and a link at the sidecar's name is replaced, not
//! written through.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpscope_engine::event::Event;
use mcpscope_engine::model::Retention;
use mcpscope_engine::record::read_file;
use mcpscope_testkit::wirecount;
use mcpscope_timeline::FileCursor;
use mcpscope_timeline::indexer::{IndexConfig, Indexer};
use mcpscope_timeline::savedindex::{self, Loaded};

use mcpscope_engine::long_recording::{digest, fold_to};

const WAIT: Duration = Duration::from_secs(120);

/// SSE events the upstream sends: with their messages, five index spacings and more.
const FLOOD: usize = 11_000;

/// What `replay` folds with by default, and so the live index too.
fn retention() -> Retention {
    Retention::window(Retention::DEFAULT_KEEP_CALLS)
}

fn every() -> u64 {
    IndexConfig::default().every
}

/// Runs the real binary as a proxy recording to `path` in front of a flooding upstream, makes
/// one call (answered by `FLOOD` SSE events), and stops it with SIGINT.
async fn record_through_the_proxy(path: &Path) {
    let upstream = wirecount::flooding_upstream(FLOOD).await.expect("upstream");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["--listen", "127.0.0.1:0", "--json", "--upstream"])
        .arg(format!("http://{upstream}/mcp"))
        .arg("--record")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn proxy");
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let addr = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the proxy says where it listens");
        if let Some(addr) = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
        {
            break addr.trim_start_matches("http://").parse().expect("address");
        }
    };
    let answer = tokio::time::timeout(WAIT, wirecount::post_once(addr))
        .await
        .expect("the flood ends in time")
        .expect("the flood");
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + WAIT;
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the proxy stops");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sidecar(path: &Path) -> PathBuf {
    savedindex::sidecar_for(&std::fs::canonicalize(path).expect("canonical"))
}

fn load(path: &Path) -> Option<Loaded> {
    savedindex::load_sidecar(path, retention(), every())
}

/// Opens `path` as the viewer does (no cache), waits for its pass; returns the cursor and the
/// events it took from a saved index.
fn open(path: &Path) -> (FileCursor, Option<u64>) {
    let cursor =
        FileCursor::open_cached(path, retention(), IndexConfig::default(), None).expect("open");
    assert!(cursor.indexer().wait(WAIT), "the pass ends");
    let loaded = cursor.indexer().state().loaded;
    (cursor, loaded)
}

/// The cursor at the end holds the model a fold of every event gives.
fn assert_end_agrees(cursor: &mut FileCursor, events: &[Event], what: &str) {
    assert_eq!(cursor.total(), Some(events.len() as u64), "{what}: total");
    cursor.seek(events.len() as u64);
    let expected = fold_to(events, events.len(), retention());
    assert_eq!(digest(cursor.model_at()), digest(&expected), "{what}: end");
    assert_eq!(cursor.model_at().calls, expected.calls, "{what}: calls");
    let back = events.len() - 1;
    cursor.seek(back as u64);
    assert_eq!(
        digest(cursor.model_at()),
        digest(&fold_to(events, back, retention())),
        "{what}: one back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_writes_a_sidecar_index_that_matches_the_pass_and_the_first_opening_uses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("flood.jsonl");
    record_through_the_proxy(&path).await;
    let events = read_file(&path).expect("read").events;
    assert!(events.len() as u64 > 5 * every(), "{} events", events.len());

    let file = sidecar(&path);
    let meta = std::fs::symlink_metadata(&file).expect("the sidecar is there");
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let loaded = load(&path).expect("the sidecar fits the recording");
    assert!(loaded.unchanged, "written after the recording's last line");
    let resume = loaded.resume.at.seq;
    let whole = events.len() as u64 / every() * every();
    // At the last index point once it caught up (it may stop short of it on a machine too busy
    // for it to read the last lines within its patience at the end).
    assert!(
        resume >= every() && resume <= whole,
        "saved up to {resume} of {whole}"
    );
    println!(
        "sidecar up to event {resume} of {} ({whole} indexable)",
        events.len()
    );

    // The viewer's own pass over the file, from the start.
    let indexer = Indexer::start(&path, retention(), IndexConfig::default());
    assert!(indexer.wait(WAIT));
    let state = indexer.state();
    assert_eq!(state.error, None);
    let k = loaded.points.len();
    assert_eq!(k as u64, resume / every());
    assert_eq!(loaded.points, state.points[..k], "index points");
    assert_eq!(loaded.times, state.times[..k], "their times");
    assert_eq!(
        Some(&loaded.resume),
        state.points.get(k),
        "the resume point"
    );
    let deaths: Vec<u64> = state
        .deaths
        .iter()
        .copied()
        .filter(|&d| d < resume)
        .collect();
    assert_eq!(loaded.deaths, deaths, "stream deaths");
    drop(state);
    drop(indexer);
    for checkpoint in &loaded.checkpoints {
        let expected = fold_to(&events, checkpoint.seq as usize, retention());
        assert_eq!(
            digest(&checkpoint.model),
            digest(&expected),
            "checkpoint at {}",
            checkpoint.seq
        );
        assert_eq!(checkpoint.model.calls, expected.calls);
    }

    // The first opening starts from it.
    let (mut cursor, from) = open(&path);
    assert_eq!(from, Some(resume));
    assert_end_agrees(&mut cursor, &events, "from the sidecar");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_cut_short_or_grown_past_its_sidecar_opens_with_exactly_its_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cut.jsonl");
    record_through_the_proxy(&path).await;
    let whole = std::fs::read(&path).expect("read");
    assert!(load(&path).is_some());

    // Grown after the last save, ending in a torn line (a writer killed mid-line): the index
    // is extended from where it ends, the torn line left out with a warning.
    let events = read_file(&path).expect("read").events;
    let mut grown = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("append");
    grown
        .write_all(br#"{"t":12,"kind":"note","stream":null,"te"#)
        .expect("torn line");
    drop(grown);
    let extended = load(&path).expect("a grown recording keeps its sidecar");
    assert!(!extended.unchanged);
    let (mut cursor, from) = open(&path);
    assert_eq!(from, Some(extended.resume.at.seq));
    assert_end_agrees(&mut cursor, &events, "grown with a torn line");
    assert!(
        cursor.note().is_some_and(|n| n.contains("truncated")),
        "{:?}",
        cursor.note()
    );
    drop(cursor);

    // Cut short mid-line, before the end the sidecar covers: it is not used.
    let cut = whole.len() * 3 / 5;
    std::fs::write(&path, &whole[..cut]).expect("cut");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("mode");
    assert!(
        load(&path).is_none(),
        "the sidecar of a longer file is refused"
    );
    let events = read_file(&path).expect("read the cut file").events;
    assert!(events.len() as u64 > every());
    let (mut cursor, from) = open(&path);
    assert_eq!(from, None, "a pass from the start");
    assert_end_agrees(&mut cursor, &events, "cut short");
}

/// XXH3 64, as the saved index's check line is made.
fn check_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Rewrites the sidecar at `file` with `change` applied to its header, its check line made
/// again so that only the change can make it wrong.
fn rewrite_header(file: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let text = std::fs::read(file).expect("read the sidecar");
    let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
    let mut header: serde_json::Value = serde_json::from_slice(lines[0]).expect("header");
    change(&mut header);
    let mut body = serde_json::to_vec(&header).expect("header");
    body.push(b'\n');
    for line in &lines[1..lines.len() - 1] {
        body.extend_from_slice(line);
    }
    let check = format!("{{\"check\":\"{:016x}\"}}\n", check_hash(&body));
    body.extend_from_slice(check.as_bytes());
    std::fs::write(file, body).expect("write the sidecar");
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).expect("mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_sidecar_is_never_followed_nor_trusted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("planted.jsonl");
    // A link at the sidecar's name before recording: replaced, its target untouched.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").expect("victim");
    let link = dir.path().join("planted.jsonl.idx");
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    record_through_the_proxy(&path).await;
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep me");
    let file = sidecar(&path);
    assert!(std::fs::symlink_metadata(&file).expect("sidecar").is_file());
    let good = std::fs::read(&file).expect("the sidecar");
    assert!(load(&path).is_some());
    let events = read_file(&path).expect("read").events;

    // The same bytes behind a link: not followed.
    let elsewhere = dir.path().join("elsewhere.idx");
    std::fs::write(&elsewhere, &good).expect("copy");
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).expect("mode");
    std::fs::remove_file(&file).expect("remove");
    std::os::unix::fs::symlink(&elsewhere, &file).expect("symlink");
    assert!(load(&path).is_none(), "a link is not followed");

    // A FIFO: refused at once, never waited on.
    std::fs::remove_file(&file).expect("remove");
    let made = Command::new("mkfifo").arg(&file).status().expect("mkfifo");
    assert!(made.success());
    let started = Instant::now();
    assert!(load(&path).is_none(), "a FIFO is refused");
    assert!(started.elapsed() < Duration::from_secs(10));
    std::fs::remove_file(&file).expect("remove");

    // Writable by others: refused.
    std::fs::write(&file, &good).expect("restore");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("mode");
    assert!(
        load(&path).is_none(),
        "a sidecar others may write is refused"
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("mode");
    assert!(load(&path).is_some(), "restored");

    // Offsets that are not the recording's line starts (the check line made to fit): refused.
    rewrite_header(&file, |header| {
        let offset = &mut header["points"][2]["at"]["offset"];
        *offset = serde_json::json!(offset.as_u64().expect("offset") + 7);
    });
    assert!(load(&path).is_none(), "wrong offsets are refused");
    // An offset past the end of the recording: refused.
    std::fs::write(&file, &good).expect("restore");
    rewrite_header(&file, |header| {
        header["resume"]["at"]["offset"] = serde_json::json!(u64::MAX / 2);
    });
    assert!(load(&path).is_none(), "an offset past the end is refused");
    // Damaged without its check made again: refused.
    let mut damaged = good.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x01;
    std::fs::write(&file, &damaged).expect("damage");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("mode");
    assert!(load(&path).is_none(), "a damaged sidecar is refused");

    // Whatever was planted, the recording opens with exactly its events.
    let (mut cursor, from) = open(&path);
    assert_eq!(from, None);
    assert_end_agrees(&mut cursor, &events, "a planted sidecar");
}
