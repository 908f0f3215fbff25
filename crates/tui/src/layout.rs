//! The layout pass, run before each frame is drawn: where each pane goes, which rows are on
//! screen, and the state that keeps the selections in view. Drawing then only reads the app.

use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::widgets::Block;

use super::app::App;
use super::geometry::{areas, message_lines};
use super::view;
use mcpscope_engine::model::Model;

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
