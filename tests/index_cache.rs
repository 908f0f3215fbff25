//! The saved index: a second opening of a recording starts from it and reaches exactly the
//! models a fold from the start reaches; a corrupt, stale or foreign cache is ignored, a grown
//! recording continues from it, the files are private and links are never followed; and
//! `mcpscope index` changes nothing that `replay --headless` or `check` print. Every test keeps
//! its cache in a temporary directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Retention};
use mcpscope_engine::record::read_file;
use mcpscope_timeline::FileCursor;
use mcpscope_timeline::indexer::{IndexConfig, SavedState};
use mcpscope_timeline::savedindex::IndexCache;

use mcpscope_engine::long_recording::{digest, fold_to, tight, write_recording};

const WAIT: Duration = Duration::from_secs(120);

fn dense() -> IndexConfig {
    IndexConfig {
        every: 64,
        checkpoint_every: 256,
        max_checkpoints: 5,
        checkpoint_budget: usize::MAX,
    }
}

fn open(path: &Path, cache: &IndexCache, config: IndexConfig) -> FileCursor {
    FileCursor::open_cached(path, tight(), config, Some(cache.clone())).expect("open")
}

/// Opens `path` with `cache`, waits for the pass and the saved index; returns the cursor, the
/// events taken from the cache and what became of it.
fn open_settled(
    path: &Path,
    cache: &IndexCache,
    config: IndexConfig,
) -> (FileCursor, Option<u64>, SavedState) {
    let cursor = open(path, cache, config);
    let saved = cursor.indexer().wait_saved(WAIT);
    assert_ne!(saved, SavedState::Pending, "settled");
    let loaded = cursor.indexer().state().loaded;
    (cursor, loaded, saved)
}

/// Seeks `cursor` to many places and compares with a fold from the start.
fn assert_agrees(cursor: &mut FileCursor, events: &[Event], what: &str) {
    let len = events.len();
    assert_eq!(cursor.total(), Some(len as u64), "{what}: total");
    let targets = [
        len,
        len - 1,
        len / 2,
        1,
        3 * len / 4 + 17,
        64,
        65,
        0,
        len / 3,
        len,
    ];
    for target in targets {
        cursor.seek(target as u64);
        assert_eq!(cursor.position(), target as u64, "{what}");
        let expected = fold_to(events, target, tight());
        assert_eq!(
            digest(cursor.model_at()),
            digest(&expected),
            "{what}: seek to {target} of {len}"
        );
        assert_eq!(cursor.model_at().calls, expected.calls, "{what}: {target}");
        assert_eq!(cursor.model_at().messages, expected.messages, "{what}");
    }
    assert!(cursor.note().is_none(), "{what}: {:?}", cursor.note());
}

fn deaths(cursor: &FileCursor) -> Vec<u64> {
    cursor.indexer().state().deaths.clone()
}

fn cache_in(dir: &Path) -> IndexCache {
    IndexCache::in_dir(dir.join("cache").join("mcpscope").join("index"))
}

#[test]
fn a_second_opening_starts_from_the_saved_index_and_agrees_everywhere() {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("rec.jsonl");
    let events = write_recording(&path, 1_500);
    let cache = cache_in(dir.path());
    for config in [dense(), IndexConfig::default()] {
        let (mut first, loaded, saved) = open_settled(&path, &cache, config);
        assert_eq!(loaded, None, "nothing saved yet");
        let file = cache.file_for(&path).expect("a cache path");
        assert_eq!(saved, SavedState::Written(file.clone()));
        let (mut second, loaded, saved) = open_settled(&path, &cache, config);
        let loaded = loaded.expect("the second opening uses the saved index");
        assert!(loaded > 0 && loaded < events.len() as u64, "{loaded}");
        assert_eq!(saved, SavedState::Fresh(file.clone()));
        {
            let (a, b) = (first.indexer().state(), second.indexer().state());
            assert_eq!(a.points, b.points);
            assert_eq!(a.times, b.times);
            assert_eq!(a.deaths, b.deaths);
            assert!(!b.deaths.is_empty());
            assert_eq!(a.events, b.events);
            // The end, one before the last index point's events and at most two more.
            assert!(b.checkpoints.len() <= 4 + 1, "{}", b.checkpoints.len());
        }
        assert_agrees(&mut second, &events, "second opening");
        assert_agrees(&mut first, &events, "first opening");
        // Deaths step the same way.
        second.seek(0);
        let mut found = Vec::new();
        while let Some(at) = second.next_death() {
            found.push(at - 1);
        }
        assert_eq!(found, deaths(&first));
        // A header and at most three models (the one a pass resumes from and two more).
        let text = std::fs::read(&file).expect("cache");
        let lines = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        assert!((2..=4).contains(&lines), "{lines} lines");
        std::fs::remove_file(&file).expect("clear for the next density");
    }
}

