//! Where diagnostics go: a log file of the user's own, never through a link.

/// Opens the log for appending: created `0600`, never through a link, and only a regular file
/// (opened non-blocking, so that a FIFO planted at the path fails at once instead of waiting for
/// a reader).
fn open_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Where diagnostics go: `$MCPSCOPE_LOG`, else `mcpscope.log` in the user's own runtime
/// directory (the one sessions publish in, checked to be the user's and closed to others).
fn path() -> std::io::Result<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("MCPSCOPE_LOG") {
        return Ok(std::path::PathBuf::from(path));
    }
    let dir = crate::publish::place::runtime_dir();
    crate::publish::place::prepare_dir(&dir)?;
    Ok(dir.join("mcpscope.log"))
}

/// Opens the diagnostics log ([`path`]) for appending; the error names the path.
pub fn open() -> std::io::Result<std::fs::File> {
    let path = path()?;
    open_file(&path).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))
}
