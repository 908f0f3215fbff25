//! The `x` fault menu for the selected call's owning stream.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::app::App;

/// Draws the fault menu, if open, centred in `area`.
pub(crate) fn render(frame: &mut Frame, app: &App, area: Rect) {
    let Some(menu) = &app.fault_menu else {
        return;
    };
    let theme = &app.theme;
    // The spec column fits the longest spec and a gap; the menu fits the longest line.
    let spec_width = menu
        .choices
        .iter()
        .map(|c| c.spec.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let text_width = menu
        .choices
        .iter()
        .map(|c| 1 + spec_width + c.description.chars().count())
        .max()
        .unwrap_or(0)
        .max(" Enter applies · Esc closes".chars().count());
    let width = u16::try_from(text_width + 3)
        .unwrap_or(u16::MAX)
        .min(area.width);
    let height = (menu.choices.len() as u16 + 3).min(area.height);
    let rect = super::centered(area, width, height);
    let lines: Vec<Line> = menu
        .choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let style = if i == menu.selected {
                theme.selection()
            } else {
                theme.help()
            };
            Line::from(vec![
                Span::styled(
                    format!(" {:<spec_width$}", c.spec),
                    style.patch(theme.injected()),
                ),
                Span::styled(c.description.clone(), style),
            ])
        })
        .collect();
    let mut all = lines;
    all.push(Line::from(Span::styled(
        " Enter applies · Esc closes",
        theme.dim(),
    )));
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(
            format!(" Inject a fault on #{} ", menu.stream),
            theme.title(),
        ))
        .border_style(theme.border_focused())
        .style(theme.help());
    frame.render_widget(Paragraph::new(all).block(block), rect);
}

/// Draws the list of held requests (`I`), if open, centred in `area`: each one's summary and
/// body, the highlighted one marked, and the keys.
pub(crate) fn render_held(frame: &mut Frame, app: &App, area: Rect) {
    let Some(selected) = app.held_menu else {
        return;
    };
    let theme = &app.theme;
    let mut lines: Vec<Line> = Vec::new();
    if app.intercepted.is_empty() {
        lines.push(Line::from(Span::styled(" nothing held", theme.dim())));
    }
    for (i, held) in app.intercepted.iter().enumerate() {
        let style = if i == selected {
            theme.selection()
        } else {
            theme.help()
        };
        lines.push(Line::from(vec![
            Span::styled(format!(" {:>3} ", held.id), style.patch(theme.injected())),
            Span::styled(format!("#{} {}  ", held.stream, held.summary), style),
            Span::styled(held.body.clone(), theme.dim()),
        ]));
    }
    lines.push(Line::from(Span::styled(
        " a forward · e edit in $EDITOR · d drop · E error · Esc closes",
        theme.dim(),
    )));
    let width = area.width.saturating_sub(4).min(120);
    let height = (lines.len() as u16 + 2).min(area.height);
    let rect = super::centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(
            format!(
                " Held by the intercept ({}) ",
                app.intercept.as_deref().unwrap_or("off")
            ),
            theme.title(),
        ))
        .border_style(theme.border_focused())
        .style(theme.help());
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}
