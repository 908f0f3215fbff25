//! Fault injection: rules, their grammar, and the control a view uses.

pub mod control;
pub mod file;
pub mod plan;
pub mod rules;
pub mod spec;

pub use control::{FaultChoice, FaultControl, HeldRequest, RESENT_HEADER, Release, Resend};
pub use plan::{Fault, Plan, Planner, RequestInfo, Trigger};
pub use rules::{Repeat, Rule, RuleEngine, RuleId};
pub use spec::SpecError;

use std::path::Path;

use crate::UsageError;

/// Parses `--fault` specs and a `--faults` file into an engine (specs first, then the file).
pub fn load(specs: &[String], file: Option<&Path>) -> Result<RuleEngine, UsageError> {
    let engine = RuleEngine::new();
    for text in specs {
        let rule = spec::parse_rule(text).map_err(|e| UsageError(format!("--fault: {e}")))?;
        engine.add(rule);
    }
    if let Some(path) = file {
        for rule in file::load_rules(path).map_err(|e| UsageError(format!("--faults: {e}")))? {
            engine.add(rule);
        }
    }
    Ok(engine)
}
