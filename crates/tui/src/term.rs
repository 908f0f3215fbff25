//! The terminal: raw mode, alternate screen and mouse on entry; restored on quit, on error (by
//! drop) and on panic (by a hook).

use std::io::{self, Stdout, Write};
use std::sync::Once;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The live terminal; restores the screen when dropped.
pub struct Term {
    /// The ratatui terminal.
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

static HOOK: Once = Once::new();

impl Term {
    /// Enters raw mode and the alternate screen, and installs the panic hook.
    pub fn enter() -> io::Result<Self> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        let mut stdout = io::stdout();
        if let Err(e) = execute!(stdout, EnterAlternateScreen, EnableMouseCapture) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(stdout)) {
            Ok(terminal) => Ok(Self { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    /// Writes `text` to the clipboard with OSC 52.
    pub fn copy(&mut self, text: &str) -> io::Result<()> {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        let out = self.terminal.backend_mut();
        write!(out, "\x1b]52;c;{encoded}\x07")?;
        out.flush()
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves raw mode and the alternate screen, shows the cursor. Safe to call twice.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}
