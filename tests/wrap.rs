//! `mcpscope wrap` / `unwrap`: the real binary on each host's configuration format in a
//! temporary directory. Stdio servers start behind `mcpscope stdio --name NAME --`, HTTP
//! servers are left alone (with the `mcpscope run` line to use), every other byte stays, a
//! second wrap changes nothing, unwrap gives the file back byte for byte, and files that are
//! not understood (not JSON, an unexpected shape, a symbolic link) are refused with exit 2 and
//! left as they were.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpscope");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn mcpscope(args: &[&str], home: &Path) -> Run {
    let out = Command::new(BIN)
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .env("MCPSCOPE_LOG", home.join("mcpscope.log"))
        .output()
        .expect("mcpscope runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn wrap(host: &str, file: &Path) -> Run {
    let home = file.parent().expect("dir");
    mcpscope(
        &[
            "wrap",
            "--host",
            host,
            "--config",
            &file.display().to_string(),
        ],
        home,
    )
}

fn unwrap(host: &str, file: &Path) -> Run {
    let home = file.parent().expect("dir");
    mcpscope(
        &[
            "unwrap",
            "--host",
            host,
            "--config",
            &file.display().to_string(),
        ],
        home,
    )
}

fn backup(file: &Path) -> PathBuf {
    let mut name = file.file_name().expect("name").to_os_string();
    name.push(".mcpscope-backup");
    file.with_file_name(name)
}

fn json(file: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(file).expect("read")).expect("JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

/// Asserts that `server` now starts `mcpscope stdio --name NAME -- ORIGINAL…`.
fn assert_wrapped(server: &Value, name: &str, original: &[&str]) {
    let command = server["command"].as_str().unwrap_or_default();
    assert!(
        Path::new(command)
            .file_name()
            .is_some_and(|n| n == "mcpscope"),
        "{server}"
    );
    assert!(Path::new(command).is_absolute(), "{server}");
    let name_arg = format!("--name={name}");
    let mut expected = vec!["stdio", name_arg.as_str(), "--"];
    expected.extend_from_slice(original);
    assert_eq!(strings(&server["args"]), expected, "{server}");
}

const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "tipsHistory": {"mcp": 3},
  "mcpServers": {
    "files": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/tmp"
      ],
      "env": {"A": "\u00e9"}
    },
    "bare": {"command": "/usr/bin/server"},
    "remote": {"type": "http", "url": "https://mcp.example.test/mcp"}
  },
  "projects": {
    "/home/me/work": {
      "allowedTools": [],
      "mcpServers": {
        "local": {"type": "stdio", "command": "python3", "args": [], "env": {}}
      }
    }
  },
  "cost": 0.30000000000000004,
  "big": 123456789012345678901234567890
}
"#;

#[test]
fn claude_code_servers_are_wrapped_and_unwrapped_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(".claude.json");
    std::fs::write(&file, CLAUDE_JSON).expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    }
    // The default location is ~/.claude.json.
    let run = mcpscope(&["wrap", "--host", "claude-code"], dir.path());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = json(&file);
    assert_wrapped(
        &v["mcpServers"]["files"],
        "files",
        &[
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/tmp",
        ],
    );
    assert_wrapped(&v["mcpServers"]["bare"], "bare", &["/usr/bin/server"]);
    assert_wrapped(
        &v["projects"]["/home/me/work"]["mcpServers"]["local"],
        "local",
        &["python3"],
    );
    // The HTTP server is left alone, and the line to observe it is printed.
    assert_eq!(
        v["mcpServers"]["remote"],
        serde_json::json!({"type": "http", "url": "https://mcp.example.test/mcp"})
    );
    assert!(
        run.stdout.contains("remote") && run.stdout.contains("mcpscope run -- claude"),
        "{}",
        run.stdout
    );
    // Every other byte is as it was: keys, escapes, numbers serde_json would respell.
    let text = std::fs::read_to_string(&file).expect("read");
    for kept in [
        "\"numStartups\": 12,\n  \"tipsHistory\": {\"mcp\": 3},",
        r#""env": {"A": "\u00e9"}"#,
        "0.30000000000000004",
        "123456789012345678901234567890",
        "\"remote\": {\"type\": \"http\", \"url\": \"https://mcp.example.test/mcp\"}",
    ] {
        assert!(text.contains(kept), "{kept:?} changed:\n{text}");
    }
    #[cfg(unix)]
    assert_eq!(mode(&file), 0o640, "the file keeps its permissions");
    // The backup is the original, 0600.
    let saved = backup(&file);
    assert_eq!(
        std::fs::read_to_string(&saved).expect("backup"),
        CLAUDE_JSON
    );
    #[cfg(unix)]
    assert_eq!(mode(&saved), 0o600);

    // A second wrap changes nothing.
    let wrapped = std::fs::read(&file).expect("read");
    let again = wrap("claude-code", &file);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("already wrapped"), "{}", again.stdout);
    assert_eq!(std::fs::read(&file).expect("read"), wrapped);
    let once = strings(&json(&file)["mcpServers"]["files"]["args"]);
    assert_eq!(once.iter().filter(|a| *a == "stdio").count(), 1);

    // Unwrap: the original, byte for byte, and the backup is gone.
    let back = unwrap("claude-code", &file);
    assert_eq!(back.code, 0, "{}{}", back.stdout, back.stderr);
    assert!(back.stdout.contains("byte for byte"), "{}", back.stdout);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), CLAUDE_JSON);
    assert!(!saved.exists());
    #[cfg(unix)]
    assert_eq!(mode(&file), 0o640);
}

