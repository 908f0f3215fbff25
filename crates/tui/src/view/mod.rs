//! Rendering: a pure `render(frame, &app, model, now)`, one file per panel.

pub(crate) mod calls;
pub(crate) mod detail;
pub(crate) mod fmt;
pub(crate) mod help;
pub(crate) mod json;
pub(crate) mod menu;
pub mod notifications;
pub mod stats;
pub(crate) mod status;
pub(crate) mod tree;
pub(crate) mod waterfall;

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::app::App;
use super::geometry::{areas, message_lines};
use mcpscope_engine::model::Model;

/// Draws the whole screen where [`App::layout`] put each pane (run it for the same size first);
/// reads `app` and changes nothing but the tree widget's scroll (see [`tree::TreePane`]). `now`
/// is the time elapsed timers count to (the cursor in a replay).
pub fn render(frame: &mut Frame, app: &App, model: &Model, now: DateTime<Utc>) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let panes = if app.areas.screen == area {
        app.areas
    } else {
        areas(
            app.zoom,
            app.focus,
            message_lines(app.flash.as_deref(), area.width),
            area,
        )
    };
    base_style(frame.buffer_mut(), area, app.theme.text());
    if panes.calls != Rect::ZERO {
        calls::render(frame, app, model, now, panes.calls);
    }
    if panes.tree != Rect::ZERO {
        tree::render(frame, app, model, panes.tree);
    }
    if panes.detail != Rect::ZERO {
        detail::render(frame, app, model, now, panes.detail);
    }
    if panes.waterfall != Rect::ZERO {
        waterfall::render(frame, app, model, now, panes.waterfall);
    }
    status::render(frame, app, model, now, panes.status);
    menu::render(frame, app, area);
    menu::render_held(frame, app, area);
    if app.stats {
        stats::render(frame, app, model, area);
    }
    if app.help {
        help::render(frame, app, area);
    }
}

/// A `width` × `height` rectangle centred in `area` (clipped to it).
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

/// Gives every cell of `area` the screen's plain-text style, a row of cells at a time. The
/// panes drawn over it take their plain text's look from it and set no style of their own over
/// their whole area: a widget's style is laid cell by cell through the buffer's index, several
/// times dearer, and each pane's was the same style again.
fn base_style(buf: &mut Buffer, area: Rect, style: Style) {
    let area = buf.area.intersection(area);
    let width = usize::from(buf.area.width);
    let (left, right) = (
        usize::from(area.x - buf.area.x),
        usize::from(area.right() - buf.area.x),
    );
    for y in area.top()..area.bottom() {
        let row = usize::from(y - buf.area.y) * width;
        if let Some(cells) = buf.content.get_mut(row + left..row + right) {
            for cell in cells {
                cell.set_style(style);
            }
        }
    }
}