#[test]
fn a_corrupt_or_foreign_cache_is_ignored_and_rebuilt() {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("rec.jsonl");
    let events = write_recording(&path, 1_500);
    let cache = cache_in(dir.path());
    let (_, _, saved) = open_settled(&path, &cache, dense());
    let file = cache.file_for(&path).expect("path");
    assert_eq!(saved, SavedState::Written(file.clone()));
    let good = std::fs::read(&file).expect("cache");
    let newline = good
        .iter()
        .position(|&b| b == b'\n')
        .expect("a header line");
    let mut header: serde_json::Value =
        serde_json::from_slice(&good[..newline]).expect("header JSON");
    header["version"] = json!(999);
    let mut wrong_version = serde_json::to_vec(&header).expect("json");
    wrong_version.extend_from_slice(&good[newline..]);
    let mut foreign = serde_json::from_slice::<serde_json::Value>(&good[..newline]).expect("h");
    foreign["recording"] = json!("/elsewhere/rec.jsonl");
    let mut foreign_bytes = serde_json::to_vec(&foreign).expect("json");
    foreign_bytes.extend_from_slice(&good[newline..]);
    // A digit changed inside the model: still JSON, still a model, but not the one saved.
    let mut flipped = good.clone();
    let at = newline
        + 1
        + good[newline + 1..]
            .windows(10)
            .position(|w| w == b"\"arrival\":")
            .expect("a call in the model");
    let digit = at + 10;
    flipped[digit] = if flipped[digit] == b'1' { b'2' } else { b'1' };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a changed digit", flipped),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("cut at a line", good[..=newline].to_vec()),
        ("garbage", b"\x00\xffnot json at all\n{\"x\":1}\n".to_vec()),
        ("empty", Vec::new()),
        ("wrong version", wrong_version),
        ("another recording's", foreign_bytes),
    ];
    for (what, bytes) in cases {
        std::fs::write(&file, &bytes).expect("plant");
        let (mut cursor, loaded, saved) = open_settled(&path, &cache, dense());
        assert_eq!(loaded, None, "{what}: not used");
        assert_eq!(saved, SavedState::Written(file.clone()), "{what}: rebuilt");
        assert_agrees(&mut cursor, &events, what);
        // Rebuilt: the next opening uses it.
        let (_, loaded, _) = open_settled(&path, &cache, dense());
        assert!(loaded.is_some(), "{what}: used after the rebuild");
    }
    // A good cache that others may write to is not trusted.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o622)).expect("chmod");
    let (mut cursor, loaded, saved) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None, "a cache writable by others is not used");
    assert_eq!(saved, SavedState::Written(file.clone()));
    assert_agrees(&mut cursor, &events, "writable by others");
    let mode = std::fs::metadata(&file)
        .expect("cache")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "replaced by a private one");
    // Folded with another retention: not used for this one, and replaced by it.
    let other = FileCursor::open_cached(&path, Retention::default(), dense(), Some(cache.clone()))
        .expect("open");
    assert_eq!(
        other.indexer().wait_saved(WAIT),
        SavedState::Written(file.clone())
    );
    assert_eq!(other.indexer().state().loaded, None);
    let (mut cursor, loaded, _) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None, "the other retention's cache is not used");
    assert_agrees(&mut cursor, &events, "after another retention");
}

/// Replaces `needle` by `with` (same length) in the file, keeping it a recording.
fn rewrite_same_length(path: &Path, needle: &str, with: &str) {
    assert_eq!(needle.len(), with.len());
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.contains(needle), "{needle}");
    let changed = text.replacen(needle, with, 1);
    std::fs::write(path, changed).expect("rewrite");
}

