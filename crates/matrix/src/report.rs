//! The matrix's outputs: a terminal table, JSON lines, JUnit XML and a Markdown table.

use std::fmt::Write;

use mcpscope_export::junit::escape;
use serde_json::{Value, json};

use super::cell::CellResult;
use super::client::Stop;

/// Output lines of the client kept in reports.
const LAST_LINES: usize = 5;

fn reaction(ms: Option<i64>) -> String {
    ms.map_or_else(|| "-".to_string(), |ms| format!("{ms} ms"))
}

/// One row per cell: case, outcome, reaction time, verdict.
pub fn table(cells: &[CellResult]) -> String {
    let rows: Vec<[String; 4]> = cells
        .iter()
        .map(|c| {
            [
                c.case.name.to_string(),
                c.judgement.outcome.word().to_string(),
                reaction(c.judgement.reaction_ms),
                c.judgement.verdict.clone(),
            ]
        })
        .collect();
    let head = ["case", "outcome", "reaction", "verdict"];
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cols: [&str; 4]| {
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:>w2$}  {}",
            cols[0],
            cols[1],
            cols[2],
            cols[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
    };
    line(&mut out, head);
    for row in &rows {
        line(&mut out, [&row[0], &row[1], &row[2], &row[3]]);
    }
    out.push_str(&summary(cells));
    out.push('\n');
    out
}

/// The run in one line: cells, correct, with a defect, not judged.
pub fn summary(cells: &[CellResult]) -> String {
    let defects = cells
        .iter()
        .filter(|c| c.judgement.defect.is_some())
        .count();
    let (skipped, inconclusive) = (skipped(cells), inconclusive(cells));
    let mut out = format!(
        "{} cells, {} correct, {defects} with a defect",
        cells.len(),
        cells.len() - defects - skipped - inconclusive
    );
    if skipped > 0 {
        let _ = write!(out, ", {skipped} skipped (not judged)");
    }
    if inconclusive > 0 {
        let _ = write!(
            out,
            ", {inconclusive} inconclusive (not judged: the run did not show what the client does)"
        );
    }
    out
}

/// A cell in a few words: `failed: correct`, `hung: hangs on stream death`, `skipped: why`
/// (the outcome said once).
pub fn cell_text(j: &super::judge::Judgement) -> String {
    let outcome = j.outcome.word();
    match j
        .verdict
        .strip_prefix(outcome)
        .is_some_and(|rest| rest.starts_with(':'))
    {
        true => j.verdict.clone(),
        false => format!("{outcome}: {}", j.verdict),
    }
}

/// A version sweep: one row per case, one column per client (`labels`), each cell its outcome
/// and verdict; a `≠` marks the rows whose verdict changes from one column to the next, and a
/// line per column counts its defects.
pub fn sweep(labels: &[String], columns: &[Vec<CellResult>]) -> String {
    let cases: Vec<&'static str> = columns
        .first()
        .map(|cells| cells.iter().map(|c| c.case.name).collect())
        .unwrap_or_default();
    let word =
        |cell: Option<&CellResult>| cell.map_or_else(|| "-".into(), |c| cell_text(&c.judgement));
    let mut rows: Vec<Vec<String>> = vec![
        std::iter::once("case".to_string())
            .chain(labels.iter().cloned())
            .collect(),
    ];
    let mut changed = Vec::new();
    for case in &cases {
        let row: Vec<String> = columns
            .iter()
            .map(|cells| word(cells.iter().find(|c| c.case.name == *case)))
            .collect();
        let differs = row.windows(2).any(|pair| pair[0] != pair[1]);
        if differs {
            changed.push(*case);
        }
        let mark = if differs { "≠ " } else { "  " };
        rows.push(
            std::iter::once(format!("{mark}{case}"))
                .chain(row)
                .collect(),
        );
    }
    let columns_n = rows[0].len();
    let widths: Vec<usize> = (0..columns_n)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    for (label, cells) in labels.iter().zip(columns) {
        let defects = cells
            .iter()
            .filter(|c| c.judgement.defect.is_some())
            .count();
        let _ = writeln!(
            out,
            "{label}: {} cells, {defects} with a defect, {} skipped, {} inconclusive",
            cells.len(),
            skipped(cells),
            inconclusive(cells)
        );
    }
    match changed.is_empty() {
        true => out.push_str("every row is the same in every column\n"),
        false => {
            let _ = writeln!(out, "rows that change (≠): {}", changed.join(", "));
        }
    }
    out
}

/// Cells not judged (what their case describes cannot happen here).
fn skipped(cells: &[CellResult]) -> usize {
    cells
        .iter()
        .filter(|c| c.judgement.skipped.is_some())
        .count()
}

