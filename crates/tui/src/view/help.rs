//! The `?` help overlay listing every key the view offers, from the key bindings table.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::app::App;
use crate::keys::help_lines;

/// Draws the help overlay centred in `area`.
pub(crate) fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let mut lines: Vec<Line> = help_lines(&app.offered_contexts())
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!(" {keys:<16}"), theme.header()),
                Span::styled(what, theme.help()),
            ])
        })
        .collect();
    // Wide enough for the longest line (borders and a space after), at least 72 columns.
    let longest = lines.iter().map(Line::width).max().unwrap_or(0);
    let width = u16::try_from(longest + 3)
        .unwrap_or(u16::MAX)
        .max(72)
        .min(area.width);
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
