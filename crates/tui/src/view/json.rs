//! Pretty, syntax-coloured JSON as ratatui lines.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::theme::Theme;

/// Lines kept per value (big bodies are cut).
const MAX_LINES: usize = 2_000;

/// Pretty-prints `value` with `indent` leading spaces, coloured by the theme.
pub(crate) fn lines(value: &Value, theme: &Theme, indent: usize) -> Vec<Line<'static>> {
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

/// Marks every case-insensitive occurrence of the `terms` (lower case) in `lines` with `mark`,
/// splitting spans where a match starts and ends.
pub(crate) fn highlight(
    lines: Vec<Line<'static>>,
    terms: &[&str],
    mark: Style,
) -> Vec<Line<'static>> {
    if terms.is_empty() {
        return lines;
    }
    lines
        .into_iter()
        .map(|line| {
            let style = line.style;
            let spans: Vec<Span<'static>> = line
                .spans
                .into_iter()
                .flat_map(|span| split_span(span, terms, mark))
                .collect();
            Line::from(spans).style(style)
        })
        .collect()
}

fn split_span(span: Span<'static>, terms: &[&str], mark: Style) -> Vec<Span<'static>> {
    let text = span.content.to_string();
    let lower = text.to_lowercase();
    // Lower-casing may change byte lengths (rare outside ASCII): then the span stays as is.
    if lower.len() != text.len() {
        return vec![span];
    }
    let mut marked = vec![false; text.len()];
    for term in terms {
        for (at, _) in lower.match_indices(term) {
            marked[at..at + term.len()]
                .iter_mut()
                .for_each(|m| *m = true);
        }
    }
    if !marked.contains(&true) {
        return vec![span];
    }
    let mut out = Vec::new();
    let mut start = 0;
    for end in 1..=text.len() {
        let boundary = end == text.len() || marked[end] != marked[start];
        if boundary && text.is_char_boundary(end) {
            let style = if marked[start] {
                span.style.patch(mark)
            } else {
                span.style
            };
            out.push(Span::styled(text[start..end].to_string(), style));
            start = end;
        }
    }
    out
}
