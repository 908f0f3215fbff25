//! The calls table as Markdown, for bug reports.

use mcpscope_engine::model::{Call, Model, Verdict};

use crate::{Error, mermaid};
use mcpscope_analysis::describe;

/// The calls table's header and alignment lines.
pub const HEADER: &str = "| # | time | method | tool | id | session | stream | verdict | death / cause | elapsed |\n\
     |---:|---|---|---|---|---|---|---|---|---:|\n";

/// The calls table: #, time, method, tool, id, session, stream, verdict, death/cause, elapsed
/// (a task operation is one row: its task id, status and polls with the cause, create → result
/// elapsed); then, after a blank line, the latency per tool (with a histogram line) and per
/// method.
pub fn build(model: &Model) -> String {
    let mut out = String::from(HEADER);
    // A request about a task is counted in its operation's row, not as a row of its own.
    for call in model.calls.iter().filter(|c| c.stands_alone()) {
        out.push_str(&row(model, call));
    }
    if model.calls.is_empty() {
        out.push_str("\n_No calls in this recording._\n");
    }
    let latency = mcpscope_analysis::latency::markdown(model);
    if !latency.is_empty() {
        out.push('\n');
        out.push_str(&latency);
    }
    out
}

/// One call's row of the calls table, with its line break.
pub fn row(model: &Model, call: &Call) -> String {
    let end = model.clock().or(model.last_t).unwrap_or_default();
    let mut why = Vec::new();
    if let Some(task) = call.task() {
        let polls = model.operation(call.index).map_or(0, |op| {
            op.requests
                .iter()
                .filter_map(|&c| model.calls.get(c))
                .filter(|c| c.method == "tasks/get")
                .count()
        });
        let mut text = format!(
            "task {} {}, {polls} poll{}",
            task.id,
            task.status.name(),
            if polls == 1 { "" } else { "s" }
        );
        if task.waits_lost > 0 {
            text.push_str(&format!(
                ", {} result wait{} died, asked again {}",
                task.waits_lost,
                if task.waits_lost == 1 { "" } else { "s" },
                task.reasked
            ));
        }
        why.push(text);
    }
    if let Some(death) = call.verdict.death() {
        why.push(format!("died {}", describe::death(model, death)));
    }
    if let Some(cause) = describe::cause(call) {
        why.push(cause);
    }
    if !matches!(call.verdict, Verdict::Answered | Verdict::Pending)
        && call.reaction != Default::default()
    {
        why.push(format!("client: {}", call.reaction.summary()));
    }
    let elapsed = describe::elapsed_ms(call, end);
    let open = if call.ended_at.is_none() { "+" } else { "" };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {elapsed}{open} ms |\n",
        describe::number(call),
        describe::clock(call.started_at),
        describe::markdown_cell(&call.method),
        describe::markdown_cell(call.tool.as_deref().unwrap_or("")),
        describe::markdown_cell(&call.id_text()),
        describe::markdown_cell(&describe::session(model, call)),
        describe::markdown_cell(&describe::owner(model, call)),
        call.verdict.name(),
        describe::markdown_cell(&why.join("; ")),
    )
}

/// One call as a Markdown document: a heading, its Mermaid sequence diagram and its row of
/// the calls table. `index` is the call's position in [`Model::calls`].
pub fn call_report(model: &Model, index: usize) -> Result<String, Error> {
    let call = model.calls.get(index).ok_or_else(|| {
        Error::Usage(format!(
            "no call {}: there are {} calls",
            index + 1,
            model.calls.len()
        ))
    })?;
    let diagram = mermaid::build_model(model, Some(describe::number(call)))?;
    Ok(format!(
        "# Call {}: {}\n\n```mermaid\n{diagram}```\n\n{HEADER}{}",
        describe::number(call),
        describe::markdown_cell(&call.title()),
        row(model, call)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpscope_engine::model::Model;

    #[test]
    fn a_missing_call_is_an_error() {
        let model = Model::new();
        assert!(call_report(&model, 0).is_err());
    }
}
