//! The calls table as Markdown, for bug reports.

use mcpscope_engine::model::Model;

use crate::describe;

/// Makes text safe inside a table cell: pipes escaped, line breaks flattened.
pub fn cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\r', '\n'], " ")
}

/// The calls table: #, time, method, tool, id, session, stream, verdict, death/cause, elapsed.
pub fn build(model: &Model) -> String {
    let mut out = String::from(
        "| # | time | method | tool | id | session | stream | verdict | death / cause | elapsed |\n\
         |---:|---|---|---|---|---|---|---|---|---:|\n",
    );
    let end = model.clock().or(model.last_t).unwrap_or_default();
    for call in &model.calls {
        let mut why = Vec::new();
        if let Some(death) = call.verdict.death() {
            why.push(format!("died {}", describe::death(model, death)));
        }
        if let Some(cause) = describe::cause(call) {
            why.push(cause);
        }
        if !matches!(
            call.verdict,
            mcpscope_engine::model::Verdict::Answered | mcpscope_engine::model::Verdict::Pending
        ) && call.reaction != Default::default()
        {
            why.push(format!("client: {}", call.reaction.summary()));
        }
        let elapsed = describe::elapsed_ms(call, end);
        let open = if call.ended_at.is_none() { "+" } else { "" };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {elapsed}{open} ms |\n",
            describe::number(call),
            describe::clock(call.started_at),
            cell(&call.method),
            cell(call.tool.as_deref().unwrap_or("")),
            cell(&call.id_text()),
            cell(&describe::session(model, call)),
            cell(&describe::owner(model, call)),
            call.verdict.name(),
            cell(&why.join("; ")),
        ));
    }
    if model.calls.is_empty() {
        out.push_str("\n_No calls in this recording._\n");
    }
    out
}
