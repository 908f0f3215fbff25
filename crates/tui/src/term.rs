//! The terminal: [`ratatui::try_init`] (raw mode, alternate screen, a panic hook that restores)
//! plus mouse capture; restored on quit, on error (by drop) and on panic. A frame goes out in one
//! write: the terminal (or tmux) is woken once per frame, not once per kilobyte of it.

use std::io::{self, BufWriter, Stdout, Write};
use std::sync::Once;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::clipboard::CopyToClipboard;
use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;

/// What a frame is written into before it goes out whole (a full 200×50 frame with colours is
/// some tens of kilobytes; a larger one goes out in pieces of this size).
const FRAME_BUFFER: usize = 256 << 10;

/// The live terminal; restores the screen when dropped.
pub(crate) struct Term {
    /// The ratatui terminal, over a buffer flushed once per frame.
    pub terminal: Terminal<CrosstermBackend<BufWriter<Stdout>>>,
}

static MOUSE_HOOK: Once = Once::new();

impl Term {
    /// Enters raw mode, the alternate screen and mouse capture; a panic restores all three.
    pub(crate) fn enter() -> io::Result<Self> {
        // ratatui's set-up (raw mode, alternate screen, its panic hook); its terminal writes
        // through the standard output's own 1 KiB buffer, so ours takes its place.
        if let Err(e) = ratatui::try_init() {
            restore();
            return Err(e);
        }
        let backend = CrosstermBackend::new(BufWriter::with_capacity(FRAME_BUFFER, io::stdout()));
        let terminal = match Terminal::new(backend) {
            Ok(terminal) => terminal,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        // Wraps ratatui's hook (which leaves raw mode and the alternate screen) so that a panic
        // also gives the mouse back.
        MOUSE_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let _ = execute!(io::stdout(), DisableMouseCapture, Show);
                previous(info);
            }));
        });
        let term = Self { terminal };
        execute!(io::stdout(), EnableMouseCapture)?;
        Ok(term)
    }

    /// Writes `text` to the system clipboard with OSC 52.
    pub(crate) fn copy(&mut self, text: &str) -> io::Result<()> {
        let out = self.terminal.backend_mut();
        execute!(out, CopyToClipboard::to_clipboard_from(text))?;
        out.flush()
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the mouse back, leaves raw mode and the alternate screen, shows the cursor. Safe to
/// call twice.
pub(crate) fn restore() {
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    let _ = execute!(io::stdout(), Show);
}
