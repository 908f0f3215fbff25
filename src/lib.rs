//! The `mcpscope` command's wiring: arguments, the proxy with its hub and a view, the demo and
//! replays. The engine, proxy, TUI and test kit live in their own crates under `crates/`.

pub use mcpscope_tui::{hold_stderr, say, stderr_held};

/// Whether an error (or one of its causes) is a write to a closed pipe (`mcpscope … | head`).
pub fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Ends the process quietly after its stdout was closed by the reader: as a Unix tool does (and
/// cargo), it dies of `SIGPIPE`, so that the shell sees the pipe's end, not a verdict.
pub fn end_of_pipe() -> ! {
    #[cfg(unix)]
    // SAFETY: restoring the default disposition and raising a signal at ourselves is
    // async-signal-safe and touches no Rust state.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // 128 + SIGPIPE, where the signal could not end the process.
    std::process::exit(141)
}

pub mod app;
pub mod attach;
pub mod cli;
pub mod demo;
pub mod forward;
pub mod index;
pub mod model_stub;
pub mod pass_host;
pub mod replay;
pub mod signals;
pub mod stdio;
pub mod wrap;
