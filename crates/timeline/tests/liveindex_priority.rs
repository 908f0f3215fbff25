//! The live index yields to the traffic: its thread runs in the idle scheduling class (or, where
//! that is refused, ten nice levels below the thread that started it), so that on a busy
//! machine the proxy's threads go first.

#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use mcpscope_engine::model::Retention;
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_timeline::liveindex::LiveIndex;

/// Field `n` of a thread's `stat` as a number (fields count from 1, the pid; the command in
/// parentheses is field 2, the state field 3).
fn field_in(stat: &str, n: usize) -> i64 {
    let rest = &stat[stat.rfind(')').expect("comm ends") + 2..];
    rest.split(' ')
        .nth(n - 3)
        .expect("the field")
        .parse()
        .expect("a number")
}

/// The nice value in a thread's `stat` (field 19).
fn nice_in(stat: &str) -> i64 {
    field_in(stat, 19)
}

/// The scheduling policy in a thread's `stat` (field 41).
fn policy_in(stat: &str) -> i64 {
    field_in(stat, 41)
}

/// `(policy, nice)` of each of this process's threads named `name`.
fn priority_of(name: &str) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("a task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(dir.join("stat")).expect("stat");
            out.push((policy_in(&stat), nice_in(&stat)));
        }
    }
    out
}

#[test]
fn the_live_index_runs_below_the_thread_that_started_it() {
    let dir = std::env::temp_dir().join(format!("mcpscope-liveindex-nice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("run.jsonl");
    let _ = std::fs::remove_file(&path);
    let recorder = Recorder::create(&path, Create::New, true).expect("a recording");
    drop(recorder);
    let base = nice_in(&std::fs::read_to_string("/proc/thread-self/stat").expect("our stat"));
    let index = LiveIndex::start(&path, Retention::window(100));
    let lowered = |seen: &[(i64, i64)]| {
        seen.len() == 1
            && (seen[0].0 == i64::from(libc::SCHED_IDLE) || seen[0].1 == (base + 10).min(19))
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = priority_of("record-index");
    while !lowered(&seen) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        seen = priority_of("record-index");
    }
    assert!(lowered(&seen), "base nice {base}, (policy, nice) {seen:?}");
    drop(index);
    let _ = std::fs::remove_dir_all(&dir);
}
