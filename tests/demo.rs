//! `mcpscope demo --json --seconds 8`: the real binary drives its client into the seed's fault
//! and reports the orphaned `poke`.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn demo_reports_the_orphaned_poke() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["demo", "--json", "--seconds", "8"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpscope demo");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).expect("stdout");
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut stderr).expect("stderr");
    }
    let status = status.unwrap_or_else(|| panic!("demo did not stop within 30 s\n{stderr}"));
    assert!(status.success(), "exit {status}\n{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(stderr.contains("fault rule armed"), "{stderr}");

    let notices: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let orphan = notices
        .iter()
        .find(|n| n["kind"] == "call_orphaned" && n["tool"] == "poke")
        .unwrap_or_else(|| panic!("no call_orphaned for poke in:\n{stdout}"));
    assert_eq!(orphan["how"], "reset", "{orphan}");
    // The healthy calls before it were answered, and the client carried on afterwards.
    for tool in ["echo", "slow", "peek"] {
        assert!(
            notices
                .iter()
                .any(|n| n["kind"] == "call_answered" && n["tool"] == tool),
            "{tool} not answered:\n{stdout}"
        );
    }
    assert!(
        notices
            .iter()
            .any(|n| n["kind"] == "fault_injected" && n["fault"] == "reset"),
        "{stdout}"
    );
    let orphaned_at = notices
        .iter()
        .position(|n| n["kind"] == "call_orphaned")
        .unwrap_or(0);
    assert!(
        notices[orphaned_at..]
            .iter()
            .any(|n| n["kind"] == "call_answered"),
        "no call after the orphan:\n{stdout}"
    );
}