#[test]
fn each_hosts_format_round_trips() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "claude-desktop",
            "claude_desktop_config.json",
            "mcpServers",
            "{\n    \"mcpServers\": {\n        \"notes\": {\n            \"command\": \"uvx\",\n            \"args\": [\"mcp-notes\", \"--dir\", \"~/n\"],\n            \"env\": {\"TOKEN\": \"x\"}\n        }\n    },\n    \"globalShortcut\": \"\"\n}",
        ),
        (
            "cursor",
            "mcp.json",
            "mcpServers",
            "{\"mcpServers\":{\"notes\":{\"command\":\"uvx\",\"args\":[\"mcp-notes\",\"--dir\",\"~/n\"]},\"web\":{\"url\":\"http://127.0.0.1:9/mcp\"}}}",
        ),
        (
            "vscode",
            "mcp.json",
            "servers",
            "{\r\n\t\"inputs\": [{\"type\": \"promptString\", \"id\": \"key\", \"password\": true}],\r\n\t\"servers\": {\r\n\t\t\"notes\": {\r\n\t\t\t\"type\": \"stdio\",\r\n\t\t\t\"command\": \"uvx\",\r\n\t\t\t\"args\": [\"mcp-notes\", \"--dir\", \"~/n\"]\r\n\t\t},\r\n\t\t\"web\": {\"type\": \"http\", \"url\": \"https://example.test/mcp\"}\r\n\t}\r\n}\r\n",
        ),
    ];
    for (host, name, key, original) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join(name);
        std::fs::write(&file, original).expect("write");
        let run = wrap(host, &file);
        assert_eq!(run.code, 0, "{host}: {}{}", run.stdout, run.stderr);
        let v = json(&file);
        assert_wrapped(
            &v[key]["notes"],
            "notes",
            &["uvx", "mcp-notes", "--dir", "~/n"],
        );
        if v[key].get("web").is_some() {
            assert!(v[key]["web"].get("command").is_none(), "{host}: {v}");
            assert!(
                run.stdout.contains("mcpscope run --"),
                "{host}: {}",
                run.stdout
            );
        }
        assert_eq!(
            std::fs::read_to_string(backup(&file)).expect("backup"),
            *original
        );
        let back = unwrap(host, &file);
        assert_eq!(back.code, 0, "{host}: {}{}", back.stdout, back.stderr);
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            *original,
            "{host}: not byte for byte"
        );
    }
}

#[test]
fn a_file_changed_since_wrap_keeps_its_changes_when_unwrapped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(".claude.json");
    std::fs::write(&file, CLAUDE_JSON).expect("write");
    assert_eq!(wrap("claude-code", &file).code, 0);
    // The host rewrites its own state in the file.
    let changed = std::fs::read_to_string(&file)
        .expect("read")
        .replace("\"numStartups\": 12", "\"numStartups\": 13");
    std::fs::write(&file, &changed).expect("write");
    let back = unwrap("claude-code", &file);
    assert_eq!(back.code, 0, "{}{}", back.stdout, back.stderr);
    assert!(
        back.stdout.contains("changed since wrap"),
        "{}",
        back.stdout
    );
    let text = std::fs::read_to_string(&file).expect("read");
    assert_eq!(
        text,
        CLAUDE_JSON.replace("\"numStartups\": 12", "\"numStartups\": 13"),
        "only the wrappers were to be taken out"
    );
    assert!(backup(&file).exists(), "the backup is kept");
    // With the backup still there and nothing wrapped, wrap refuses rather than overwrite it.
    let refused = wrap("claude-code", &file);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("earlier wrap"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), text);
}

#[test]
fn a_wrapped_server_that_lost_its_command_line_is_refused_by_unwrap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"a": {"command": "srv", "args": ["x"]}}}"#,
    )
    .expect("write");
    assert_eq!(wrap("cursor", &file).code, 0);
    let mut v = json(&file);
    v["mcpServers"]["a"]["args"] = serde_json::json!(["stdio", "--name", "a"]);
    let broken = serde_json::to_string(&v).expect("json");
    std::fs::write(&file, &broken).expect("write");
    let run = unwrap("cursor", &file);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("cannot be unwrapped"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), broken);
    assert!(backup(&file).exists());
}

