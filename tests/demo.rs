//! `mcpscope demo --json --seconds 8`: the real binary drives its client into the seed's fault
//! and reports the orphaned `poke`.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs the binary with `args`, killing it after `limit`; returns (exit status or None when
/// killed, stdout, stderr).
fn run_bounded(args: &[&str], limit: Duration) -> (Option<ExitStatus>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpscope");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = out_reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    (status, stdout, stderr)
}

#[test]
fn demo_reports_the_orphaned_poke() {
    let started = Instant::now();
    let (status, stdout, stderr) = run_bounded(
        &["demo", "--json", "--seconds", "8"],
        Duration::from_secs(30),
    );
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
    // Every answer says whether it is a tool's error; the demo's tools succeed.
    for answered in notices.iter().filter(|n| n["kind"] == "call_answered") {
        assert_eq!(answered["is_error"], Value::Bool(false), "{answered}");
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

#[test]
fn a_bad_fault_spec_is_a_usage_error() {
    let (status, _, stderr) = run_bounded(
        &[
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
            "--json",
            "--fault",
            "reset aftr 5s",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{stderr}");
    assert!(
        stderr.contains("\"reset aftr 5s\"") && stderr.contains("\"aftr\""),
        "{stderr}"
    );
}
