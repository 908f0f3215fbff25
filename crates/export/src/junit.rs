//! JUnit XML for `mcpscope check --junit`: a testsuite per recording, a testcase per call
//! (`method tool #id`), a failure per failing call carrying its cause; findings about a stream
//! that carried no call get a testcase of their own (`stream GET#3 sse`).

use std::fmt::Write;

use mcpscope_analysis::check::{FileCheck, Finding};
use mcpscope_analysis::describe;

/// Escapes text for an XML attribute or element (and drops characters XML 1.0 forbids).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The JUnit XML document for the checked recordings.
pub fn build(checks: &[FileCheck]) -> String {
    let mut suites = String::new();
    let (mut tests, mut failures) = (0, 0);
    for check in checks {
        let (suite, t, f) = suite(check);
        suites.push_str(&suite);
        tests += t;
        failures += f;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mcpscope check\" tests=\"{tests}\" failures=\"{failures}\">\n{suites}</testsuites>\n"
    )
}

fn suite(check: &FileCheck) -> (String, usize, usize) {
    let model = &check.folded.model;
    let (by_call, streams) = check.grouped();
    let mut cases = String::new();
    let (mut tests, mut failures) = (0, 0);
    for call in &model.calls {
        tests += 1;
        let name = format!("{} #{}", call.title(), call.id_text());
        let seconds = call
            .ended_at
            .map(|end| (end - call.started_at).num_microseconds().unwrap_or(0) as f64 / 1e6)
            .unwrap_or(0.0);
        let _ = write!(
            cases,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{seconds:.6}\"",
            escape(&name),
            escape(&check.file)
        );
        match by_call.get(&call.index) {
            Some(found) => {
                failures += 1;
                let mut body = format!(
                    "call #{} {} id={}\nsession: {}\nstream: {}\nverdict: {}\n",
                    describe::number(call),
                    call.title(),
                    call.id_text(),
                    describe::session(model, call),
                    describe::owner(model, call),
                    call.verdict.name()
                );
                if let Some(death) = call.verdict.death() {
                    let _ = writeln!(body, "died: {}", describe::death(model, death));
                }
                if let Some(cause) = describe::cause(call) {
                    let _ = writeln!(body, "cause: {cause}");
                }
                let _ = write!(cases, ">\n{}    </testcase>\n", failure(found, &body));
            }
            None => cases.push_str("/>\n"),
        }
    }
    for finding in streams {
        tests += 1;
        failures += 1;
        let label = finding
            .stream
            .and_then(|s| model.stream(s))
            .map(|s| s.label())
            .unwrap_or_default();
        let _ = write!(
            cases,
            "    <testcase name=\"{}\" classname=\"{}\">\n{}    </testcase>\n",
            escape(&format!("stream {label}")),
            escape(&check.file),
            failure(&[finding], &finding.detail)
        );
    }
    let suite = format!(
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">\n{cases}  </testsuite>\n",
        escape(&check.file)
    );
    (suite, tests, failures)
}

fn failure(found: &[&Finding], body: &str) -> String {
    let kinds: Vec<&str> = found.iter().map(|f| f.rule.word()).collect();
    let message: Vec<String> = found
        .iter()
        .map(|f| format!("{}: {}", f.rule.word(), f.detail))
        .collect();
    format!(
        "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
        escape(&kinds.join(",")),
        escape(&message.join("; ")),
        escape(body)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'\u{1}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;"
        );
    }
}
