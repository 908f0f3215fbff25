//! Where sessions publish: a directory only the user can enter, one socket per process in it,
//! and the checks that keep other users out (of the directory, and off the socket).

use std::io;
use std::path::{Path, PathBuf};

/// The directory's name under `$XDG_RUNTIME_DIR`.
const SUBDIR: &str = "mcpscope";

/// The effective user id of this process.
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The directory live sessions publish in: `$XDG_RUNTIME_DIR/mcpscope` when that variable names
/// an absolute path, else `/tmp/mcpscope-$UID`.
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(base) if base.is_absolute() => base.join(SUBDIR),
        _ => std::env::temp_dir().join(format!("mcpscope-{}", own_uid())),
    }
}

/// The socket of the process `pid` in `dir`.
pub fn socket_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.sock"))
}

/// The process id a socket's file name carries (`<pid>.sock`).
pub fn socket_pid(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_suffix(".sock")?
        .parse()
        .ok()
}

/// Whether a directory with this owner and mode may hold sessions of the user `me`: owned by
/// `me`, and nobody else may read, write or enter it.
pub fn check_dir_owner_mode(dir: &Path, owner: u32, mode: u32, me: u32) -> Result<(), String> {
    if owner != me {
        return Err(format!(
            "{} belongs to uid {owner}, not to you (uid {me}); refusing to use it",
            dir.display()
        ));
    }
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} has mode {:o}: group or others may use it; refusing to use it (chmod 700 it, or remove it)",
            dir.display(),
            mode & 0o777
        ));
    }
    Ok(())
}

/// Whether a peer with this uid may see the sessions of the user `me`: only the same user.
pub fn check_peer(peer: u32, me: u32) -> Result<(), String> {
    if peer == me {
        Ok(())
    } else {
        Err(format!(
            "uid {peer} is not the session's owner (uid {me}): refused"
        ))
    }
}

/// Checks an existing directory: a real directory (not a link), the user's own, closed to others.
pub fn check_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory; refusing to use it",
            dir.display()
        )));
    }
    check_dir_owner_mode(dir, meta.uid(), meta.mode(), own_uid()).map_err(io::Error::other)
}

/// Creates the directory (mode 0700) if it is missing, then checks it (see [`check_dir`]).
pub fn prepare_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    check_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_with_a_closed_directory_is_accepted() {
        let dir = Path::new("/run/user/1000/mcpscope");
        assert!(check_dir_owner_mode(dir, 1000, 0o40700, 1000).is_ok());
        let other = check_dir_owner_mode(dir, 1001, 0o40700, 1000).unwrap_err();
        assert!(other.contains("uid 1001"), "{other}");
        for mode in [0o40770, 0o40707, 0o40750, 0o40701] {
            let open = check_dir_owner_mode(dir, 1000, mode, 1000).unwrap_err();
            assert!(open.contains("group or others"), "{mode:o}: {open}");
        }
    }

    #[test]
    fn another_users_peer_is_refused() {
        assert!(check_peer(1000, 1000).is_ok());
        assert!(check_peer(0, 0).is_ok());
        let refused = check_peer(1001, 1000).unwrap_err();
        assert!(refused.contains("uid 1001") && refused.contains("refused"));
        assert!(check_peer(0, 1000).is_err(), "not even root's peer");
    }

    #[test]
    fn socket_names_carry_the_pid() {
        let dir = Path::new("/tmp/mcpscope-7");
        assert_eq!(socket_pid(&socket_path(dir, 4242)), Some(4242));
        assert_eq!(socket_pid(Path::new("/tmp/x.txt")), None);
        assert_eq!(socket_pid(Path::new("/tmp/abc.sock")), None);
    }
}