fn mtime(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime")
}

fn set_mtime(path: &Path, t: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(t))
        .expect("set mtime");
}

#[test]
fn a_rewritten_recording_of_the_same_length_invalidates_the_cache() {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("rec.jsonl");
    write_recording(&path, 1_500);
    let cache = cache_in(dir.path());
    let (_, _, saved) = open_settled(&path, &cache, dense());
    assert!(matches!(saved, SavedState::Written(_)), "{saved:?}");
    // A change in the middle: a new modification time.
    let before = mtime(&path);
    rewrite_same_length(&path, "note 0800", "note 0801");
    set_mtime(&path, before + Duration::from_secs(2));
    let events = read_file(&path).expect("read").events;
    let (mut cursor, loaded, _) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None, "stale after a change in the middle");
    assert_agrees(&mut cursor, &events, "changed in the middle");
    assert!(
        cursor.model_at().notes.iter().any(|n| n.2 == "note 0801"),
        "the new text"
    );
    // A change near the end with the modification time put back: the hash sees it.
    let before = mtime(&path);
    rewrite_same_length(&path, "\"e1999\"", "\"e1998\"");
    set_mtime(&path, before);
    let events = read_file(&path).expect("read").events;
    let (mut cursor, loaded, _) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None, "stale after a change at the end, same mtime");
    assert_agrees(&mut cursor, &events, "changed at the end");
}

#[test]
fn a_grown_recording_continues_from_the_cache_and_ends_right() {
    let dir = tempfile::tempdir().expect("temp");
    let full = dir.path().join("full.jsonl");
    let events = write_recording(&full, 1_500);
    let bytes = std::fs::read(&full).expect("read");
    let path = dir.path().join("growing.jsonl");
    let cache = cache_in(dir.path());
    // Written so far: 60% of the file, the last line torn (as a recorder mid-write leaves it).
    let cut = bytes.len() * 6 / 10;
    assert_ne!(bytes[cut - 1], b'\n');
    std::fs::write(&path, &bytes[..cut]).expect("part");
    let (cursor, _, saved) = open_settled(&path, &cache, dense());
    let file = cache.file_for(&path).expect("path");
    assert_eq!(saved, SavedState::Written(file.clone()));
    let indexed = cursor.indexer().state().events;
    assert!(indexed > 0 && indexed < events.len() as u64);
    drop(cursor);
    // Then the rest arrives.
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("append");
    std::io::Write::write_all(&mut out, &bytes[cut..]).expect("rest");
    drop(out);
    let (mut cursor, loaded, saved) = open_settled(&path, &cache, dense());
    let loaded = loaded.expect("continued from the cache");
    assert!(loaded > 0 && loaded <= indexed, "{loaded} of {indexed}");
    assert_eq!(
        saved,
        SavedState::Written(file.clone()),
        "brought up to date"
    );
    assert_agrees(&mut cursor, &events, "grown");
    let (mut reference, _, _) = open_settled(&full, &cache, dense());
    assert_agrees(&mut reference, &events, "whole");
    assert_eq!(deaths(&cursor), deaths(&reference));
    assert_eq!(
        cursor.indexer().state().points,
        reference.indexer().state().points
    );
    // And the next opening finds it up to date.
    let (_, loaded, saved) = open_settled(&path, &cache, dense());
    assert!(loaded.is_some_and(|n| n > indexed), "{loaded:?}");
    assert_eq!(saved, SavedState::Fresh(file));
}

