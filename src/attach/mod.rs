//! `mcpscope attach`: lists the live sessions of this user and opens one — the TUI, or the
//! headless lines — fed from its socket (see docs/attach.md).

use std::sync::Arc;

use anyhow::bail;

use crate::cli::AttachArgs;
use mcpscope_engine::UsageError;
use mcpscope_session::attach::{
    self as feed,
    sessions::{self, LiveSession},
};
use mcpscope_session::publish::place;
use mcpscope_tui::headless::{self, View};

/// Chooses the session to open: the one named, or the only one.
fn choose(sessions: Vec<LiveSession>, wanted: Option<&str>) -> anyhow::Result<LiveSession> {
    let dir = place::runtime_dir();
    if let Some(wanted) = wanted {
        let listing = sessions::table(&sessions);
        return match sessions.into_iter().find(|s| s.is_named(wanted)) {
            Some(found) => Ok(found),
            None => bail!(UsageError(format!(
                "no live session is {wanted:?} (in {}){}",
                dir.display(),
                if listing.lines().count() > 1 {
                    format!("; live sessions:\n{}", listing.trim_end())
                } else {
                    String::new()
                }
            ))),
        };
    }
    if sessions.len() > 1 {
        bail!(UsageError(format!(
            "{} live sessions; name one: mcpscope attach PID\n{}",
            sessions.len(),
            sessions::table(&sessions).trim_end()
        )));
    }
    match sessions.into_iter().next() {
        Some(only) => Ok(only),
        None => bail!(
            "no live sessions in {} (start one: mcpscope --listen … --upstream …)",
            dir.display()
        ),
    }
}

/// `mcpscope attach`.
pub async fn run(args: &AttachArgs) -> anyhow::Result<()> {
    let sessions = sessions::list(&place::runtime_dir()).await?;
    if args.list {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        write!(out, "{}", sessions::table(&sessions))?;
        out.flush()?;
        return Ok(());
    }
    let chosen = choose(sessions, args.session.as_deref())?;
    let attached = feed::open(&chosen.path).await?;
    let hello = attached.hello.clone();
    let unrecorded = hello.session.recording.is_none() && hello.live_from > 0;
    if let View::Headless(style) = View::chosen(args.headless, args.json) {
        if unrecorded {
            crate::say!(
                "mcpscope: session {} is not recorded: events from now on only ({} before are not shown)",
                hello.pid,
                hello.live_from
            );
        }
        headless::run(attached.events, style, Some(attached.taken.clone())).await;
        let status = attached
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        if let Some(missing) = status.past_missing {
            crate::say!("mcpscope: the session's past is incomplete: {missing}");
        }
        crate::say!(
            "mcpscope: session {}: {}",
            hello.pid,
            status.ended.as_deref().unwrap_or("ended")
        );
        return Ok(());
    }
    let joined = chrono::Local::now().format("%H:%M:%S").to_string();
    let status = attached.status.clone();
    let pid = hello.pid;
    let line = move || {
        let s = status.lock().map(|s| s.clone()).unwrap_or_default();
        // Faults and intercept need the proxy itself: their keys say so when pressed.
        let mut text = format!("attached to {pid}, read-only");
        if unrecorded {
            text.push_str(&format!(" · not recorded: shown from {joined}"));
        }
        if let Some(missing) = &s.past_missing {
            text.push_str(&format!(" · past incomplete: {missing}"));
        }
        if let Some(ended) = &s.ended {
            text = format!("attached to {pid}: {ended}");
        }
        Some(text)
    };
    let mut info = mcpscope_tui::Info::live(&hello.session, Some(attached.taken.clone()));
    info.theme = args.theme.clone();
    info.ca_cert = crate::forward::known_ca_cert();
    // The status bar's extra item: how this view stands toward the session.
    info.telemetry = Some(mcpscope_tui::StatusText(Arc::new(line)));
    mcpscope_tui::run_live(attached.events, info, None).await
}
