//! The binary's command line: bad input gets one clear line and exit code 2.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .output()
        .expect("run mcpscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let (code, stderr) = run(args);
    assert_eq!(code, 2, "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: one line, got {stderr:?}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} should mention {needle:?}"
    );
}

#[test]
fn an_unknown_flag_is_one_line_and_exit_2() {
    assert_usage_error(&["--bogus"], "--bogus");
}

#[test]
fn a_bad_upstream_url_is_refused() {
    assert_usage_error(
        &["--upstream", "ftp://example/mcp", "--no-record"],
        "http:// or https://",
    );
    assert_usage_error(&["--upstream", "not a url", "--no-record"], "not a URL");
}

#[test]
fn a_missing_upstream_is_refused() {
    assert_usage_error(&["--no-record"], "--upstream");
}

#[test]
fn a_bad_listen_address_is_refused() {
    assert_usage_error(
        &[
            "--listen",
            "nowhere",
            "--upstream",
            "http://127.0.0.1:1/mcp",
        ],
        "nowhere",
    );
}

#[test]
fn a_non_loopback_listen_needs_allow_remote() {
    assert_usage_error(
        &[
            "--listen",
            "0.0.0.0:0",
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--no-record",
        ],
        "--allow-remote",
    );
}

#[test]
fn help_and_version_exit_0() {
    let (code, _) = run(&["--help"]);
    assert_eq!(code, 0);
    let (code, _) = run(&["--version"]);
    assert_eq!(code, 0);
}

#[test]
fn replay_without_a_file_names_the_missing_argument() {
    assert_usage_error(&["replay"], "<FILE>");
}

#[test]
fn a_missing_recording_says_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("absent.jsonl");
    let path = path.to_str().expect("utf-8 path");
    let (code, stderr) = run(&["replay", "--headless", path]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains(path), "{stderr:?}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr:?}"
    );
}

/// Runs the binary with its stdout a pipe whose reader is already gone (`mcpscope … | head`
/// once head has exited).
#[cfg(unix)]
fn into_closed_pipe(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env(
            "XDG_RUNTIME_DIR",
            std::env::temp_dir().join("mcpscope-no-such-runtime"),
        )
        .stdout(writer)
        .output()
        .expect("run mcpscope")
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_quietly_of_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    for args in [
        &["check", "--help"][..],
        &["check", "recordings/healthy.jsonl"],
        &["export", "--format", "har", "recordings/healthy.jsonl"],
        &["replay", "--json", "recordings/healthy.jsonl"],
    ] {
        let out = into_closed_pipe(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{args:?} said: {stderr}");
        let quiet = out.status.success() || out.status.signal() == Some(libc::SIGPIPE);
        assert!(quiet, "{args:?} ended {:?}", out.status);
    }
}

/// Completion scripts and the manual page come from the binary's own argument definitions:
/// every subcommand and flag is in them, the bash script parses, and an unknown shell is a
/// usage error.
#[test]
fn completions_and_the_manual_page_come_from_the_binary() {
    let bin = env!("CARGO_BIN_EXE_mcpscope");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Command::new(bin)
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        for word in [
            "matrix",
            "replay",
            "startup-timeout",
            "allow-remote-loopback",
        ] {
            assert!(text.contains(word), "{shell} completions lack {word}");
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("mcpscope.bash");
    let out = Command::new(bin)
        .args(["completions", "bash"])
        .output()
        .expect("runs");
    std::fs::write(&script, &out.stdout).expect("write");
    let parsed = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .expect("bash");
    assert!(parsed.success(), "the bash script does not parse");
    let (code, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
    let out = Command::new(bin).arg("man").output().expect("runs");
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH mcpscope 1"), "{page}");
    for word in ["matrix", "\\-\\-rescue", "\\-\\-forward"] {
        assert!(page.contains(word), "the manual page lacks {word}");
    }
}