#[test]
fn the_cache_is_private_and_links_at_its_path_are_not_followed() {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("rec.jsonl");
    let events = write_recording(&path, 1_500);
    let cache = cache_in(dir.path());
    let file = cache.file_for(&path).expect("path");
    // A link planted where the cache goes, pointing at a file of the user's.
    std::fs::create_dir_all(&cache.dir).expect("dir");
    std::fs::set_permissions(&cache.dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").expect("victim");
    std::os::unix::fs::symlink(&victim, &file).expect("plant");
    let (_, loaded, saved) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None);
    assert_eq!(saved, SavedState::Written(file.clone()));
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious"
    );
    let meta = std::fs::symlink_metadata(&file).expect("cache");
    assert!(
        meta.file_type().is_file(),
        "the link was replaced, not followed"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dir_mode = std::fs::metadata(&cache.dir)
        .expect("dir")
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    // A link to a good cache is not read either.
    let elsewhere = dir.path().join("good.idx");
    std::fs::rename(&file, &elsewhere).expect("move");
    std::os::unix::fs::symlink(&elsewhere, &file).expect("plant");
    let (mut cursor, loaded, _) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None, "a link is not followed");
    assert_agrees(&mut cursor, &events, "after a link");
    // A fresh directory is made 0700 all the way down from what existed.
    let fresh = IndexCache::in_dir(dir.path().join("new").join("mcpscope").join("index"));
    let (_, _, saved) = open_settled(&path, &fresh, dense());
    assert!(matches!(saved, SavedState::Written(_)), "{saved:?}");
    for d in [dir.path().join("new/mcpscope"), fresh.dir.clone()] {
        let mode = std::fs::metadata(&d).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", d.display());
    }
}

#[test]
fn the_cache_keeps_the_newest_files_within_its_budget() {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("rec.jsonl");
    let events = write_recording(&path, 1_500);
    let mut cache = cache_in(dir.path());
    // The size of this recording's saved index, written once alone.
    let (_, _, saved) = open_settled(&path, &cache, dense());
    let SavedState::Written(file) = saved else {
        panic!("{saved:?}");
    };
    let size = std::fs::metadata(&file).expect("cache").len();
    std::fs::remove_file(&file).expect("again");
    // Saved indexes of other recordings, written an hour, a day and a week ago, a leftover of a
    // writer that died, one just begun, and a file that is none of these.
    let now = std::time::SystemTime::now();
    let hour = Duration::from_secs(3600);
    let plant = |name: &str, len: usize, age: Duration| {
        let file = cache.dir.join(name);
        std::fs::write(&file, vec![b'x'; len]).expect("plant");
        set_mtime(&file, now - age);
        file
    };
    let recent = plant("00000000000000a1.idx", 1_000, hour);
    let older = plant("00000000000000a2.idx", 1_000, 24 * hour);
    let oldest = plant("00000000000000a3.idx", 1_000, 7 * 24 * hour);
    let dead = plant(".00000000000000a4.idx.1.2.tmp", 10, 2 * hour);
    let busy = plant(".00000000000000a5.idx.1.3.tmp", 10, Duration::ZERO);
    let other = plant("notes.txt", 10_000_000, 30 * 24 * hour);
    // Room for the new one and two more.
    cache.keep_bytes = size + 2_500;
    let (mut cursor, _, saved) = open_settled(&path, &cache, dense());
    assert_eq!(saved, SavedState::Written(file.clone()));
    assert!(
        recent.exists() && older.exists(),
        "the newest within the budget stay"
    );
    assert!(!oldest.exists(), "the oldest past the budget goes");
    assert!(!dead.exists(), "a dead writer's leftover goes");
    assert!(busy.exists(), "a writer at work is left alone");
    assert!(other.exists(), "what is not a saved index is never touched");
    assert_agrees(&mut cursor, &events, "after pruning");
    // A budget smaller than the new file: the others go, the new one stays.
    cache.keep_bytes = 1;
    let (_, loaded, _) = open_settled(&path, &cache, dense());
    assert!(loaded.is_some());
    std::fs::remove_file(&file).expect("make it write again");
    let (_, _, saved) = open_settled(&path, &cache, dense());
    assert_eq!(saved, SavedState::Written(file.clone()));
    assert!(file.exists() && !recent.exists() && !older.exists());
}

#[test]
fn a_cache_that_cannot_be_written_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("rec.jsonl");
    let events = write_recording(&path, 1_500);
    // The cache directory would be under a regular file.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").expect("file");
    let cache = IndexCache::in_dir(blocker.join("index"));
    let (mut cursor, loaded, saved) = open_settled(&path, &cache, dense());
    assert_eq!(loaded, None);
    assert!(matches!(saved, SavedState::Unwritten(_)), "{saved:?}");
    assert_agrees(&mut cursor, &events, "unwritable cache");
    // Below the viewer's size threshold nothing is written at all.
    let small = IndexCache {
        save_from_bytes: u64::MAX,
        ..cache_in(dir.path())
    };
    let (_, _, saved) = open_settled(&path, &small, dense());
    assert_eq!(saved, SavedState::Off);
    assert!(!small.dir.exists());
}

