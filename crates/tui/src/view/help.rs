//! The `?` help overlay listing every key, from the key bindings table.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::app::App;
use crate::keys::help_lines;

/// Draws the help overlay centred in `area`.
pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let width = 72.min(area.width);
    let mut lines: Vec<Line> = help_lines()
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!(" {keys:<16}"), theme.header()),
                Span::styled(what, theme.help()),
            ])
        })
        .collect();
    let height = (lines.len() as u16 + 4).min(area.height);
    let rect = super::centered(area, width, height);
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        " any key closes this help",
        theme.dim(),
    )));
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(" mcpscope keys ", theme.title()))
        .border_style(theme.border_focused())
        .style(theme.help());
    frame.render_widget(Paragraph::new(lines).block(block).style(theme.help()), rect);
}
