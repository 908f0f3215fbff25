//! Pretty, syntax-coloured JSON as ratatui lines.

use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::theme::Theme;

/// Lines kept per value (big bodies are cut).
const MAX_LINES: usize = 2_000;

/// Pretty-prints `value` with `indent` leading spaces, coloured by the theme.
pub fn lines(value: &Value, theme: &Theme, indent: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut current = vec![Span::raw(" ".repeat(indent))];
    write(value, theme, indent, &mut current, &mut out);
    out.push(Line::from(current));
    if out.len() > MAX_LINES {
        out.truncate(MAX_LINES);
        out.push(Line::from(Span::styled("  … (cut)", theme.dim())));
    }
    out
}

fn write(
    value: &Value,
    theme: &Theme,
    indent: usize,
    cur: &mut Vec<Span<'static>>,
    out: &mut Vec<Line<'static>>,
) {
    if out.len() > MAX_LINES {
        return;
    }
    let punct = theme.json_punct();
    match value {
        Value::Null | Value::Bool(_) => {
            cur.push(Span::styled(value.to_string(), theme.json_literal()))
        }
        Value::Number(n) => cur.push(Span::styled(n.to_string(), theme.json_number())),
        Value::String(_) => cur.push(Span::styled(value.to_string(), theme.json_string())),
        Value::Array(items) if items.is_empty() => cur.push(Span::styled("[]", punct)),
        Value::Object(map) if map.is_empty() => cur.push(Span::styled("{}", punct)),
        Value::Array(items) => {
            cur.push(Span::styled("[", punct));
            for (i, item) in items.iter().enumerate() {
                out.push(Line::from(std::mem::take(cur)));
                cur.push(Span::raw(" ".repeat(indent + 2)));
                write(item, theme, indent + 2, cur, out);
                if i + 1 < items.len() {
                    cur.push(Span::styled(",", punct));
                }
            }
            out.push(Line::from(std::mem::take(cur)));
            cur.push(Span::raw(" ".repeat(indent)));
            cur.push(Span::styled("]", punct));
        }
        Value::Object(map) => {
            cur.push(Span::styled("{", punct));
            let n = map.len();
            for (i, (k, v)) in map.iter().enumerate() {
                out.push(Line::from(std::mem::take(cur)));
                cur.push(Span::raw(" ".repeat(indent + 2)));
                cur.push(Span::styled(
                    Value::String(k.clone()).to_string(),
                    theme.json_key(),
                ));
                cur.push(Span::styled(": ", punct));
                write(v, theme, indent + 2, cur, out);
                if i + 1 < n {
                    cur.push(Span::styled(",", punct));
                }
            }
            out.push(Line::from(std::mem::take(cur)));
            cur.push(Span::raw(" ".repeat(indent)));
            cur.push(Span::styled("}", punct));
        }
    }
}