/// Every shipped recording, indexed densely (as tests/rule_agreement.rs does) and opened a second
/// time from its saved index: at every cursor, stepping and seeking, the same state as the fold.
#[test]
fn every_shipped_recording_opened_from_its_saved_index_agrees_at_every_cursor() {
    let dir = tempfile::tempdir().expect("temp");
    let cache = cache_in(dir.path());
    let config = IndexConfig {
        every: 3,
        checkpoint_every: 6,
        max_checkpoints: 2,
        checkpoint_budget: usize::MAX,
    };
    let retention = Model::new().retention();
    for path in shipped() {
        let name = path.display();
        let events = read_file(&path).expect("a shipped recording").events;
        let first =
            FileCursor::open_cached(&path, retention, config, Some(cache.clone())).expect("opens");
        assert!(
            matches!(first.indexer().wait_saved(WAIT), SavedState::Written(_)),
            "{name}: saved"
        );
        let mut cursor =
            FileCursor::open_cached(&path, retention, config, Some(cache.clone())).expect("opens");
        assert!(matches!(
            cursor.indexer().wait_saved(WAIT),
            SavedState::Fresh(_)
        ));
        assert!(cursor.indexer().state().loaded.is_some(), "{name}: loaded");
        for i in 0..events.len() {
            cursor.step_forward();
            let (replayed, _) = Model::from_events(&events[..=i]);
            assert_eq!(
                digest(cursor.model_at()),
                digest(&replayed),
                "{name}: at {i}"
            );
        }
        let len = events.len();
        for target in [len / 2, 1, len, 0, len / 3, len - 1, 2 * len / 3, len] {
            cursor.seek(target as u64);
            let (replayed, _) = Model::from_events(&events[..target]);
            assert_eq!(
                digest(cursor.model_at()),
                digest(&replayed),
                "{name}: seek {target}"
            );
            assert_eq!(cursor.model_at().calls, replayed.calls, "{name}: {target}");
        }
        let (a, b) = (first.indexer().state(), cursor.indexer().state());
        assert_eq!(a.deaths, b.deaths, "{name}: deaths");
        assert_eq!(a.points, b.points, "{name}: points");
    }
}

// --- the binary -------------------------------------------------------------------------------

fn mcpscope(xdg: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpscope"));
    cmd.env("XDG_CACHE_HOME", xdg).env("HOME", xdg);
    cmd
}

fn output(mut cmd: Command) -> (String, String, Option<i32>) {
    let out = cmd.output().expect("run mcpscope");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

fn shipped() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recordings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("recordings/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

/// What `replay --headless` and `check --json` print for each file.
fn printed(xdg: &Path, files: &[PathBuf]) -> Vec<(String, String, Option<i32>)> {
    let mut all = Vec::new();
    for file in files {
        let mut replay = mcpscope(xdg);
        replay.arg("replay").arg(file).arg("--headless");
        all.push(output(replay));
        let mut check = mcpscope(xdg);
        check.arg("check").arg("--json").arg(file);
        all.push(output(check));
    }
    all
}

#[test]
fn mcpscope_index_saves_once_then_finds_it_up_to_date_and_changes_no_output() {
    let dir = tempfile::tempdir().expect("temp");
    let xdg = dir.path().join("xdg");
    let long = dir.path().join("long.jsonl");
    write_recording(&long, 3_000);
    let mut files = shipped();
    assert!(files.len() >= 5);
    files.push(long.clone());
    let before = printed(&xdg, &files);
    let mut index = mcpscope(&xdg);
    index.arg("index").args(&files);
    let (stdout, stderr, code) = output(index);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), files.len(), "{stdout}");
    for (line, file) in lines.iter().zip(&files) {
        assert!(line.starts_with(&format!("{}: ", file.display())), "{line}");
        assert!(line.contains(" events, "), "{line}");
    }
    let last = lines.last().expect("a line");
    assert!(last.contains(", saved: "), "{last}");
    let cache_dir = xdg.join("mcpscope").join("index");
    let saved: Vec<_> = std::fs::read_dir(&cache_dir)
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(
        saved.len(),
        1,
        "only the long recording needs one: {saved:?}"
    );
    assert!(last.ends_with(&saved[0].display().to_string()), "{last}");
    // Again: up to date.
    let mut again = mcpscope(&xdg);
    again.arg("index").arg(&long);
    let (stdout, stderr, code) = output(again);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains(", up to date: "), "{stdout}");
    assert_eq!(
        printed(&xdg, &files),
        before,
        "output unchanged by the index"
    );
    // Not a recording: said, and exit 1.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "hello\n").expect("bad");
    let mut index = mcpscope(&xdg);
    index.arg("index").arg(&bad);
    let (stdout, _, code) = output(index);
    assert_eq!(code, Some(1));
    assert!(stdout.contains("not JSON Lines"), "{stdout}");
}

