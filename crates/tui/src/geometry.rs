//! Where each pane goes on a screen: pure geometry from the screen's size, the zoom, the focus
//! and the status message, shared by the layout pass and the drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::Block;

use super::app::{Areas, Pane};

/// Below this width only the focused pane is shown (Tab switches).
const COMPACT_WIDTH: u16 = 80;
/// Below this height only the focused pane is shown.
const COMPACT_HEIGHT: u16 = 22;

/// The most lines a status message may take above the status bar.
const MESSAGE_LINES: u16 = 4;

/// How many lines a status message of `text` takes when wrapped at `width` (none without one).
pub(crate) fn message_lines(text: Option<&str>, width: u16) -> u16 {
    let Some(text) = text else {
        return 0;
    };
    let width = usize::from(width.max(1));
    let chars = text.chars().count().max(1);
    u16::try_from(chars.div_ceil(width))
        .unwrap_or(MESSAGE_LINES)
        .min(MESSAGE_LINES)
}

/// Where the panes of a view go on a screen of `area`: the detail alone when `zoom`, only the
/// `focus`ed pane on a small screen, else all four; the status bar is the last line, with
/// `message` lines for a status message above it.
pub(crate) fn areas(zoom: bool, focus: Pane, message: u16, area: Rect) -> Areas {
    let mut out = Areas {
        screen: area,
        ..Areas::default()
    };
    if area.width == 0 || area.height == 0 {
        return out;
    }
    let bar_lines = (1 + message).min(area.height / 3).max(1);
    let [main, bar] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(bar_lines)]).areas(area);
    out.status = bar;
    if main.height > 0 {
        if zoom {
            out.detail = main;
        } else if main.width < COMPACT_WIDTH || main.height < COMPACT_HEIGHT {
            match focus {
                Pane::Calls => out.calls = main,
                Pane::Tree => out.tree = main,
                Pane::Detail => out.detail = main,
                Pane::Waterfall => out.waterfall = main,
            }
        } else {
            let [top, middle, bottom] = Layout::vertical([
                Constraint::Percentage(42),
                Constraint::Percentage(36),
                Constraint::Min(4),
            ])
            .areas(main);
            let [left, right] =
                Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)])
                    .areas(middle);
            out.calls = top;
            out.tree = left;
            out.detail = right;
            out.waterfall = bottom;
        }
    }
    if out.calls != Rect::ZERO {
        let inner = Block::bordered().inner(out.calls);
        if inner.width > 0 && inner.height > 0 {
            out.calls_rows = Rect {
                y: inner.y + 1,
                height: inner.height - 1,
                ..inner
            };
        }
    }
    if out.waterfall != Rect::ZERO {
        out.waterfall_rows = Block::bordered().inner(out.waterfall);
    }
    out
}
