//! Screens off-screen, as buffers and as text: for snapshots, benchmarks and the tests of this
//! and other crates (feature `test-util`).

use chrono::{DateTime, Offset, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

use crate::{App, Info, Theme, view};
use mcpscope_engine::model::Model;

/// One frame of `app` over `model` at `now` off-screen, on a `width` × `height` [`TestBackend`],
/// laid out and drawn as the live loop does ([`App::layout`], then the drawing): for snapshots,
/// benchmarks and anything else that wants the screen as text.
pub fn render_to_buffer(
    app: &mut App,
    model: &Model,
    now: DateTime<Utc>,
    width: u16,
    height: u16,
) -> Buffer {
    app.layout(model, now, ratatui::layout::Rect::new(0, 0, width, height));
    let backend = TestBackend::new(width, height);
    let mut terminal = Terminal::new(backend).unwrap_or_else(|never| match never {});
    let _ = terminal.draw(|f| view::render(f, &*app, model, now));
    terminal.backend().buffer().clone()
}

/// The buffer's lines, trailing blanks trimmed, each ended by a newline.
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

/// A view of a proxy on 127.0.0.1:9000 in front of the test server's usual address, recording
/// to `recording` (if any), dark theme, UTC.
pub fn proxy_view(recording: Option<&str>) -> App {
    let info = Info {
        listen: Some("127.0.0.1:9000".into()),
        upstream: Some("http://127.0.0.1:8765/mcp".into()),
        recording: recording.map(Into::into),
        ..Info::default()
    };
    App::new(info, Theme::dark(), Utc.fix())
}
