//! Rendering: a pure `render(frame, app, model, now)`, one file per panel.

pub mod calls;
pub mod detail;
pub mod fmt;
pub mod help;
pub mod json;
pub mod menu;
pub mod status;
pub mod tree;
pub mod waterfall;

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::Block;

use super::app::{App, Areas, Pane};
use mcpscope_engine::model::Model;

/// Below this size only the focused pane is shown (Tab switches).
const COMPACT_WIDTH: u16 = 80;
/// Below this height only the focused pane is shown.
const COMPACT_HEIGHT: u16 = 22;

/// Draws the whole screen. `now` is the time elapsed timers count to (the cursor in a replay).
pub fn render(frame: &mut Frame, app: &mut App, model: &Model, now: DateTime<Utc>) {
    app.sync(model);
    let area = frame.area();
    app.areas = Areas::default();
    if area.width == 0 || area.height == 0 {
        return;
    }
    frame.render_widget(Block::default().style(app.theme.text()), area);
    let [main, bar] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    if main.height > 0 {
        if app.zoom {
            detail::render(frame, app, model, now, main);
        } else if main.width < COMPACT_WIDTH || main.height < COMPACT_HEIGHT {
            pane(frame, app, model, now, app.focus, main);
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
            calls::render(frame, app, model, now, top);
            tree::render(frame, app, model, left);
            detail::render(frame, app, model, now, right);
            waterfall::render(frame, app, model, now, bottom);
        }
    }
    status::render(frame, app, model, now, bar);
    menu::render(frame, app, area);
    if app.help {
        help::render(frame, app, area);
    }
}

fn pane(
    frame: &mut Frame,
    app: &mut App,
    model: &Model,
    now: DateTime<Utc>,
    which: Pane,
    area: Rect,
) {
    match which {
        Pane::Calls => calls::render(frame, app, model, now, area),
        Pane::Tree => tree::render(frame, app, model, area),
        Pane::Detail => detail::render(frame, app, model, now, area),
        Pane::Waterfall => waterfall::render(frame, app, model, now, area),
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
