//! The layout pass, run before each frame is drawn: where each pane goes, which rows are on
//! screen, and the state that keeps the selections in view. Drawing then only reads the app.

use chrono::{DateTime, Utc};
use ratatui::layout::Rect;

use super::app::App;
use super::geometry::{areas, message_lines};
use super::view;
use mcpscope_engine::model::Model;

impl App {
    /// Brings the view up to date for a frame of `area` at `now`: syncs with the model, lays the
    /// panes out (for drawing and for clicks), and lets each pane on screen settle its own state
    /// (the calls table's page, the detail's lines and scroll). The tree settles as it draws.
    pub fn layout(&mut self, model: &Model, now: DateTime<Utc>, area: Rect) {
        self.sync(model);
        if self.tree.step_past_edge() {
            self.selection_from_tree(model);
        }
        let message = message_lines(self.flash.as_deref(), area.width);
        self.areas = areas(self.zoom, self.focus, message, area);
        if self.areas.calls != Rect::ZERO {
            self.calls.settle(self.areas.calls);
        }
        let selected = match self.selected {
            crate::app::Selected::Call(c) => Some(c),
            _ => None,
        };
        self.schema
            .settle(model, self.calls.visible().iter().copied().chain(selected));
        if self.areas.detail != Rect::ZERO {
            view::detail::settle(self, model, now);
        }
    }
}