#[test]
fn files_not_understood_are_refused_and_left_alone() {
    let cases: &[(&str, &str, &str)] = &[
        // VS Code accepts comments; serde_json does not.
        (
            "vscode",
            "{\n  // mine\n  \"servers\": {\"a\": {\"type\": \"stdio\", \"command\": \"x\"}}\n}\n",
            "not JSON",
        ),
        ("cursor", "[1, 2]", "not a JSON object"),
        (
            "cursor",
            r#"{"mcpServers": ["a"]}"#,
            "not an object of servers",
        ),
        (
            "claude-desktop",
            r#"{"mcpServers": {"a": {"env": {}}}}"#,
            "neither `command` nor `url`",
        ),
        (
            "cursor",
            r#"{"mcpServers": {"a": {"command": "x", "args": "-v"}}}"#,
            "not strings",
        ),
        (
            "vscode",
            r#"{"mcpServers": {"a": {"command": "x"}}}"#,
            "another host's file",
        ),
        ("cursor", "\u{0}\u{1}binary", "not"),
    ];
    for (host, text, says) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("config.json");
        std::fs::write(&file, text).expect("write");
        let run = wrap(host, &file);
        assert_eq!(run.code, 2, "{host} {text:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(says), "{host} {text:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert_eq!(std::fs::read_to_string(&file).expect("read"), *text);
        assert!(
            !backup(&file).exists(),
            "{host} {text:?}: a backup was written"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let run = mcpscope(&["wrap", "--host", "emacs"], dir.path());
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("unknown host"), "{}", run.stderr);
    // No backup: unwrap refuses.
    let file = dir.path().join("mcp.json");
    std::fs::write(&file, r#"{"mcpServers": {}}"#).expect("write");
    let run = unwrap("cursor", &file);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no backup"), "{}", run.stderr);
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("real.json");
    let original = r#"{"mcpServers": {"a": {"command": "srv"}}}"#;
    std::fs::write(&target, original).expect("write");
    let link = dir.path().join("mcp.json");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let run = wrap("cursor", &link);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("symbolic link"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&target).expect("read"), original);
    assert!(!backup(&link).exists());
    // A link planted where the backup goes is refused too, and the file is left alone.
    let file = dir.path().join("other.json");
    std::fs::write(&file, original).expect("write");
    let elsewhere = dir.path().join("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, backup(&file)).expect("symlink");
    let run = wrap("cursor", &file);
    assert_ne!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), original);
    assert!(!elsewhere.exists(), "written through the link");
}

/// The wrapped command line works: a host starting it gets the server's answers through the
/// shim, and the session is recorded.
#[test]
fn the_wrapped_command_line_runs_the_server_behind_the_shim() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mcp.json");
    // A stdio "server" that answers each line with a JSON-RPC result.
    let script = "import sys\nfor line in sys.stdin:\n    sys.stdout.write('{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\\n'); sys.stdout.flush()\n";
    let config =
        serde_json::json!({"mcpServers": {"echo": {"command": "python3", "args": ["-c", script]}}});
    std::fs::write(&file, serde_json::to_string_pretty(&config).expect("json")).expect("write");
    assert_eq!(wrap("cursor", &file).code, 0);
    let v = json(&file);
    let server = &v["mcpServers"]["echo"];
    let mut child = Command::new(server["command"].as_str().expect("command"))
        .args(strings(&server["args"]))
        .env("MCPSCOPE_LOG", dir.path().join("log"))
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the wrapped command starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .expect("write");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    assert_eq!(line, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let recorded: Vec<_> = std::fs::read_dir(dir.path().join("recordings"))
        .expect("recordings/")
        .collect();
    assert_eq!(recorded.len(), 1, "one recording of the session");
}

/// Runs a wrapped server's command line, sends one ping, returns the answer line.
fn ping_through(server: &Value, dir: &Path) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(server["command"].as_str().expect("command"))
        .args(strings(&server["args"]))
        .env("MCPSCOPE_LOG", dir.join("log"))
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the wrapped command starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    drop(stdin);
    let _ = child.wait();
    line
}

