//! A session's notifications and logs: `notifications/message` with its level and logger,
//! progress, `list_changed`, resource updates and the rest, and a stdio server's stderr lines,
//! newest last.

use chrono::{DateTime, Utc};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::fmt::clock;
use crate::app::App;
use mcpscope_engine::event::Direction;
use mcpscope_engine::model::Model;
use mcpscope_engine::wire::jsonrpc::{Kind, classify};

/// How many of the newest notifications are listed.
const SHOWN: usize = 200;

/// One notification as listed: time, level (for log messages), method, and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// When it was seen.
    pub at: DateTime<Utc>,
    /// Index of the message in [`Model::messages`] (none for a stderr line).
    pub message: Option<usize>,
    /// The log level of a `notifications/message`.
    pub level: Option<String>,
    /// The method.
    pub method: String,
    /// What it says, in one line.
    pub text: String,
}

/// The session's server → client notifications (and the client's), oldest first, the newest
/// [`SHOWN`] of them. Reads only the session's own streams.
pub fn entries(model: &Model, session: usize) -> Vec<Entry> {
    let Some(s) = model.sessions.get(session) else {
        return Vec::new();
    };
    let mut indices: Vec<usize> = s
        .streams
        .iter()
        .filter_map(|id| model.stream(*id))
        .flat_map(|stream| stream.messages.iter().copied())
        .collect();
    indices.sort_unstable();
    // Newest first, parsing only until enough are found: messages are kept as text.
    let mut out: Vec<Entry> = indices
        .into_iter()
        .rev()
        .filter_map(|m| {
            let rec = model.messages.get(m)?;
            let body = rec.body.value();
            let Kind::Notification { method, params } = classify(&body) else {
                return None;
            };
            let arrow = match rec.dir {
                Direction::ServerToClient => "←",
                Direction::ClientToServer => "→",
            };
            Some(Entry {
                at: rec.at,
                message: Some(m),
                level: (method == "notifications/message")
                    .then(|| params.get("level").and_then(Value::as_str))
                    .flatten()
                    .map(str::to_string),
                method: format!("{arrow} {method}"),
                text: summary(method, params),
            })
        })
        .take(SHOWN)
        .collect();
    // A stdio server's stderr, as its log, in time order with the rest.
    for stream in s.streams.iter().filter_map(|id| model.stream(*id)) {
        let Some(process) = &stream.process else {
            continue;
        };
        let skip = process.stderr.len().saturating_sub(SHOWN);
        out.extend(process.stderr.iter().skip(skip).map(|(at, line)| Entry {
            at: *at,
            message: None,
            level: Some("stderr".to_string()),
            method: "← stderr".to_string(),
            text: line.clone(),
        }));
    }
    out.sort_by_key(|e| e.at);
    if out.len() > SHOWN {
        out.drain(..out.len() - SHOWN);
    }
    out
}

/// What a notification says, in one line.
fn summary(method: &str, params: &Value) -> String {
    let text = |key: &str| params.get(key).map(one_line);
    match method {
        "notifications/message" => {
            let logger = params
                .get("logger")
                .and_then(Value::as_str)
                .map(|l| format!("[{l}] "))
                .unwrap_or_default();
            format!("{logger}{}", text("data").unwrap_or_default())
        }
        "notifications/progress" => {
            let mut out = text("progress").unwrap_or_default();
            if let Some(total) = text("total") {
                out.push_str(&format!("/{total}"));
            }
            if let Some(message) = params.get("message").and_then(Value::as_str) {
                out.push_str(&format!(" {message}"));
            }
            out
        }
        "notifications/resources/updated" => text("uri").unwrap_or_default(),
        "notifications/cancelled" => format!(
            "request {} {}",
            text("requestId").unwrap_or_default(),
            params.get("reason").and_then(Value::as_str).unwrap_or("")
        )
        .trim_end()
        .to_string(),
        _ if params.is_null() => String::new(),
        _ => one_line(params),
    }
}

fn one_line(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The lines the detail pane shows for a session's notifications.
pub fn lines(app: &App, model: &Model, session: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let entries = entries(model, session);
    let mut out = vec![Line::from(Span::styled(
        format!("Notifications and logs ({})", entries.len()),
        theme.header(),
    ))];
    if entries.is_empty() {
        out.push(Line::from(Span::styled("  none yet", theme.dim())));
    }
    for e in entries {
        let at = clock(e.at, app.tz);
        let level_style = match e.level.as_deref() {
            Some("error" | "critical" | "alert" | "emergency") => theme.error(),
            Some("warning") => theme.resumable(),
            _ => theme.dim(),
        };
        out.push(Line::from(vec![
            Span::styled(format!("  {at} "), theme.text()),
            Span::styled(
                format!("{:<9}", e.level.as_deref().unwrap_or("")),
                level_style,
            ),
            Span::styled(format!("{} ", e.method), theme.mark()),
            Span::styled(e.text, theme.text()),
        ]));
    }
    out
}
