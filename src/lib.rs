//! The `mcpscope` command's wiring: arguments, the proxy with its hub and a view, the demo and
//! replays. The engine, proxy, TUI and test kit live in their own crates under `crates/`.

/// Writes a line to stderr as `eprintln!` does, but never panics when stderr is gone (a closed
/// pipe, a terminal that went away): a diagnostic must not end the session.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod app;
pub mod attach;
pub mod cli;
pub mod demo;
pub mod headless;
pub mod index;
pub mod matrix;
pub mod model_stub;
pub mod pass_host;
pub mod replay;
pub mod signals;
pub mod stdio;