#[test]
fn names_that_look_like_options_or_hold_control_characters_stay_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mcp.json");
    let script = "import sys\nfor line in sys.stdin:\n    sys.stdout.write('{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\\n'); sys.stdout.flush()\n";
    let names = ["-x", "--", "--record=elsewhere.jsonl", "a\u{1b}[31mb\nc"];
    let mut servers = serde_json::Map::new();
    for name in names {
        servers.insert(
            name.into(),
            serde_json::json!({"command": "python3", "args": ["-c", script]}),
        );
    }
    let original =
        serde_json::to_string_pretty(&serde_json::json!({"mcpServers": servers})).expect("json");
    std::fs::write(&file, &original).expect("write");
    let run = wrap("cursor", &file);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        !run.stdout.contains('\u{1b}') && run.stdout.contains("a\\u{1b}[31mb\\nc"),
        "control characters are escaped: {:?}",
        run.stdout
    );
    assert_eq!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("  wrapped "))
            .count(),
        names.len(),
        "{}",
        run.stdout
    );
    let v = json(&file);
    for name in names {
        let server = &v["mcpServers"][name];
        assert_wrapped(server, name, &["python3", "-c", script]);
        let answer = ping_through(server, dir.path());
        assert_eq!(
            answer, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
            "{name:?}"
        );
    }
    assert!(
        !dir.path().join("elsewhere.jsonl").exists(),
        "a name is never taken as an option"
    );
    let back = unwrap("cursor", &file);
    assert_eq!(back.code, 0, "{}{}", back.stdout, back.stderr);
    assert!(!back.stdout.contains('\u{1b}'), "{:?}", back.stdout);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), original);
}

#[test]
fn args_written_before_command_unwrap_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mcp.json");
    let original = "{\n  \"mcpServers\": {\n    \"a\": {\"args\": [], \"command\": \"srv\"},\n    \
                    \"b\": {\"args\": [\"-v\"], \"env\": {}, \"command\": \"srv2\"}\n  }\n}\n";
    std::fs::write(&file, original).expect("write");
    let run = wrap("cursor", &file);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_wrapped(&json(&file)["mcpServers"]["a"], "a", &["srv"]);
    assert_wrapped(&json(&file)["mcpServers"]["b"], "b", &["srv2", "-v"]);
    let back = unwrap("cursor", &file);
    assert_eq!(back.code, 0, "{}{}", back.stdout, back.stderr);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), original);
}

#[cfg(unix)]
#[test]
fn owner_group_links_and_read_only_files_are_respected() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mcp.json");
    let original = r#"{"mcpServers": {"a": {"command": "srv", "args": ["x"]}}}"#;
    // As root on a user's file: its owner and group stay the user's.
    std::fs::write(&file, original).expect("write");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).expect("chown");
    }
    let run = wrap("cursor", &file);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let meta = std::fs::metadata(&file).expect("meta");
    if root {
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "owner kept");
    }
    let back = unwrap("cursor", &file);
    assert_eq!(back.code, 0, "{}{}", back.stdout, back.stderr);
    if root {
        let meta = std::fs::metadata(&file).expect("meta");
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "owner kept");
    }
    assert_eq!(std::fs::read_to_string(&file).expect("read"), original);

    // A file with another hard link: written in place, the link kept, and said.
    let link = dir.path().join("linked.json");
    std::fs::hard_link(&file, &link).expect("link");
    let run = wrap("cursor", &file);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("written in place"), "{}", run.stdout);
    assert_eq!(
        std::fs::read(&file).expect("file"),
        std::fs::read(&link).expect("link"),
        "both names still name one file"
    );
    assert_eq!(std::fs::metadata(&file).expect("meta").nlink(), 2);
    assert_eq!(unwrap("cursor", &file).code, 0);
    assert_eq!(std::fs::read_to_string(&link).expect("read"), original);
    std::fs::remove_file(&link).expect("unlink");

    // A read-only file is refused and left alone, with no backup left behind.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let run = wrap("cursor", &file);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("read-only"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), original);
    assert!(!backup(&file).exists(), "no backup of a refused wrap");
}

/// A host that rewrites its file (by rename, as hosts do) between wrap's last read and its
/// swap: the host's write is kept and wrap says the file changed.
#[test]
fn a_write_that_lands_while_wrap_rewrites_is_never_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"a": {"command": "srv", "args": ["x"]}}}"#,
    )
    .expect("write");
    let host_write =
        r#"{"numStartups": 2, "mcpServers": {"a": {"command": "srv", "args": ["x"]}}}"#;
    let child = Command::new(BIN)
        .args(["wrap", "--host", "cursor", "--config"])
        .arg(&file)
        .env("HOME", dir.path())
        .env("MCPSCOPE_LOG", dir.path().join("mcpscope.log"))
        .env("MCPSCOPE_WRAP_SWAP_DELAY_MS", "1500")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("wrap runs");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let staged = dir.path().join("host-tmp.json");
    std::fs::write(&staged, host_write).expect("stage");
    std::fs::rename(&staged, &file).expect("the host's rename");
    let out = child.wait_with_output().expect("wrap ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("changed while it was being rewritten"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        host_write,
        "the host's write is kept"
    );
}
