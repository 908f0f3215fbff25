//! (Servers →) sessions → streams → messages, with tui-tree-widget. Children are built only for open nodes,
//! and a session with many streams shows a window of them around the selection.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, StatefulWidget, Widget};
use tui_tree_widget::{Tree, TreeItem, TreeState};

use super::fmt::clock;
use crate::app::{App, Node, Pane};
use crate::grouping;
use crate::node::{EARLIER_MESSAGES, EARLIER_STREAMS, LATER_MESSAGES, LATER_STREAMS};
use crate::theme::Theme;
use mcpscope_engine::event::Direction;
use mcpscope_engine::model::{Fate, Model, Stream};

/// Streams shown at once under one session, at least: a pane's worth of them on each side of
/// the selection ([`window`]) however short the pane.
const MIN_WINDOW: usize = 30;

/// The streams a session shows at once in a pane `height` rows high, centred on the selection:
/// three panes' worth, so that a move of a row or a page stays inside it (and the next frame
/// centres it again), while a frame builds only rows that can be reached from the screen.
fn window(height: u16) -> usize {
    (3 * usize::from(height)).max(MIN_WINDOW)
}

/// Draws the tree into `area` from its own state, which the widget scrolls to keep the selection
/// in view and which then knows the rows on screen (for the arrow keys and clicks).
pub(crate) fn render(frame: &mut Frame, app: &App, model: &Model, area: Rect) {
    let items = items(app, model, &app.theme, window(area.height));
    let Ok(mut state) = app.tree.state.try_borrow_mut() else {
        return;
    };
    draw(
        &app.theme,
        app.focus,
        &items,
        area,
        frame.buffer_mut(),
        &mut state,
    );
    pin_session(app, model, area, frame.buffer_mut(), &state);
}

/// When the tree is scrolled past its first rows (a narrow or short pane, a late stream
/// selected), the top border names the selected node's session: its own row is off screen.
fn pin_session(app: &App, model: &Model, area: Rect, buf: &mut Buffer, state: &TreeState<Node>) {
    if state.get_offset() == 0 || area.width < 4 || area.height == 0 {
        return;
    }
    let Some(&Node::Session(si)) = state
        .selected()
        .iter()
        .find(|n| matches!(n, Node::Session(_)))
    else {
        return;
    };
    let Some(session) = model.sessions.get(si) else {
        return;
    };
    let text = format!(" ▲ {} · streams ", session.label());
    let width = usize::from(area.width - 2);
    let text: String = text.chars().take(width).collect();
    let border: String = "─".repeat(width);
    let style = app.theme.pane_border(app.focus == Pane::Tree);
    buf.set_string(area.x + 1, area.y, border, style);
    buf.set_string(area.x + 1, area.y, text, app.theme.title());
}

fn draw(
    theme: &Theme,
    focus: Pane,
    items: &[TreeItem<'static, Node>],
    area: Rect,
    buf: &mut Buffer,
    state: &mut TreeState<Node>,
) {
    let block = Block::bordered()
        .title(Span::styled(
            " Sessions · streams · messages ",
            theme.title(),
        ))
        .border_style(theme.pane_border(focus == Pane::Tree));
    match Tree::new(items) {
        Ok(tree) => {
            // Plain text takes the screen's base style (`view::render`).
            let tree = tree
                .block(block)
                .highlight_style(theme.selection())
                .highlight_symbol("");
            StatefulWidget::render(tree, area, buf, state);
        }
        Err(_) => block.render(area, buf),
    }
}

fn items(app: &App, model: &Model, theme: &Theme, window: usize) -> Vec<TreeItem<'static, Node>> {
    let selected_stream = app
        .tree
        .selected()
        .into_iter()
        .find(|n| matches!(n, Node::Stream(_)));
    let shown = |si: &usize| !model.sessions[*si].streams.is_empty();
    if !grouping::grouped(model) {
        return (model.sessions.indexed().map(|(si, _)| si))
            .filter(shown)
            .filter_map(|si| session_item(app, model, theme, si, &[], selected_stream, window))
            .collect();
    }
    // Grouped: a node per server in the order the servers were first seen, the sessions whose
    // server is unknown last, each server's sessions in their own order.
    let mut servers: Vec<Option<&str>> = model.servers().into_iter().map(Some).collect();
    if model
        .sessions
        .iter()
        .any(|s| s.origin.is_none() && !s.streams.is_empty())
    {
        servers.push(None);
    }
    let mut out = Vec::new();
    for origin in servers {
        let node = grouping::server_node(origin);
        let sessions: Vec<usize> = (model.sessions.indexed().map(|(si, _)| si))
            .filter(shown)
            .filter(|&si| model.sessions[si].origin.as_deref() == origin)
            .collect();
        let children: Vec<_> = if app.tree.is_open(&[node]) {
            sessions
                .iter()
                .filter_map(|&si| {
                    session_item(app, model, theme, si, &[node], selected_stream, window)
                })
                .collect()
        } else {
            vec![TreeItem::new_leaf(Node::More(0, 4), "…")]
        };
        let label = origin.map_or_else(
            || "(unknown server)".to_string(),
            super::calls::server_label,
        );
        let text = Line::from(vec![
            Span::styled(label, theme.title()),
            Span::styled(format!("  ({} sessions)", sessions.len()), theme.dim()),
        ]);
        if let Ok(item) = TreeItem::new(node, text, children) {
            out.push(item);
        }
    }
    out
}

