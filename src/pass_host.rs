//! `--pass-host`: the client's `Host` and `Origin` reach the upstream unguarded, so that a test
//! sees the server's own DNS-rebinding protection rather than the proxy's. Loopback listen
//! addresses only, and said loudly at start (stderr and the TUI status bar).

use std::sync::Arc;

use crate::cli::ProxyArgs;
use mcpscope_engine::UsageError;

/// The warning printed at start and shown in the status bar.
pub const WARNING: &str = "--pass-host: the client's Host and Origin go to the upstream UNGUARDED (mcpscope's DNS-rebinding guard is off)";

/// Refuses `--pass-host` with a listen address that is not loopback.
pub fn check(args: &ProxyArgs) -> Result<(), UsageError> {
    if args.pass_host && !args.listen.is_loopback() {
        return Err(UsageError(format!(
            "--pass-host needs a loopback --listen address (not {}): it turns off the Host and Origin guard",
            args.listen.0
        )));
    }
    Ok(())
}

/// Warns on stderr when `--pass-host` is on.
pub fn warn(args: &ProxyArgs) {
    if args.pass_host {
        crate::say!("mcpscope: WARNING: {WARNING}");
    }
}

/// The status bar's live text with the `--pass-host` warning in front, when it is on.
pub fn status(
    live: Option<mcpscope_tui::StatusText>,
    pass_host: bool,
) -> Option<mcpscope_tui::StatusText> {
    if !pass_host {
        return live;
    }
    Some(mcpscope_tui::StatusText(Arc::new(move || {
        let rest = live.as_ref().and_then(|t| (t.0)());
        Some(match rest {
            Some(rest) => format!("PASS-HOST: Host/Origin unguarded · {rest}"),
            None => "PASS-HOST: Host/Origin unguarded".to_string(),
        })
    })))
}
