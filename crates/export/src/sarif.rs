//! `check --sarif FILE`: the findings as SARIF 2.1.0, for code-scanning dashboards. One run;
//! each recording an artifact; each finding a result with its rule id, a level (`error` for
//! what the check was asked to fail on, `warning` or `note` for what the other rules found), a
//! message, and the recording's line where the call's exchange (or the stream) begins as its
//! location.

use serde_json::{Value, json};

use crate::VERSION;
use mcpscope_analysis::check::{FileCheck, Rule};
use mcpscope_analysis::describe;

/// The SARIF version written.
pub(crate) const SARIF_VERSION: &str = "2.1.0";
/// The schema URI written into `$schema`.
pub(crate) const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// A file name as a relative URI reference: `/` separators, anything but unreserved
/// characters and `/` percent-encoded.
pub(crate) fn uri(path: &str) -> String {
    let mut out = String::new();
    for byte in path.replace('\\', "/").bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Line 1 is the header; event `seq` (0-based) is on line `seq + 2`.
fn line_of(seq: u64) -> u64 {
    seq + 2
}

/// The SARIF log of these checks. A rule's default level is `error` when the checks fail on
/// it, its quiet level otherwise.
pub(crate) fn build(checks: &[FileCheck], failing: &[Rule]) -> Value {
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|rule| {
            let level = if failing.contains(rule) {
                "error"
            } else {
                rule.quiet_level()
            };
            json!({
                "id": rule.word(),
                "shortDescription": { "text": rule.description() },
                "defaultConfiguration": { "level": level },
            })
        })
        .collect();
    let artifacts: Vec<Value> = checks
        .iter()
        .map(|c| json!({ "location": { "uri": uri(&c.file) } }))
        .collect();
    let mut results = Vec::new();
    for (artifact, check) in checks.iter().enumerate() {
        let model = &check.folded.model;
        let failing = check.findings.iter().map(|f| (f, "error"));
        let quiet = check.warnings.iter().map(|f| (f, f.rule.quiet_level()));
        for (finding, level) in failing.chain(quiet) {
            let (text, seq) = match finding.call.and_then(|i| model.calls.get(i)) {
                Some(call) => (
                    format!(
                        "#{} {} id={}: {}",
                        describe::number(call),
                        call.title(),
                        call.id_text(),
                        if finding.detail.is_empty() {
                            call.verdict.name().to_string()
                        } else {
                            finding.detail.clone()
                        }
                    ),
                    Some(call.seq.0),
                ),
                None => {
                    let stream = finding.stream.and_then(|s| model.stream(s));
                    (
                        format!(
                            "stream {}: {}",
                            stream.map(|s| s.label()).unwrap_or_default(),
                            finding.detail
                        ),
                        stream.map(|s| s.opened_seq),
                    )
                }
            };
            let mut physical = json!({
                "artifactLocation": { "uri": uri(&check.file), "index": artifact },
            });
            if let Some(seq) = seq {
                physical["region"] = json!({ "startLine": line_of(seq) });
            }
            let mut result = json!({
                "ruleId": finding.rule.word(),
                "ruleIndex": Rule::ALL.iter().position(|r| *r == finding.rule).unwrap_or(0),
                "level": level,
                "message": { "text": text },
                "locations": [{ "physicalLocation": physical }],
            });
            if let Some(v) = &finding.schema {
                result["properties"] = mcpscope_analysis::check::schema_json(v);
            }
            results.push(result);
        }
    }
    json!({
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": { "driver": {
                "name": "mcpscope",
                "version": VERSION,
                "rules": rules,
            }},
            "artifacts": artifacts,
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_become_uri_references() {
        assert_eq!(uri("recordings/a b.jsonl"), "recordings/a%20b.jsonl");
        assert_eq!(uri("C:\\x\\y.jsonl"), "C%3A/x/y.jsonl");
    }
}
