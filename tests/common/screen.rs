#![allow(dead_code)]
//! Screens as text for the TUI tests: a view at the usual addresses, and a buffer's lines.

use chrono::{Offset, Utc};
use mcpscope_tui::App;
use mcpscope_tui::{Info, Theme};
use ratatui::buffer::Buffer;

/// A view of a proxy on 127.0.0.1:9000 in front of the test server's usual address, recording
/// to `recording` (if any), dark theme, UTC.
pub fn app(recording: Option<&str>) -> App {
    let info = Info {
        listen: Some("127.0.0.1:9000".into()),
        upstream: Some("http://127.0.0.1:8765/mcp".into()),
        recording: recording.map(Into::into),
        ..Info::default()
    };
    App::new(info, Theme::dark(), Utc.fix())
}

/// The buffer's lines, trailing blanks trimmed.
pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
