//! Editing a held request's body in the user's editor (`$VISUAL`, `$EDITOR`, else `vi`), in a
//! private temporary file that is removed afterwards.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// The editor command: `$VISUAL`, `$EDITOR`, else `vi` (a command with arguments is split on
/// spaces).
fn editor() -> Vec<String> {
    let text = std::env::var("VISUAL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| std::env::var("EDITOR").ok())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".to_string());
    text.split_whitespace().map(str::to_string).collect()
}

/// Writes `body` to a new private file, runs the editor on it and returns what it holds then.
/// The terminal must be given back to the editor by the caller.
pub(crate) fn edit(id: u64, body: &str) -> Result<String, String> {
    let path = std::env::temp_dir().join(format!("mcpscope-held-{}-{id}.json", std::process::id()));
    let command = editor();
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let result = write_run_read_with(&path, body, &words);
    let _ = std::fs::remove_file(&path);
    result
}

fn write_run_read_with(path: &PathBuf, body: &str, command: &[&str]) -> Result<String, String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let pretty = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| body.to_string());
    file.write_all(pretty.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    drop(file);
    let (program, args) = command.split_first().ok_or("no editor")?;
    let status = Command::new(program)
        .args(args)
        .arg(path)
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    if !status.success() {
        return Err(format!("{program} exited with {status}: not forwarded"));
    }
    let edited = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Sent compact, as a client sends it; kept as typed if it is not JSON.
    Ok(serde_json::from_str::<serde_json::Value>(&edited)
        .map(|v| v.to_string())
        .unwrap_or(edited))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_editor_s_changes_come_back() {
        // `sed -i` stands in for an editor: it rewrites the file in place.
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"before"}}}"#;
        let path =
            std::env::temp_dir().join(format!("mcpscope-edit-test-{}.json", std::process::id()));
        let result = super::write_run_read_with(&path, body, &["sed", "-i", "s/before/after/"]);
        let _ = std::fs::remove_file(&path);
        let edited = result.expect("edited");
        assert!(
            edited.contains("\"after\"") && !edited.contains('\n'),
            "{edited}"
        );
    }
}
