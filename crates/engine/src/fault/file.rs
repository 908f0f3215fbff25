//! `--faults FILE.toml`: a list of `[[rule]]` tables with the fields of the rule grammar.
//!
//! ```toml
//! [[rule]]
//! fault = "reset"
//! after = "500ms"        # or "3 events"
//! method = "tools/call"
//! tool = "poke"
//! per_tool = true        # `once` counts per tool name
//! repeat = "once"        # or "always"
//! ```

use std::path::Path;

use serde::Deserialize;

use super::rules::{Repeat, Rule};
use super::spec;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsFile {
    #[serde(default)]
    rule: Vec<RuleTable>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleTable {
    fault: String,
    after: Option<String>,
    method: Option<String>,
    tool: Option<String>,
    session: Option<String>,
    nth: Option<u32>,
    repeat: Option<String>,
    #[serde(default, alias = "per-tool", alias = "each_tool", alias = "each-tool")]
    per_tool: bool,
}

impl RuleTable {
    fn into_rule(self) -> Result<Rule, String> {
        let fault =
            spec::parse_fault(&self.fault).map_err(|p| format!("fault {:?}: {p}", self.fault))?;
        let mut rule = Rule::new(fault);
        if let Some(after) = &self.after {
            rule.trigger = spec::parse_after(after).map_err(|p| format!("after: {p}"))?;
        }
        rule.method = self.method;
        rule.tool = self.tool;
        rule.session = self.session;
        rule.nth = self.nth;
        rule.per_tool = self.per_tool;
        rule.repeat = match self.repeat.as_deref() {
            None | Some("once") => Repeat::Once,
            Some("always") => Repeat::Always,
            Some(other) => {
                return Err(format!("repeat {other:?}: expected \"once\" or \"always\""));
            }
        };
        rule.validate()
            .map_err(|(word, problem)| format!("{word}: {problem}"))?;
        Ok(rule)
    }
}

/// Parses the text of a faults file; errors name the rule (from 1) and the field.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, String> {
    let file: FaultsFile = toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => {
            let line = text.as_bytes()[..span.start.min(text.len())]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            format!("line {line}: {}", e.message())
        }
        None => e.message().to_string(),
    })?;
    file.rule
        .into_iter()
        .enumerate()
        .map(|(i, table)| {
            table
                .into_rule()
                .map_err(|e| format!("rule {}: {e}", i + 1))
        })
        .collect()
}

/// Reads and parses a faults file.
pub fn load_rules(path: &Path) -> Result<Vec<Rule>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the faults file {}: {e}", path.display()))?;
    parse_rules(&text).map_err(|e| format!("faults file {}: {e}", path.display()))
}
