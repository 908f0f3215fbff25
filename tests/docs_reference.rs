//! The generated chapters of the book cannot drift: docs/reference/cli.md and
//! docs/reference/keys.md are what `mcpscope reference cli|keys` prints from the definitions the
//! binary uses (clap's, the TUI's key table). After changing a flag or a key, remake them with
//! `MCPSCOPE_BLESS=1 cargo test --test docs_reference`.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generated(chapter: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["reference", chapter])
        .output()
        .expect("run mcpscope reference");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn compare(chapter: &str) {
    let path = root().join("docs/reference").join(format!("{chapter}.md"));
    let fresh = generated(chapter);
    if std::env::var_os("MCPSCOPE_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write the chapter");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(fresh.lines().count()));
        panic!(
            "{} is out of date (first difference at line {}); remake it with \
             `MCPSCOPE_BLESS=1 cargo test --test docs_reference`",
            path.display(),
            first + 1
        );
    }
}

#[test]
fn the_cli_reference_is_what_the_binary_says() {
    let text = generated("cli");
    // Every command and the options users reach for are in it.
    for needle in [
        "## `mcpscope matrix`",
        "## `mcpscope replay`",
        "--metrics-listen",
        "--rescue",
    ] {
        assert!(text.contains(needle), "{needle} missing");
    }
    assert!(
        !text.contains("mcpscope reference"),
        "hidden commands stay hidden"
    );
    compare("cli");
}

#[test]
fn the_keys_reference_is_the_key_table() {
    let text = generated("keys");
    for needle in [
        "| `?` |",
        "| `q  Ctrl-C` | quit |",
        "replay: next / previous stream death",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    compare("keys");
}

#[test]
fn the_readme_stays_short() {
    let size = std::fs::metadata(root().join("README.md"))
        .expect("README.md")
        .len();
    assert!(
        size <= 12_000,
        "README.md is {size} bytes: the detail belongs in the book (docs/)"
    );
}
