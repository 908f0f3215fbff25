//! The order of the calls table: orphans first, then resumable, pending, and the ended calls.

use mcpscope_engine::model::{Call, Model, Verdict};

use super::filter::Filter;

/// The display group of a call: lower sorts first.
pub(crate) fn rank(call: &Call) -> u8 {
    match call.verdict {
        Verdict::Orphaned { .. } => 0,
        Verdict::Resumable { .. } => 1,
        Verdict::Pending => 2,
        Verdict::Error { .. } => 3,
        Verdict::Cancelled { .. } => 4,
        Verdict::Answered => 5,
    }
}

/// The calls to show, in display order (indices into [`Model::calls`]). One linear pass, so it
/// stays cheap with 100,000 calls; strings are only built for the rows on screen.
pub(crate) fn build(model: &Model, filter: &Filter, hide_answered: bool) -> Vec<usize> {
    let mut groups: [Vec<usize>; 6] = Default::default();
    for call in &model.calls {
        let r = rank(call);
        if hide_answered && r == 5 {
            continue;
        }
        // A request about a task is shown under its operation (the detail pane's timeline).
        if !call.stands_alone() {
            continue;
        }
        if !filter.is_empty() && !filter.matches(model, call) {
            continue;
        }
        groups[usize::from(r)].push(call.index);
    }
    let mut rows = Vec::with_capacity(groups.iter().map(Vec::len).sum());
    for group in groups {
        rows.extend(group);
    }
    rows
}