/// A session's line, with its streams when it is open; `parent` is the path above it.
fn session_item(
    app: &App,
    model: &Model,
    theme: &Theme,
    si: usize,
    parent: &[Node],
    selected_stream: Option<Node>,
    window: usize,
) -> Option<TreeItem<'static, Node>> {
    let session = &model.sessions[si];
    let mut text = vec![Span::styled(session.label(), theme.header())];
    if let Some(rev) = &session.revision {
        text.push(Span::styled(format!("  {rev}"), theme.dim()));
    }
    if let Some(client) = &session.client {
        text.push(Span::styled(format!("  {client}"), theme.dim()));
    }
    if let Some((_, end)) = &session.ended {
        text.push(Span::styled(
            format!("  {end:?}").to_lowercase(),
            theme.stream_dead(),
        ));
    }
    text.push(Span::styled(
        format!("  ({} streams)", session.streams.len()),
        theme.dim(),
    ));
    let mut path = parent.to_vec();
    path.push(Node::Session(si));
    let children = if app.tree.is_open(&path) {
        stream_items(app, model, theme, &path, selected_stream, window)
    } else {
        vec![TreeItem::new_leaf(Node::More(si, 0), "…")]
    };
    TreeItem::new(Node::Session(si), Line::from(text), children).ok()
}

fn stream_items(
    app: &App,
    model: &Model,
    theme: &Theme,
    session_path: &[Node],
    selected: Option<Node>,
    window: usize,
) -> Vec<TreeItem<'static, Node>> {
    let Some(&Node::Session(si)) = session_path.last() else {
        return Vec::new();
    };
    let ids = &model.sessions[si].streams;
    let center = match selected {
        Some(Node::Stream(id)) => ids.iter().position(|&s| s == id),
        _ => None,
    }
    .unwrap_or(ids.len().saturating_sub(1));
    let (start, end) = around(center, ids.len(), window);
    let mut out = Vec::new();
    if start > 0 {
        out.push(TreeItem::new_leaf(
            Node::More(ids[start - 1] as usize, EARLIER_STREAMS),
            Span::styled(format!("… {start} earlier streams"), theme.dim()),
        ));
    }
    for &id in &ids[start..end] {
        let Some(stream) = model.stream(id) else {
            continue;
        };
        let mut path = session_path.to_vec();
        path.push(Node::Stream(id));
        let children = if app.tree.is_open(&path) {
            message_items(app, model, theme, stream, window)
        } else if stream.messages.is_empty() {
            Vec::new()
        } else {
            vec![TreeItem::new_leaf(Node::More(id as usize, 2), "…")]
        };
        if let Ok(item) = TreeItem::new(
            Node::Stream(id),
            stream_line(model, stream, app, theme),
            children,
        ) {
            out.push(item);
        }
    }
    if end < ids.len() {
        out.push(TreeItem::new_leaf(
            Node::More(ids[end] as usize, LATER_STREAMS),
            Span::styled(format!("… {} later streams", ids.len() - end), theme.dim()),
        ));
    }
    out
}

/// The rows `start..end` of `len` a window of `window` rows shows centred on row `center`
/// (moved in where it would pass either end).
fn around(center: usize, len: usize, window: usize) -> (usize, usize) {
    let start = center
        .saturating_sub(window / 2)
        .min(len.saturating_sub(window));
    (start, (start + window).min(len))
}

/// An open stream's messages: a window of them as [`stream_items`] makes one of streams,
/// centred on the selected message (from the first when none of its messages is selected), the
/// others counted (a stream may carry hundreds of thousands of progress notifications).
fn message_items(
    app: &App,
    model: &Model,
    theme: &Theme,
    stream: &Stream,
    window: usize,
) -> Vec<TreeItem<'static, Node>> {
    let ids = &stream.messages;
    let selected = app.tree.selected().into_iter().find_map(|n| match n {
        Node::Message(m) => Some(m),
        _ => None,
    });
    let center = selected
        .and_then(|m| ids.iter().position(|&id| id == m))
        .unwrap_or(0);
    let (start, end) = around(center, ids.len(), window);
    let mut out = Vec::new();
    if start > 0 {
        out.push(TreeItem::new_leaf(
            Node::More(ids[start - 1], EARLIER_MESSAGES),
            Span::styled(format!("… {start} earlier messages"), theme.dim()),
        ));
    }
    out.extend(ids[start..end].iter().filter_map(|&m| {
        let rec = model.messages.get(m)?;
        let style = match rec.dir {
            Direction::ClientToServer => theme.text(),
            Direction::ServerToClient => theme.mark(),
        };
        let line = Line::from(vec![
            Span::styled(format!("{} ", clock(rec.at, app.tz)), theme.dim()),
            Span::styled(rec.summary(), style),
        ]);
        Some(TreeItem::new_leaf(Node::Message(m), line))
    }));
    if end < ids.len() {
        out.push(TreeItem::new_leaf(
            Node::More(ids[end], LATER_MESSAGES),
            Span::styled(format!("… {} later messages", ids.len() - end), theme.dim()),
        ));
    }
    out
}

