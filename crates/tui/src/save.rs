//! Files the view writes: `e` saves a call's diagram and row as `mcpscope-call-<N>.md`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use mcpscope_engine::model::Model;
use mcpscope_export::markdown;

/// Creates `dir/<stem>.md`, or `<stem>-2.md`, `<stem>-3.md`… when taken: never overwrites,
/// and the file is readable by its owner only (0600 on Unix).
pub(crate) fn create_new(dir: &Path, stem: &str) -> io::Result<(PathBuf, File)> {
    for n in 1u32.. {
        let name = if n == 1 {
            format!("{stem}.md")
        } else {
            format!("{stem}-{n}.md")
        };
        let path = dir.join(name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free file name"))
}

/// Writes call `index`'s Mermaid diagram and Markdown row into `dir`; returns the path.
pub(crate) fn export_call(model: &Model, index: usize, dir: &Path) -> io::Result<PathBuf> {
    let text = markdown::call_report(model, index).map_err(|e| io::Error::other(e.to_string()))?;
    let (path, mut file) = create_new(dir, &format!("mcpscope-call-{}", index + 1))?;
    file.write_all(text.as_bytes())?;
    Ok(path)
}
