//! The host's file itself: read without following links, written next to itself and swapped
//! in with one rename, or rewritten in place where a rename cannot be used.

use std::io::{self, Read as _, Write as _};
use std::path::Path;

use mcpscope_engine::record::{Create, open_private};

use super::ConfigError;

/// Reads a host's file: a regular file, never through a symbolic link.
pub(super) fn read_config(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let shown = path.display();
    let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ConfigError::Io(format!("{shown} does not exist")),
        _ => ConfigError::Io(format!("{shown}: {e}")),
    })?;
    if meta.file_type().is_symlink() {
        return Err(ConfigError::Refused(format!(
            "{shown} is a symbolic link; mcpscope neither reads nor writes through links: name \
             the file it points to with --config; nothing was changed"
        )));
    }
    if !meta.is_file() {
        return Err(ConfigError::Refused(format!(
            "{shown} is not a regular file"
        )));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc_nofollow());
    }
    let mut bytes = Vec::new();
    options
        .open(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(|e| ConfigError::Io(format!("{shown}: {e}")))?;
    Ok(bytes)
}

#[cfg(all(unix, target_os = "linux"))]
fn libc_nofollow() -> i32 {
    libc::O_NOFOLLOW
}

#[cfg(all(unix, not(target_os = "linux")))]
fn libc_nofollow() -> i32 {
    0
}

/// Writes a new file (the backup): 0600, never through a link, never over an existing file.
pub(super) fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let mut file = open_private(path, Create::New)
        .map_err(|e| ConfigError::Io(format!("cannot write the backup {}: {e}", path.display())))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| ConfigError::Io(format!("cannot write the backup {}: {e}", path.display())))
}

/// How a host's file was rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A new file renamed over it, with its owner, group and permissions.
    Replaced,
    /// In place, because it has this many hard links (a rename would split them).
    InPlace(u64),
}

/// Rewrites the file with `bytes`, keeping its owner, group and permissions; refused if it no
/// longer holds `expected` (changed while we worked), or if it is read-only. A file with one
/// name is replaced in one exchange: the new file and the old swap places atomically, and if
/// what was swapped out is not `expected` (a host wrote it in the meantime) they swap back and
/// nothing is lost. A file with several hard links is written in place, which keeps them.
pub(super) fn replace_file(
    path: &Path,
    expected: &[u8],
    bytes: &[u8],
) -> Result<Written, ConfigError> {
    let shown = path.display();
    let io = |e: io::Error| ConfigError::Io(format!("{shown}: {e}"));
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    let permissions = meta.permissions();
    refuse_read_only(path, &permissions)?;
    #[cfg(unix)]
    let (links, owner) = {
        use std::os::unix::fs::MetadataExt;
        (meta.nlink(), (meta.uid(), meta.gid()))
    };
    #[cfg(not(unix))]
    let links = 1;
    if links > 1 {
        return write_in_place(path, expected, bytes).map(|()| Written::InPlace(links));
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".mcpscope-{}.tmp", std::process::id()));
    let temp = path.with_file_name(name);
    let written = (|| -> io::Result<()> {
        let mut file = open_private(&temp, Create::New)?;
        file.write_all(bytes)?;
        #[cfg(unix)]
        std::os::unix::fs::fchown(&file, Some(owner.0), Some(owner.1))?;
        file.set_permissions(permissions)?;
        file.sync_all()
    })();
    let outcome = written.map_err(io).and_then(|()| {
        if read_config(path)? != expected {
            return Err(ConfigError::Refused(format!(
                "{shown} changed while it was being rewritten; nothing was changed"
            )));
        }
        // Tests widen the window between that read and the swap, where a host's write lands.
        if let Some(ms) = std::env::var("MCPSCOPE_WRAP_SWAP_DELAY_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        swap_in(&temp, path, expected).map_err(|e| match e {
            Swap::Changed => ConfigError::Refused(format!(
                "{shown} changed while it was being rewritten (its new contents are kept); \
                 nothing was changed: run it again"
            )),
            Swap::Io(e) => io(e),
        })
    });
    let _ = std::fs::remove_file(&temp);
    outcome.map(|()| Written::Replaced)
}

/// A read-only file is the user's word that it is not to be changed: refused, even for root.
pub(super) fn refuse_read_only(
    path: &Path,
    permissions: &std::fs::Permissions,
) -> Result<(), ConfigError> {
    if permissions.readonly() {
        return Err(ConfigError::Refused(format!(
            "{} is read-only; nothing was changed (make it writable first if it is to be \
             changed)",
            path.display()
        )));
    }
    Ok(())
}

/// Why [`swap_in`] did not put the new file in place.
enum Swap {
    /// What it would have replaced was not what was read: swapped back.
    Changed,
    /// The file system said no.
    Io(io::Error),
}

/// Puts `temp` at `path`; what was at `path` ends at `temp`. Where the system can exchange two
/// names atomically (Linux `renameat2` with `RENAME_EXCHANGE`), the file swapped out is checked
/// against `expected` and swapped back when it differs, so a write that landed between the
/// last read and the swap is never lost; elsewhere a plain rename.
fn swap_in(temp: &Path, path: &Path, expected: &[u8]) -> Result<(), Swap> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes());
        if let (Ok(from), Ok(to)) = (c(temp), c(path)) {
            let exchange = |a: &std::ffi::CString, b: &std::ffi::CString| {
                // SAFETY: two NUL-terminated paths relative to the working directory.
                let rc = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            };
            match exchange(&from, &to) {
                Ok(()) => {
                    let swapped_out = std::fs::read(temp).map_err(Swap::Io)?;
                    if swapped_out != expected {
                        exchange(&from, &to).map_err(Swap::Io)?;
                        return Err(Swap::Changed);
                    }
                    return Ok(());
                }
                // A file system without exchange: the plain rename below.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {}
                Err(e) => return Err(Swap::Io(e)),
            }
        }
    }
    let _ = expected;
    std::fs::rename(temp, path).map_err(Swap::Io)
}

/// Writes `bytes` over the file itself (its inode, owner, permissions and other names kept),
/// after checking under the open handle that it still holds `expected`.
fn write_in_place(path: &Path, expected: &[u8], bytes: &[u8]) -> Result<(), ConfigError> {
    let shown = path.display();
    let io = |e: io::Error| ConfigError::Io(format!("{shown}: {e}"));
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc_nofollow());
    }
    let mut file = options.open(path).map_err(io)?;
    let mut current = Vec::new();
    file.read_to_end(&mut current).map_err(io)?;
    if current != expected {
        return Err(ConfigError::Refused(format!(
            "{shown} changed while it was being rewritten; nothing was changed"
        )));
    }
    use std::io::Seek;
    file.seek(io::SeekFrom::Start(0)).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.set_len(bytes.len() as u64).map_err(io)?;
    file.sync_all().map_err(io)
}
