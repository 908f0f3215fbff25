//! `mcpscope wrap` / `unwrap --host HOST [--config FILE]`: what was done to each server, one
//! line each on stdout; 2 for a file refused (not JSON, an unexpected shape, a link), 1 when
//! reading or writing failed. The rules live in `mcpscope_hosts::wrap`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::WrapArgs;
use mcpscope_hosts::wrap::{
    self, ConfigError, ConfigHost, Restored, ServerChange, ServerLine, Written,
};

/// `mcpscope wrap`.
pub fn wrap(args: &WrapArgs) -> ExitCode {
    let outcome = target(args).and_then(|(host, path)| {
        let shim = std::env::current_exe()
            .map_err(|e| ConfigError::Io(format!("cannot find mcpscope's own path: {e}")))?;
        let done = wrap::wrap(host, &path, &shim)?;
        let mut lines = Vec::new();
        lines.push(match (&done.backup, done.changed) {
            (Some(backup), true) => {
                format!("wrapped {} (backup: {})", path.display(), backup.display())
            }
            _ => format!("{}: nothing to change", path.display()),
        });
        lines.extend(in_place(done.written));
        lines.extend(done.servers.iter().map(|s| server_line(host, s)));
        if done.changed {
            lines.push(format!(
                "restart {} to start the servers through mcpscope; `mcpscope unwrap --host {}` \
                 puts the file back",
                host.name(),
                host.name()
            ));
        }
        Ok(lines)
    });
    finish(outcome)
}

/// `mcpscope unwrap`.
pub fn unwrap(args: &WrapArgs) -> ExitCode {
    let outcome = target(args).and_then(|(host, path)| {
        let done = wrap::unwrap(host, &path)?;
        let mut lines = vec![match done.restored {
            Restored::Exactly => format!(
                "unwrapped {}: it is the backup again, byte for byte (backup removed)",
                path.display()
            ),
            Restored::WrappersRemoved => format!(
                "unwrapped {}: it changed since wrap, so only the wrappers were taken out and \
                 the other changes kept; the backup {} (the file before wrap) is kept",
                path.display(),
                done.backup.display()
            ),
        }];
        lines.extend(in_place(done.written));
        lines.extend(done.servers.iter().map(|s| server_line(host, s)));
        Ok(lines)
    });
    finish(outcome)
}

/// The line that says a file was written in place (its hard links kept).
fn in_place(written: Option<Written>) -> Option<String> {
    match written? {
        Written::InPlace(links) => Some(format!(
            "  (written in place: the file has {links} hard links, which a rename would split)"
        )),
        Written::Replaced => None,
    }
}

fn target(args: &WrapArgs) -> Result<(ConfigHost, PathBuf), ConfigError> {
    let host = ConfigHost::parse(&args.host).map_err(ConfigError::Refused)?;
    let path = match &args.config {
        Some(path) => path.clone(),
        None => host.default_config()?,
    };
    Ok((host, path))
}

fn server_line(host: ConfigHost, server: &ServerLine) -> String {
    let at = if server.table == "mcpServers" || server.table == "servers" {
        String::new()
    } else {
        format!(" ({})", server.table)
    };
    let name = &printable(&server.name);
    let at = printable(&at);
    let printable_line = |line: &[String]| printable(&line.join(" "));
    match &server.change {
        ServerChange::Wrapped(line) => format!("  wrapped    {name}{at}: {}", printable_line(line)),
        ServerChange::AlreadyWrapped => format!("  unchanged  {name}{at}: already wrapped"),
        ServerChange::Http(url) => format!(
            "  unchanged  {name}{at}: HTTP server {}; to observe it, start the host through \
             the forward proxy: mcpscope run -- {}",
            printable(url),
            host.start_command()
        ),
        ServerChange::Other(why) => format!(
            "  unchanged  {name}{at}: {}, not a stdio server",
            printable(why)
        ),
        ServerChange::Unwrapped(line) => {
            format!("  unwrapped  {name}{at}: {}", printable_line(line))
        }
        ServerChange::NotWrapped => format!("  unchanged  {name}{at}: not wrapped"),
    }
}

/// Text from a host's file as it may be printed to a terminal: control characters (ESC, a
/// newline) escaped, the rest as it is.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn finish(outcome: Result<Vec<String>, ConfigError>) -> ExitCode {
    match outcome {
        Ok(lines) => {
            let mut out = std::io::stdout().lock();
            for line in lines {
                if writeln!(out, "{line}").is_err() {
                    crate::end_of_pipe();
                }
            }
            ExitCode::SUCCESS
        }
        Err(e @ ConfigError::Refused(_)) => {
            crate::say!("mcpscope: {e}");
            ExitCode::from(2)
        }
        Err(e @ ConfigError::Io(_)) => {
            crate::say!("mcpscope: {e}");
            ExitCode::FAILURE
        }
    }
}