/// Cells not judged (the run did not show what the client does).
fn inconclusive(cells: &[CellResult]) -> usize {
    cells
        .iter()
        .filter(|c| c.judgement.inconclusive.is_some())
        .count()
}

/// Milliseconds the client was busy (ran or waited for a CPU) from the death to its exit or
/// stop, when it was sampled.
fn busy_after_death(cell: &CellResult) -> Option<i64> {
    let from = cell.broke_at?;
    let to = cell.client.exited_at.or(cell.client.killed_at)?;
    Some(cell.client.activity.busy_ms(from, to))
}

/// The JSON object of one cell.
pub fn json(cell: &CellResult) -> Value {
    let j = &cell.judgement;
    let mut value = json!({
        "case": cell.case.name,
        "about": cell.case.about,
        "outcome": j.outcome.word(),
        "reaction_ms": j.reaction_ms,
        "verdict": j.verdict,
        "defect": j.defect,
        "skipped": j.skipped,
        "inconclusive": j.inconclusive,
        "expected": j.expected,
        "double_execution": j.double_execution,
        "provoked": j.provoked,
        "call_verdict": j.call_verdict,
        "exit_code": cell.client.code,
        "killed": cell.client.killed,
        "stopped": cell.client.stop.map(|s| match s {
            Stop::Startup => "start-up bound",
            Stop::Idle => "idle for the timeout",
            Stop::Busy => "still busy at the cap",
            Stop::Watched => "stall watched",
        }),
        "busy_ms_after_death": busy_after_death(cell),
        "elapsed_ms": cell.elapsed_ms,
        "last_lines": cell.client.last_lines(LAST_LINES),
        "recording": cell.recording.as_ref().map(|p| p.display().to_string()),
        "broke_at": cell.broke_at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
    });
    if let (Some(host), Some(object)) = (&cell.host, value.as_object_mut()) {
        object.insert("host".into(), json!(host.name));
        object.insert("host_version".into(), json!(host.version));
        object.insert("host_bin".into(), json!(host.bin));
        object.insert("host_startup_ms".into(), json!(host.startup_ms));
        object.insert("model_requests".into(), json!(host.model_requests));
        object.insert("tool_result_ms".into(), json!(host.tool_result_ms));
        object.insert("rescue_ms".into(), json!(host.rescue_ms));
        object.insert(
            "rescued_to_model_ms".into(),
            json!(host.rescued_to_model_ms),
        );
        object.insert(
            "tool_result_error".into(),
            json!(host.result.as_ref().map(|r| r.is_error)),
        );
        object.insert(
            "tool_result_text".into(),
            json!(host.result.as_ref().map(|r| r.text.clone())),
        );
    }
    value
}

/// A JUnit document: one test case per cell, a failure per defect.
pub fn junit(cells: &[CellResult], command: &str) -> String {
    let failures = cells
        .iter()
        .filter(|c| c.judgement.defect.is_some())
        .count();
    let skipped = skipped(cells) + inconclusive(cells);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mcpscope matrix\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
        cells.len(),
        escape(command),
        cells.len()
    );
    for cell in cells {
        let j = &cell.judgement;
        let seconds = cell.elapsed_ms as f64 / 1000.0;
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"mcpscope.matrix\" time=\"{seconds:.3}\"",
            escape(cell.case.name)
        );
        match (&j.defect, j.skipped.as_ref().or(j.inconclusive.as_ref())) {
            (None, Some(reason)) => {
                let _ = write!(
                    out,
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    escape(reason)
                );
            }
            (Some(defect), _) => {
                let _ = write!(
                    out,
                    ">\n      <failure message=\"{}\" type=\"{}\">{}: {}; expected: {}; reaction: {}\n{}</failure>\n    </testcase>\n",
                    escape(defect),
                    j.outcome.word(),
                    escape(cell.case.about),
                    j.outcome.word(),
                    escape(&j.expected),
                    reaction(j.reaction_ms),
                    escape(&cell.client.last_lines(LAST_LINES).join("\n"))
                );
            }
            (None, None) => out.push_str("/>\n"),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// A Markdown table for a bug report, with the mcpscope version and the client command.
pub fn markdown(cells: &[CellResult], command: &str) -> String {
    let mut out = format!(
        "mcpscope {} matrix of `{}`\n\n| case | what happens | outcome | reaction | expected | verdict |\n|---|---|---|---|---|---|\n",
        env!("CARGO_PKG_VERSION"),
        md_cell(command)
    );
    for cell in cells {
        let j = &cell.judgement;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell.case.name,
            md_cell(cell.case.about),
            j.outcome.word(),
            reaction(j.reaction_ms),
            md_cell(&j.expected),
            match &j.defect {
                Some(d) => format!("**{}**", md_cell(d)),
                None => md_cell(&j.verdict),
            }
        );
    }
    out
}
