//! The calls table's own state: its rows, the cursor and the page on screen.

use ratatui::layout::Rect;
use ratatui::widgets::Block;

use mcpscope_engine::model::Counts;

/// What the calls table's rows are built from: when any of it changes, they are built again
/// (events applied, calls, counts, filter text, answered hidden).
pub(crate) type RowsKey = (u64, usize, Counts, String, bool);

/// The calls table's own state: its rows in display order, the cursor, and the page on screen.
#[derive(Debug, Clone, PartialEq)]
pub struct CallsPane {
    /// The rows (call indices), in display order.
    pub rows: Vec<usize>,
    /// What `rows` were built from.
    pub(crate) key: Option<RowsKey>,
    /// The selected row.
    pub row: usize,
    /// The first row on screen.
    pub offset: usize,
    /// The selected call (stays selected when rows move).
    pub call: Option<usize>,
    /// Whether the user has moved the cursor: until then it stays on the first listed row
    /// (the most urgent call) as rows come and go.
    pub cursor_chosen: bool,
    /// Rows that fit on screen (as of the last layout pass).
    pub page: usize,
}

impl Default for CallsPane {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            key: None,
            row: 0,
            offset: 0,
            call: None,
            cursor_chosen: false,
            page: 10,
        }
    }
}

impl CallsPane {
    /// The layout pass for the pane drawn in `area`: the page that fits inside its border and
    /// header, scrolled so that the selected row is on it.
    pub(crate) fn settle(&mut self, area: Rect) {
        let inner = Block::bordered().inner(area);
        if inner.width == 0 || inner.height == 0 {
            return;
        }
        let page = usize::from(inner.height.saturating_sub(1)).max(1);
        self.page = page;
        if self.row < self.offset {
            self.offset = self.row;
        } else if self.row >= self.offset + page {
            self.offset = self.row + 1 - page;
        }
        self.offset = self.offset.min(self.rows.len().saturating_sub(page));
    }

    /// The rows on screen (as of the last layout pass).
    pub fn visible(&self) -> &[usize] {
        let first = self.offset.min(self.rows.len());
        &self.rows[first..(first + self.page).min(self.rows.len())]
    }
}
