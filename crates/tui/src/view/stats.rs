//! The `S` stats overlay: per tool and per method, operations, errors, latency p50/p95/p99
//! (the engine's `model::stats`, over what the model holds: everything so far live, up to the
//! cursor in a replay), and per tool the bytes of its definition (what it costs a host's
//! context).

use std::collections::BTreeMap;

use mcpscope_engine::model::Model;
use mcpscope_engine::model::stats::{self, Key};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::app::App;

/// Bytes of each tool's definition from `tools/list` (the latest session's that has it).
pub fn definition_bytes(model: &Model) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for session in &model.sessions {
        for (name, info) in &session.tools {
            if let Some(definition) = &info.definition {
                out.insert(name.clone(), definition.len());
            }
        }
    }
    out
}

/// Milliseconds with one decimal, `–` when there is no figure.
pub fn ms(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.1}"))
}

/// The overlay's text lines: a header, a row per tool, a row per method, the total bytes.
pub fn lines(model: &Model) -> Vec<String> {
    let bytes = definition_bytes(model);
    let by_key = stats::by_key(model, None);
    let mut out = vec![format!(
        "{:<28} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7}",
        "tool / method", "calls", "err %", "p50 ms", "p95 ms", "p99 ms", "def B"
    )];
    let mut tools: Vec<String> = by_key
        .keys()
        .filter_map(|k| match k {
            Key::Tool(name) => Some(name.clone()),
            Key::Method(_) => None,
        })
        .collect();
    for name in bytes.keys() {
        if !tools.contains(name) {
            tools.push(name.clone());
        }
    }
    tools.sort();
    for tool in &tools {
        let def = bytes.get(tool).map_or("–".to_string(), usize::to_string);
        let line = match by_key.get(&Key::Tool(tool.clone())) {
            Some(s) => format!(
                "{:<28} {:>6} {:>6.1} {:>9} {:>9} {:>9} {:>7}",
                format!("tool {tool}"),
                s.count,
                s.error_rate() * 100.0,
                ms(s.p50),
                ms(s.p95),
                ms(s.p99),
                def
            ),
            None => format!(
                "{:<28} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7}",
                format!("tool {tool}"),
                0,
                "–",
                "–",
                "–",
                "–",
                def
            ),
        };
        out.push(line);
    }
    for (key, s) in &by_key {
        if let Key::Method(name) = key {
            out.push(format!(
                "{:<28} {:>6} {:>6.1} {:>9} {:>9} {:>9} {:>7}",
                format!("method {name}"),
                s.count,
                s.error_rate() * 100.0,
                ms(s.p50),
                ms(s.p95),
                ms(s.p99),
                ""
            ));
        }
    }
    if by_key.is_empty() && bytes.is_empty() {
        out.push("no calls yet".to_string());
    }
    out.push(format!(
        "tool definitions: {} B in all (what a host puts into the model's context)",
        bytes.values().sum::<usize>()
    ));
    let dropped = model.evicted().dropped;
    if dropped > 0 {
        out.push(format!(
            "not counted: {dropped} older calls no longer held in memory (the recording has them)"
        ));
    }
    out
}

/// Draws the overlay centred in `area`.
pub fn render(frame: &mut Frame, app: &App, model: &Model, area: Rect) {
    let theme = &app.theme;
    let text = lines(model);
    let width =
        (text.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u16 + 4).min(area.width);
    let height = (text.len() as u16 + 3).min(area.height);
    let rect = super::centered(area, width, height);
    let mut shown: Vec<Line> = Vec::new();
    for (i, line) in text.into_iter().enumerate() {
        let style = if i == 0 { theme.header() } else { theme.text() };
        shown.push(Line::from(Span::styled(format!(" {line}"), style)));
    }
    let title = if app.replay.is_some() {
        " stats up to the cursor (S closes) "
    } else {
        " stats (S closes) "
    };
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(Span::styled(title, theme.title()))
        .border_style(theme.border_focused())
        .style(theme.text());
    frame.render_widget(Paragraph::new(shown).block(block), rect);
}
