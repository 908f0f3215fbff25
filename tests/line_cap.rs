//! A recording line past the cap (`engine::record::MAX_LINE_BYTES`, 128 MiB): every command
//! that reads a recording refuses it with an error naming the line, and holds at most the cap
//! of it, never the whole line. Run on the real binary and a generated file with one ~136 MiB
//! line; the peak RSS of each run (the kernel's `ru_maxrss` of the child, and its `VmHWM`
//! sampled while it runs) stays far below what decoding the line would cost.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpscope_engine::record::MAX_LINE_BYTES;

/// A recording: a header, two small events, one note whose line is `MAX_LINE_BYTES` + 8 MiB,
/// and one more small event after it.
fn write_over_the_cap(path: &Path) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    writeln!(
        out,
        r#"{{"format":"mcpscope-recording","version":2,"created":"2026-01-01T00:00:00.000Z","tool_version":"0.1.0","redacted":true}}"#
    )
    .expect("header");
    writeln!(
        out,
        r#"{{"t":"2026-01-01T00:00:00.000000Z","kind":"proxy_started","listen":"127.0.0.1:1","upstream":"http://127.0.0.1:2/mcp","version":"0.1.0"}}"#
    )
    .expect("line 2");
    writeln!(out, r#"{{"t":10,"kind":"note","text":"small"}}"#).expect("line 3");
    out.write_all(br#"{"t":10,"kind":"note","text":""#)
        .expect("line 4");
    let block = vec![b'x'; 1 << 20];
    for _ in 0..(MAX_LINE_BYTES >> 20) + 8 {
        out.write_all(&block).expect("line 4");
    }
    out.write_all(b"\"}\n").expect("line 4");
    writeln!(out, r#"{{"t":10,"kind":"note","text":"after"}}"#).expect("line 5");
    out.flush().expect("flush");
}

/// One run of the binary: exit code, output, and the peak RSS in KiB.
struct Run {
    code: Option<i32>,
    /// Its stdout, then its stderr.
    output: String,
    peak_kib: u64,
}

fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Runs `mcpscope ARGS` (bounded by `limit`), sampling its VmHWM, and reaps it with `wait4`
/// for its exact peak.
#[allow(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, for its rusage"
)]
fn run(dir: &Path, args: &[&str], limit: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("MCPSCOPE_LOG", dir.join("mcpscope.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let drain = |mut source: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = source.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let started = Instant::now();
    let mut sampled = 0u64;
    let (code, maxrss) = loop {
        sampled = sampled.max(vm_hwm_kib(pid));
        let mut status = 0;
        // SAFETY: plain system calls on our own child; `usage` is written by the kernel.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let reaped =
            unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid as libc::pid_t {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            break (code, usage.ru_maxrss as u64);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpscope {args:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        code,
        output: stdout.join().expect("stdout reader") + &stderr.join().expect("stderr reader"),
        peak_kib: sampled.max(maxrss),
    }
}

#[test]
fn a_line_past_the_cap_is_an_error_for_every_command_and_costs_at_most_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("huge-line.jsonl");
    write_over_the_cap(&file);
    let line_mib = std::fs::metadata(&file).expect("size").len() >> 20;
    let path = file.to_str().expect("utf-8 path");
    let out = dir.path().join("converted.jsonl");
    let out = out.to_str().expect("utf-8 path");
    let cap_kib = (MAX_LINE_BYTES >> 10) as u64;
    let commands: [&[&str]; 5] = [
        &["check", path],
        &["replay", "--json", path],
        &["export", "--format", "har", path],
        &["convert", path, out],
        &["index", path],
    ];
    for args in commands {
        let run = run(dir.path(), args, Duration::from_secs(120));
        eprintln!(
            "{:?} on a {line_mib} MiB line: exit {:?}, peak RSS {} MiB",
            args[0],
            run.code,
            run.peak_kib >> 10
        );
        assert_ne!(run.code, Some(0), "{args:?} must fail: {}", run.output);
        assert!(
            run.output.contains("huge-line.jsonl:4:") && run.output.contains("longer than 128 MiB"),
            "{args:?} names the line and the cap: {}",
            run.output
        );
        // The cap of the line is read into memory, and nothing of it decoded: well under two
        // caps (decoding the whole line costs several times the line).
        assert!(
            run.peak_kib < 2 * cap_kib,
            "{args:?}: peak RSS {} MiB on a {line_mib} MiB line",
            run.peak_kib >> 10
        );
    }
    assert!(
        !Path::new(out).exists() || std::fs::metadata(out).is_ok_and(|m| m.len() < 1 << 20),
        "convert writes nothing of the line"
    );
}
