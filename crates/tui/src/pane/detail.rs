//! The detail pane's own state: its scroll and the lines built for the selection.

use ratatui::text::Line;

/// The detail pane's own state: its scroll, and what the layout pass built for the selection.
#[derive(Debug, Default)]
pub struct DetailPane {
    /// Lines scrolled past.
    pub scroll: u16,
    /// The title and lines the last layout pass built.
    shown: Option<(&'static str, Vec<Line<'static>>)>,
}

impl DetailPane {
    /// The lines the last layout pass built (none before one ran with the pane on screen).
    pub fn lines(&self) -> &[Line<'static>] {
        self.shown
            .as_ref()
            .map_or(&[], |(_, lines)| lines.as_slice())
    }

    /// The title and lines the last layout pass built, if it built them.
    pub(crate) fn shown(&self) -> Option<(&'static str, &[Line<'static>])> {
        self.shown
            .as_ref()
            .map(|(title, lines)| (*title, lines.as_slice()))
    }

    /// Shows `lines` under `title` (the layout pass, once per frame), with the scroll kept
    /// within them.
    pub(crate) fn show(&mut self, title: &'static str, lines: Vec<Line<'static>>) {
        let max = lines.len().saturating_sub(1).min(usize::from(u16::MAX)) as u16;
        self.scroll = self.scroll.min(max);
        self.shown = Some((title, lines));
    }
}