/// The viewer in a detached tmux session (killed when dropped), with its own cache directory.
struct Viewer {
    name: String,
}

impl Viewer {
    fn start(xdg: &Path, file: &Path, extra: &[&str]) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("mcpscope-index-{}-{n}", std::process::id());
        let command = format!(
            "TZ=UTC TERM=xterm-256color XDG_CACHE_HOME='{}' HOME='{}' exec '{}' replay '{}' {}",
            xdg.display(),
            xdg.display(),
            env!("CARGO_BIN_EXE_mcpscope"),
            file.display(),
            extra.join(" ")
        );
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x", "200", "-y", "50"])
            .arg(command)
            .status()
            .expect("tmux must be installed (apt-get install tmux)");
        assert!(status.success(), "tmux new-session failed");
        Self { name }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn key(&self, key: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.name, "-l", key])
            .status()
            .expect("send-keys");
        assert!(status.success());
    }

    fn wait_for(&self, what: &str, want: impl Fn(&str) -> bool) {
        let start = std::time::Instant::now();
        loop {
            let screen = self.screen();
            if want(&screen) {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Opens, goes to the end, quits, and waits for the process to be gone (the saved index is
    /// written before it exits).
    fn end_and_quit(self, events: usize) {
        self.wait_for("the first screen", |s| s.contains("REPLAY"));
        self.key("]");
        let end = format!("event {events}/{events} ");
        self.wait_for("the end", |s| s.contains(&end));
        self.key("q");
        let start = std::time::Instant::now();
        while Command::new("tmux")
            .args(["has-session", "-t", &self.name])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            assert!(start.elapsed() < WAIT, "the viewer did not quit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .output();
    }
}

fn index_files(xdg: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(xdg.join("mcpscope").join("index"))
        .map(|dir| dir.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default()
}

#[test]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
fn the_viewer_saves_the_index_of_a_long_recording_and_no_index_cache_leaves_it_alone() {
    let dir = tempfile::tempdir().expect("temp");
    let file = dir.path().join("long.jsonl");
    let events = write_recording(&file, 24_000).len();
    let size = std::fs::metadata(&file).expect("file").len();
    assert!(
        size >= mcpscope_timeline::savedindex::AUTO_SAVE_FROM,
        "{size} bytes: long enough to be saved"
    );
    let xdg = dir.path().join("xdg");
    Viewer::start(&xdg, &file, &[]).end_and_quit(events);
    let saved = index_files(&xdg);
    assert_eq!(saved.len(), 1, "{saved:?}");
    let mode = std::fs::metadata(&saved[0])
        .expect("cache")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let written = mtime(&saved[0]);
    // The second opening reads it and leaves it as it is (the recording has not changed).
    Viewer::start(&xdg, &file, &[]).end_and_quit(events);
    assert_eq!(index_files(&xdg), saved);
    assert_eq!(mtime(&saved[0]), written, "up to date: not rewritten");
    // --no-index-cache: nothing read, nothing written.
    let other = dir.path().join("other-xdg");
    Viewer::start(&other, &file, &["--no-index-cache"]).end_and_quit(events);
    assert!(!other.join("mcpscope").exists(), "no cache directory made");
}

/// Runs `mcpscope index FILE` (cache under `xdg`), bounded: its stdout, stderr, exit code and
/// the peak RSS seen (VmHWM, KiB) while it ran.
fn index_bounded(xdg: &Path, file: &Path, limit: Duration) -> (String, Option<i32>, u64) {
    use std::io::Read;
    let mut child = mcpscope(xdg)
        .arg("index")
        .arg(file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let status = format!("/proc/{}/status", child.id());
    let started = std::time::Instant::now();
    let mut peak = 0u64;
    let code = loop {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        if let Some(kib) = text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        if let Some(done) = child.try_wait().expect("try_wait") {
            break done.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpscope index did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    (out + &err, code, peak)
}

/// The cache file `mcpscope index` uses for `file` with its cache under `xdg`.
fn index_file_for(xdg: &Path, file: &Path) -> PathBuf {
    IndexCache::in_dir(xdg.join("mcpscope").join("index"))
        .file_for(file)
        .expect("cache path")
}

/// XXH3 64, as the saved index's check line is made.
fn check_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

#[test]
fn a_fifo_at_the_saved_index_path_does_not_hang_index() {
    let dir = tempfile::tempdir().expect("temp");
    let xdg = dir.path().join("xdg");
    let rec = dir.path().join("rec.jsonl");
    write_recording(&rec, 500);
    let cache = index_file_for(&xdg, &rec);
    std::fs::create_dir_all(cache.parent().expect("dir")).expect("cache dir");
    let made = Command::new("mkfifo").arg(&cache).status().expect("mkfifo");
    assert!(made.success());
    let (out, code, _) = index_bounded(&xdg, &rec, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(", saved: "), "rebuilt: {out}");
    assert!(std::fs::symlink_metadata(&cache).expect("cache").is_file());
}

#[test]
fn a_cache_with_wrong_offsets_or_far_too_large_is_rebuilt_not_blamed_on_the_recording() {
    let dir = tempfile::tempdir().expect("temp");
    let xdg = dir.path().join("xdg");
    let rec = dir.path().join("rec.jsonl");
    write_recording(&rec, 1_500);
    let (out, code, _) = index_bounded(&xdg, &rec, WAIT);
    assert_eq!(code, Some(0), "{out}");
    let cache = index_file_for(&xdg, &rec);
    let good = std::fs::read(&cache).expect("cache");
    let newline = good.iter().position(|&b| b == b'\n').expect("header");
    // Every offset moved one byte on, the check line recomputed: a cache that says the right
    // things about the file except where its lines start.
    let mut header: serde_json::Value = serde_json::from_slice(&good[..newline]).expect("header");
    let shift = |point: &mut serde_json::Value| {
        let offset = point["at"]["offset"].as_u64().expect("offset");
        point["at"]["offset"] = json!(offset + 1);
    };
    for point in header["points"].as_array_mut().expect("points") {
        shift(point);
    }
    shift(&mut header["resume"]);
    let mut moved = serde_json::to_vec(&header).expect("json");
    moved.push(b'\n');
    let body = &good[newline + 1..];
    let check_at = body[..body.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("check line")
        + 1;
    moved.extend_from_slice(&body[..check_at]);
    let check = format!("{{\"check\":\"{:016x}\"}}\n", check_hash(&moved));
    moved.extend_from_slice(check.as_bytes());
    std::fs::write(&cache, &moved).expect("plant");
    let (out, code, _) = index_bounded(&xdg, &rec, WAIT);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(", saved: "), "rebuilt from the start: {out}");
    assert!(
        !out.contains("bad line"),
        "the recording is not blamed: {out}"
    );
    // A valid header, then 3 GiB of nothing (sparse): not read.
    let mut big = good[..=newline].to_vec();
    big.extend_from_slice(b"{\"seq\":");
    std::fs::write(&cache, &big).expect("plant");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&cache)
        .expect("open");
    file.set_len(3 << 30).expect("sparse");
    drop(file);
    let (out, code, peak_kib) = index_bounded(&xdg, &rec, WAIT);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(", saved: "), "rebuilt: {out}");
    assert!(peak_kib < 200 * 1024, "peak RSS {peak_kib} KiB");
}
