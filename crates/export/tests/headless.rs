//! The headless view's lines, from notices the model folds out of a script: every label keeps
//! its column, and a rescue and a corrected revision read as they should.

use mcpscope_engine::event::{EndHow, EventKind, Leg};
use mcpscope_engine::fixtures::Script;
use mcpscope_engine::model::Notice;
use mcpscope_export::headless::line;
use serde_json::json;

const S1: &[(&str, &str)] = &[("mcp-session-id", "s1")];

fn lines(notices: &[Notice]) -> Vec<String> {
    notices.iter().map(line).collect()
}

#[test]
fn headless_lines_keep_their_columns() {
    let mut s = Script::sse_call("2025-06-18", "ask");
    s.event(
        2,
        None,
        Some(json!({"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{}})),
    );
    s.post(
        3,
        S1,
        json!({"jsonrpc":"2.0","id":"e1","result":{"action":"accept"}}),
    );
    s.open_with(4, "POST", S1);
    s.push(EventKind::UpstreamUnreachable {
        stream: 4,
        error: "connection refused".into(),
    });
    s.finish(2, EndHow::Reset, Leg::Upstream);
    let (_, notices) = s.fold();
    let lines = lines(&notices);
    assert!(lines.len() > 5, "{lines:#?}");
    for line in &lines {
        // `HH:MM:SS.mmm ` then an 18-column label: the details start at column 31.
        let (label, detail) = line.split_at(13 + 18);
        assert!(
            label.ends_with(' ') && !detail.starts_with(' '),
            "out of line: {line}"
        );
    }
}

#[test]
fn a_rescue_reads_as_one_naming_the_call() {
    let mut s = Script::sse_call("2025-06-18", "poke");
    s.wait(20).finish(2, EndHow::Reset, Leg::Upstream);
    s.push(EventKind::CallRescued {
        stream: 2,
        id: json!(1),
        message: "upstream stream reset 20 ms after the response head; mcpscope --rescue".into(),
    });
    let (_, notices) = s.fold();
    let last = lines(&notices).pop().unwrap_or_default();
    assert!(
        last.contains("CALL RESCUED") && last.contains("poke"),
        "{last}"
    );
}
