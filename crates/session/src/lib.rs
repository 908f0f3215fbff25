//! A session: what a front end (the HTTP proxy, the stdio shim, the demo, a matrix cell)
//! observes, on its way to everything that reads it. The front end sends facts to a
//! [`sink::EventSink`]; the [`hub`] parses and redacts them, records each event, then hands it
//! to the view, to the viewers attached over the session's socket ([`publish`]) and to the
//! subscribers (OTLP, metrics), none of which can hold up forwarding. [`attach`] is the other
//! end of that socket: a viewer in another process.

/// Writes a line to stderr as `eprintln!` does, but never panics when stderr is gone (a closed
/// pipe, a terminal that went away): a diagnostic must not end the session. Nothing is written
/// while a full-screen view owns the terminal ([`hold_stderr`]).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if !$crate::stderr_held() {
            let _ = writeln!(std::io::stderr(), $($arg)*);
        }
    }};
}

static STDERR_HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// While `held`, [`say!`] writes nothing: a full-screen view (the matrix's grid) owns the
/// terminal and shows the same facts itself.
pub fn hold_stderr(held: bool) {
    STDERR_HELD.store(held, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`say!`] is held (see [`hold_stderr`]).
pub fn stderr_held() -> bool {
    STDERR_HELD.load(std::sync::atomic::Ordering::Relaxed)
}

pub mod attach;
mod builder;
pub mod hub;
pub mod log;
pub mod pace;
pub mod publish;
pub mod recording;
pub mod sink;

pub use builder::{Session, SessionBuilder};