/// `POST#12 sse 200  14:02:11.200 → died 14:02:11.700 reset (upstream)`.
pub(crate) fn stream_line(
    model: &Model,
    stream: &Stream,
    app: &App,
    theme: &Theme,
) -> Line<'static> {
    let mut spans = vec![Span::styled(format!("{} ", stream.label()), theme.text())];
    if let Some(status) = stream.status {
        spans.push(Span::styled(format!("{status} "), theme.dim()));
    }
    spans.push(Span::styled(clock(stream.opened_at, app.tz), theme.dim()));
    let fate = model.fate(stream);
    let (text, style) = match fate {
        Fate::Open => (" open".to_string(), theme.stream_open()),
        Fate::Unreachable(err) => (format!(" unreachable: {err}"), theme.stream_dead()),
        Fate::Closed(end) | Fate::Died(end) => (
            format!(
                " → {} {} {} ({})",
                fate.word(),
                clock(end.at, app.tz),
                end.how.as_str(),
                end.leg.as_str()
            ),
            if fate.is_death() {
                theme.stream_dead()
            } else {
                theme.dim()
            },
        ),
    };
    spans.push(Span::styled(text, style));
    if !stream.faults.is_empty() {
        spans.push(Span::styled(
            format!(" ⚡{}", stream.faults.join(",")),
            theme.injected(),
        ));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Offset, Utc};
    use mcpscope_engine::fixtures::Script;
    use serde_json::json;

    /// A session of 500 streams in a pane 20 rows high builds three panes' worth of them, and
    /// counts the rest.
    #[test]
    fn a_long_session_builds_three_panes_of_streams() {
        let mut model = Model::new();
        for event in &mcpscope_engine::fixtures::many_calls(499) {
            model.apply(event);
        }
        let mut app = App::new(crate::Info::default(), Theme::dark(), Utc.fix());
        app.sync(&model);
        let items = items(&app, &model, &app.theme, window(20));
        let session = items
            .iter()
            .find(|i| *i.identifier() == Node::Session(1))
            .expect("the session");
        let children = session.children();
        // The first stream is selected (its call is): 60 streams from it, then the count of
        // the 440 later ones.
        assert_eq!(children.len(), 61);
        assert_eq!(*children[0].identifier(), Node::Stream(1));
        assert_eq!(*children[60].identifier(), Node::More(61, LATER_STREAMS));
        assert_eq!(window(3), MIN_WINDOW);
    }

    /// An open stream of 1,000 messages in a pane 20 rows high builds three panes' worth of
    /// them, from the first, and counts the rest.
    #[test]
    fn an_open_stream_builds_three_panes_of_messages() {
        let mut script = Script::new();
        script.handshake(0, 1, "s1");
        script.call(100, 2, "s1", 1, "slow");
        for n in 0..1_000i64 {
            let progress = json!({"jsonrpc":"2.0","method":"notifications/progress",
                                  "params":{"progressToken":"t","progress":n}});
            script.sse(101 + n, 2, None, progress, (0, 40));
        }
        let (model, _) = script.fold();
        let mut app = App::new(crate::Info::default(), Theme::dark(), Utc.fix());
        app.sync(&model);
        app.tree
            .state
            .borrow_mut()
            .open(vec![Node::Session(1), Node::Stream(2)]);
        let items = items(&app, &model, &app.theme, window(20));
        let stream = items
            .iter()
            .find(|i| *i.identifier() == Node::Session(1))
            .and_then(|s| s.child(1))
            .expect("the call's stream");
        assert_eq!(*stream.identifier(), Node::Stream(2));
        let children = stream.children();
        assert_eq!(children.len(), 61);
        assert!(matches!(children[0].identifier(), Node::Message(_)));
        // The count names the message right after the window.
        let Node::Message(last) = *children[59].identifier() else {
            panic!("{:?}", children[59].identifier());
        };
        assert_eq!(
            *children[60].identifier(),
            Node::More(last + 1, LATER_MESSAGES)
        );
    }
}
