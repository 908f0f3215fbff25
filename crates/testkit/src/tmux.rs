//! The real binary in a real terminal: a tmux session driven with keys as a person would, its
//! screen read back as text. Killed when dropped.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A detached tmux session running a plain `bash` (prompt `$ `, `TERM=xterm-256color`).
pub struct Tmux {
    /// The session's name (unique to this process and session).
    pub name: String,
}

/// A screen that satisfied what was waited for, and when it was read.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When the screen was read.
    pub at: Instant,
    /// The screen's text.
    pub screen: String,
}

impl Tmux {
    /// Starts a session `width` × `height` cells.
    pub fn start(width: u16, height: u16) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("mcpscope-test-{}-{n}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .args(["bash", "--norc", "--noprofile"])
            .env("PS1", "$ ")
            .env("TERM", "xterm-256color")
            .status()
            .expect("tmux must be installed (apt-get install tmux)");
        assert!(status.success(), "tmux new-session failed");
        Self { name }
    }

    /// Sends keys (tmux's names: `Enter`, `Escape`, `C-c`, or text).
    pub fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(status.success());
    }

    /// The screen as text.
    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// tmux's view of the pane's terminal modes: alternate screen, cursor shown, mouse reporting.
    pub fn modes(&self) -> String {
        let out = Command::new("tmux")
            .args([
                "display-message",
                "-p",
                "-t",
                &self.name,
                "alt=#{alternate_on} cursor=#{cursor_flag} mouse=#{mouse_any_flag}#{mouse_button_flag}#{mouse_standard_flag}#{mouse_sgr_flag}",
            ])
            .output()
            .expect("display-message");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the screen satisfies `want`, reading it every 20 ms; panics with the last
    /// screen after `timeout`.
    pub fn wait_for(&self, what: &str, timeout: Duration, want: impl Fn(&str) -> bool) -> Seen {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if want(&screen) {
                return Seen {
                    at: Instant::now(),
                    screen,
                };
            }
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}
