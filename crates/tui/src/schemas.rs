//! The schema findings the view shows (a marker in the calls table, the path and keyword in a
//! call's detail): asked of the engine's `schema::Checker` in `App::layout` for the calls on
//! screen only, and kept until the call changes, so drawing never validates and forwarding
//! never waits for it.

use std::collections::HashMap;

use mcpscope_engine::model::{Call, Model};
use mcpscope_engine::schema::{Checker, Violation};

/// Calls whose findings are kept before the forgotten ones are let go of.
const KEPT: usize = 4_096;

/// Violations by call, each with the event that last changed the call when it was checked.
#[derive(Debug, Default)]
pub struct SchemaFindings {
    checker: Checker,
    found: HashMap<usize, (u64, Vec<Violation>)>,
}

impl SchemaFindings {
    /// Checks the given calls that are new or changed since they were last checked. What is
    /// kept is bounded: past [`KEPT`] calls, those the model no longer holds are forgotten.
    pub fn settle(&mut self, model: &Model, calls: impl IntoIterator<Item = usize>) {
        if self.found.len() > KEPT {
            self.found.retain(|&index, _| model.calls.contains(index));
            if self.found.len() > KEPT {
                // The model still holds them all: keep only the newest half.
                let mut indices: Vec<usize> = self.found.keys().copied().collect();
                indices.sort_unstable();
                for index in &indices[..indices.len() / 2] {
                    self.found.remove(index);
                }
            }
        }
        for index in calls {
            let Some(call) = model.calls.get(index) else {
                continue;
            };
            let fresh = self
                .found
                .get(&index)
                .is_some_and(|(seq, _)| *seq == call.seq.1);
            if !fresh {
                let violations = self.checker.check(model, call);
                self.found.insert(index, (call.seq.1, violations));
            }
        }
    }

    /// The violations of a call as last settled (none when it was not checked in this state).
    pub fn of(&self, call: &Call) -> &[Violation] {
        match self.found.get(&call.index) {
            Some((seq, violations)) if *seq == call.seq.1 => violations,
            _ => &[],
        }
    }
}
