//! The layout pass, run before each frame is drawn: where each pane goes, which rows are on
//! screen, and the state that keeps the selections in view. Drawing then only reads the app.

use chrono::{DateTime, Utc};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::Block;

use super::app::{App, Areas, Pane};
use super::view;
use mcpscope_engine::model::Model;

/// Below this width only the focused pane is shown (Tab switches).
const COMPACT_WIDTH: u16 = 80;
/// Below this height only the focused pane is shown.
const COMPACT_HEIGHT: u16 = 22;

/// The most lines a status message may take above the status bar.
const MESSAGE_LINES: u16 = 4;

/// How many lines a status message of `text` takes when wrapped at `width` (none without one).
pub fn message_lines(text: Option<&str>, width: u16) -> u16 {
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
pub fn areas(zoom: bool, focus: Pane, message: u16, area: Rect) -> Areas {
    let mut out = Areas::default();
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

impl App {
    /// Brings the view up to date for a frame of `area` at `now`: syncs with the model, lays the
    /// panes out (for drawing and for clicks), and keeps what is selected in view (the calls
    /// table's first row and page, the detail's scroll, the tree's scroll and rows).
    pub fn layout(&mut self, model: &Model, now: DateTime<Utc>, area: Rect) {
        self.sync(model);
        let message = message_lines(self.flash.as_deref(), area.width);
        self.areas = areas(self.zoom, self.focus, message, area);
        if self.areas.calls != Rect::ZERO {
            let inner = Block::bordered().inner(self.areas.calls);
            if inner.width > 0 && inner.height > 0 {
                self.scroll_calls(usize::from(inner.height.saturating_sub(1)).max(1));
            }
        }
        let first = self.row_offset.min(self.rows.len());
        let visible = self.rows[first..(first + self.page).min(self.rows.len())].to_vec();
        let selected = match self.selected {
            crate::app::Selected::Call(c) => Some(c),
            _ => None,
        };
        self.schema
            .settle(model, visible.into_iter().chain(selected));
        if self.areas.detail != Rect::ZERO {
            let (_, lines) = view::detail::content(self, model, now);
            let max = lines.len().saturating_sub(1).min(usize::from(u16::MAX)) as u16;
            self.detail_scroll = self.detail_scroll.min(max);
        }
        if self.areas.tree != Rect::ZERO {
            view::tree::settle(self, model, self.areas.tree);
        }
    }

    /// Keeps the selected row within a page of `page` rows of the calls table.
    fn scroll_calls(&mut self, page: usize) {
        self.page = page;
        if self.row < self.row_offset {
            self.row_offset = self.row;
        } else if self.row >= self.row_offset + page {
            self.row_offset = self.row + 1 - page;
        }
        self.row_offset = self.row_offset.min(self.rows.len().saturating_sub(page));
    }
}
