//! `mcpscope diff`: what changed between two recordings (or a saved baseline and a recording):
//! the server's tools, resources, resource templates and prompts (added, removed, changed —
//! a changed definition shown as a JSON diff, annotations compared through their spec
//! defaults), its capabilities and the negotiated revision, and per tool the calls, error
//! rate, verdicts, latency percentiles and context cost (bytes of the definition).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use mcpscope_engine::event::Direction;
use mcpscope_engine::model::{Model, Verdict};
use serde_json::{Value, json};

use crate::describe::markdown_cell;
use crate::{Error, Folded, latency};

/// The `format` of a baseline file.
pub const BASELINE_FORMAT: &str = "mcpscope-baseline";
/// The baseline format's version.
pub const BASELINE_VERSION: u64 = 1;

/// The spec's defaults of tool annotations (MCP `ToolAnnotations`): an absent hint means this.
pub const ANNOTATION_DEFAULTS: [(&str, bool); 4] = [
    ("readOnlyHint", false),
    ("destructiveHint", true),
    ("idempotentHint", false),
    ("openWorldHint", true),
];

/// What a server offered in a recording, and how its tools did: one side of a diff (and what
/// a baseline file holds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// Where it came from (the recording's or baseline's file name).
    pub source: String,
    /// The negotiated revision (the last `initialize` result's, or the last request's).
    pub revision: Option<String>,
    /// `serverInfo` as `name version`.
    pub server: Option<String>,
    /// The server's capabilities (the last `initialize` or `server/discover` result).
    pub capabilities: Option<Value>,
    /// Definitions by kind (`tools`, `resources`, `resourceTemplates`, `prompts`), by name
    /// (`uri`, `uriTemplate`); the last list seen wins. A kind never listed is absent (it is
    /// not compared: nothing says it was empty).
    pub lists: BTreeMap<String, BTreeMap<String, Value>>,
    /// Latency and counts per tool and method ([`latency::json`]).
    pub latency: Value,
}

/// The list methods, the member of their result and the key naming each entry.
const LISTS: [(&str, &str, &str); 4] = [
    ("tools/list", "tools", "name"),
    ("resources/list", "resources", "uri"),
    (
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    ),
    ("prompts/list", "prompts", "name"),
];

impl Catalog {
    /// What the model's calls show of the server.
    pub fn from_model(source: impl Into<String>, model: &Model) -> Self {
        let mut catalog = Catalog {
            source: source.into(),
            latency: latency::json(model),
            ..Default::default()
        };
        let mut pages: BTreeMap<&str, bool> = BTreeMap::new();
        for call in &model.calls {
            if call.dir != Direction::ClientToServer {
                continue;
            }
            if let Some(revision) = &call.revision {
                catalog.revision = Some(revision.to_string());
            }
            if call.verdict != Verdict::Answered {
                continue;
            }
            let Some(result) = call.response() else {
                continue;
            };
            match &*call.method {
                "initialize" | "server/discover" => {
                    if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                        catalog.revision = Some(v.to_string());
                    }
                    if let Some(caps) = result.get("capabilities") {
                        catalog.capabilities = Some(caps.clone());
                    }
                    if let Some(info) = result.get("serverInfo") {
                        let field = |k: &str| info.get(k).and_then(Value::as_str).unwrap_or("");
                        catalog.server = Some(
                            format!("{} {}", field("name"), field("version"))
                                .trim()
                                .into(),
                        );
                    }
                }
                method => {
                    let Some((_, member, key)) = LISTS.iter().find(|(m, _, _)| *m == method) else {
                        continue;
                    };
                    let Some(entries) = result.get(*member).and_then(Value::as_array) else {
                        continue;
                    };
                    let list = catalog.lists.entry(member.to_string()).or_default();
                    // A first page (no cursor asked) starts the list afresh; later pages add.
                    let first_page = call.params().get("cursor").is_none();
                    if first_page && pages.insert(member, true).is_some() {
                        list.clear();
                    }
                    for entry in entries {
                        if let Some(name) = entry.get(*key).and_then(Value::as_str) {
                            list.insert(name.to_string(), entry.clone());
                        }
                    }
                }
            }
        }
        catalog
    }

    /// A folded recording's catalog.
    pub fn from_folded(source: impl Into<String>, folded: &Folded) -> Self {
        Self::from_model(source, &folded.model)
    }

    /// The baseline file's JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "format": BASELINE_FORMAT,
            "version": BASELINE_VERSION,
            "source": self.source,
            "revision": self.revision,
            "server": self.server,
            "capabilities": self.capabilities,
            "lists": self.lists,
            "latency": self.latency,
        })
    }

    /// A baseline file read back; anything else is a usage error naming the file.
    pub fn from_json(file: &str, value: &Value) -> Result<Self, Error> {
        let bad = |why: &str| Error::Usage(format!("{file}: not an mcpscope baseline ({why})"));
        if value.get("format").and_then(Value::as_str) != Some(BASELINE_FORMAT) {
            return Err(bad("no \"format\": \"mcpscope-baseline\""));
        }
        match value.get("version").and_then(Value::as_u64) {
            Some(BASELINE_VERSION) => {}
            Some(v) => return Err(bad(&format!("version {v}; this mcpscope reads version 1"))),
            None => return Err(bad("no version")),
        }
        let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
        let mut lists = BTreeMap::new();
        if let Some(Value::Object(kinds)) = value.get("lists") {
            for (kind, entries) in kinds {
                let Value::Object(entries) = entries else {
                    return Err(bad(&format!("lists.{kind} is not an object")));
                };
                lists.insert(
                    kind.clone(),
                    entries
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                );
            }
        }
        Ok(Catalog {
            source: file.to_string(),
            revision: text("revision"),
            server: text("server"),
            capabilities: value.get("capabilities").filter(|v| !v.is_null()).cloned(),
            lists,
            latency: value.get("latency").cloned().unwrap_or(Value::Null),
        })
    }

    /// Bytes of each tool's definition as compact JSON: what a host puts into a model's context.
    pub fn context_cost(&self) -> BTreeMap<String, usize> {
        self.lists
            .get("tools")
            .map(|tools| {
                tools
                    .iter()
                    .map(|(name, def)| (name.clone(), def.to_string().len()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// One difference inside two JSON values.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// JSON pointer of what changed (`` for the whole value).
    pub pointer: String,
    /// Before (`None`: added).
    pub before: Option<Value>,
    /// After (`None`: removed).
    pub after: Option<Value>,
}

/// The leaf differences between two JSON values: objects member by member, arrays of equal
/// length item by item, anything else as a whole.
pub fn json_diff(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", before, after, &mut out);
    out
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn walk(at: &str, before: &Value, after: &Value, out: &mut Vec<Change>) {
    if before == after {
        return;
    }
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let here = format!("{at}/{}", escape(key));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => walk(&here, x, y, out),
                    (x, y) => out.push(Change {
                        pointer: here,
                        before: x.cloned(),
                        after: y.cloned(),
                    }),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{at}/{i}"), x, y, out);
            }
        }
        _ => out.push(Change {
            pointer: at.to_string(),
            before: Some(before.clone()),
            after: Some(after.clone()),
        }),
    }
}

/// A tool's annotations with every spec default filled in (so an absent `readOnlyHint`
/// compares equal to `false`).
pub fn effective_annotations(definition: &Value) -> Value {
    let mut annotations = match definition.get("annotations") {
        Some(Value::Object(map)) => map.clone(),
        _ => serde_json::Map::new(),
    };
    for (key, default) in ANNOTATION_DEFAULTS {
        annotations
            .entry(key.to_string())
            .or_insert(Value::Bool(default));
    }
    Value::Object(annotations)
}

/// How one definition changed, by its top-level member (`inputSchema`, `description`,
/// `annotations`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    /// The kind (`tools`, `resources`, `resourceTemplates`, `prompts`).
    pub kind: String,
    /// Its name, URI or template.
    pub name: String,
    /// Each changed member with its JSON diff.
    pub members: BTreeMap<String, Vec<Change>>,
}

/// Everything that differs between two catalogs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    /// Definitions only in B, by kind.
    pub added: Vec<(String, String)>,
    /// Definitions only in A, by kind.
    pub removed: Vec<(String, String)>,
    /// Definitions in both that differ.
    pub changed: Vec<Changed>,
    /// The negotiated revision, when it differs.
    pub revision: Option<(Option<String>, Option<String>)>,
    /// The server (name and version), when it differs.
    pub server: Option<(Option<String>, Option<String>)>,
    /// The capabilities' differences.
    pub capabilities: Vec<Change>,
    /// Kinds listed on one side only (`tools`, `A`): not compared, since the other recording
    /// never asked.
    pub unlisted: Vec<(String, &'static str)>,
}

impl Diff {
    /// Whether anything the server offers changed (what `--exit-code` fails on): definitions,
    /// capabilities or revision. A new server version alone, latency and counts are not drift.
    pub fn drift(&self) -> bool {
        !self.added.is_empty()
            || !self.removed.is_empty()
            || !self.changed.is_empty()
            || self.revision.is_some()
            || !self.capabilities.is_empty()
    }
}

/// Compares two catalogs.
pub fn compare(a: &Catalog, b: &Catalog) -> Diff {
    let mut diff = Diff::default();
    let kinds: BTreeSet<&String> = a.lists.keys().chain(b.lists.keys()).collect();
    for kind in kinds {
        let (before, after) = match (a.lists.get(kind), b.lists.get(kind)) {
            (Some(x), Some(y)) => (x, y),
            (Some(_), None) => {
                diff.unlisted.push((kind.clone(), "B"));
                continue;
            }
            _ => {
                diff.unlisted.push((kind.clone(), "A"));
                continue;
            }
        };
        for name in before.keys().filter(|n| !after.contains_key(*n)) {
            diff.removed.push((kind.clone(), name.clone()));
        }
        for name in after.keys().filter(|n| !before.contains_key(*n)) {
            diff.added.push((kind.clone(), name.clone()));
        }
        for (name, x) in before {
            let Some(y) = after.get(name) else { continue };
            let mut members = BTreeMap::new();
            let keys: BTreeSet<&String> = x
                .as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .chain(y.as_object().into_iter().flat_map(|o| o.keys()))
                .collect();
            for key in keys {
                let (u, v) = if kind == "tools" && key == "annotations" {
                    (effective_annotations(x), effective_annotations(y))
                } else {
                    (
                        x.get(key).cloned().unwrap_or(Value::Null),
                        y.get(key).cloned().unwrap_or(Value::Null),
                    )
                };
                let changes = match (x.get(key), y.get(key)) {
                    (Some(_), None) | (None, Some(_)) if key != "annotations" => vec![Change {
                        pointer: String::new(),
                        before: x.get(key).cloned(),
                        after: y.get(key).cloned(),
                    }],
                    _ => json_diff(&u, &v),
                };
                if !changes.is_empty() {
                    members.insert(key.clone(), changes);
                }
            }
            if !members.is_empty() {
                diff.changed.push(Changed {
                    kind: kind.clone(),
                    name: name.clone(),
                    members,
                });
            }
        }
    }
    // What one side never saw is unknown there, not changed.
    if a.revision.is_some() && b.revision.is_some() && a.revision != b.revision {
        diff.revision = Some((a.revision.clone(), b.revision.clone()));
    }
    if a.server.is_some() && b.server.is_some() && a.server != b.server {
        diff.server = Some((a.server.clone(), b.server.clone()));
    }
    if let (Some(x), Some(y)) = (&a.capabilities, &b.capabilities) {
        diff.capabilities = json_diff(x, y);
    }
    diff
}

/// The singular of a kind, for text.
fn singular(kind: &str) -> &str {
    match kind {
        "tools" => "tool",
        "resources" => "resource",
        "resourceTemplates" => "resource template",
        "prompts" => "prompt",
        other => other,
    }
}

fn show(value: &Option<Value>) -> String {
    match value {
        Some(v) => v.to_string(),
        None => "(absent)".to_string(),
    }
}

fn change_line(change: &Change) -> String {
    let at = if change.pointer.is_empty() {
        "(whole)"
    } else {
        &change.pointer
    };
    change_at(change, at)
}

/// `+ AT: after`, `- AT: before`, `~ AT: before → after`.
fn change_at(change: &Change, at: &str) -> String {
    match (&change.before, &change.after) {
        (None, Some(after)) => format!("+ {at}: {after}"),
        (Some(before), None) => format!("- {at}: {before}"),
        _ => format!("~ {at}: {} → {}", show(&change.before), show(&change.after)),
    }
}

fn opt(text: &Option<String>) -> &str {
    text.as_deref().unwrap_or("(unknown)")
}

/// The per-tool rows of both sides: calls, error rate, p50/p95/p99 and context bytes.
fn tool_rows(a: &Catalog, b: &Catalog) -> Vec<(String, [String; 2])> {
    let cost = [a.context_cost(), b.context_cost()];
    let tools: BTreeSet<String> = [a, b]
        .iter()
        .flat_map(|c| {
            c.lists
                .get("tools")
                .into_iter()
                .flat_map(|t| t.keys().cloned())
                .chain(
                    c.latency
                        .get("tools")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flat_map(|t| t.keys().cloned()),
                )
        })
        .collect();
    tools
        .into_iter()
        .map(|tool| {
            let side = |i: usize, c: &Catalog| {
                let bytes = cost[i]
                    .get(&tool)
                    .map_or("–".to_string(), |n| format!("{n} B"));
                match c.latency.pointer(&format!("/tools/{}", escape(&tool))) {
                    Some(row) => format!(
                        "{} calls ({}), {}% errors, p50/p95/p99 {}/{}/{} ms, {bytes}",
                        row["count"],
                        row["verdicts"]
                            .as_object()
                            .map(|v| v
                                .iter()
                                .map(|(k, n)| format!("{n} {k}"))
                                .collect::<Vec<_>>()
                                .join(", "))
                            .unwrap_or_default(),
                        (row["error_rate"].as_f64().unwrap_or(0.0) * 100.0).round(),
                        num(&row["p50_ms"]),
                        num(&row["p95_ms"]),
                        num(&row["p99_ms"]),
                    ),
                    None => format!("0 calls, {bytes}"),
                }
            };
            let sides = [side(0, a), side(1, b)];
            (tool, sides)
        })
        .collect()
}

fn num(v: &Value) -> String {
    v.as_f64().map_or("–".to_string(), |f| format!("{f:.1}"))
}

/// The text report.
pub fn text(a: &Catalog, b: &Catalog, diff: &Diff) -> String {
    let mut out = format!(
        "mcpscope diff {} → {}: {}\n",
        a.source,
        b.source,
        if diff.drift() { "DRIFT" } else { "no drift" }
    );
    if let Some((x, y)) = &diff.revision {
        out.push_str(&format!("  revision: {} → {}\n", opt(x), opt(y)));
    }
    if let Some((x, y)) = &diff.server {
        out.push_str(&format!("  server: {} → {}\n", opt(x), opt(y)));
    }
    if !diff.capabilities.is_empty() {
        out.push_str("  capabilities changed:\n");
        for change in &diff.capabilities {
            out.push_str(&format!("    {}\n", change_line(change)));
        }
    }
    for (kind, side) in &diff.unlisted {
        out.push_str(&format!(
            "  {kind}: never listed in {side} (not compared)\n"
        ));
    }
    for (kind, name) in &diff.added {
        out.push_str(&format!("  + {} {name} (added)\n", singular(kind)));
    }
    for (kind, name) in &diff.removed {
        out.push_str(&format!("  - {} {name} (removed)\n", singular(kind)));
    }
    for changed in &diff.changed {
        out.push_str(&format!(
            "  ~ {} {} changed: {}\n",
            singular(&changed.kind),
            changed.name,
            changed
                .members
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for (member, changes) in &changed.members {
            out.push_str(&format!("      {member}:\n"));
            for change in changes {
                out.push_str(&format!("        {}\n", change_line(change)));
            }
        }
    }
    let rows = tool_rows(a, b);
    if !rows.is_empty() {
        out.push_str("  tools (A | B):\n");
        for (tool, [x, y]) in rows {
            out.push_str(&format!("    {tool}: {x} | {y}\n"));
        }
    }
    let total = |c: &Catalog| match c.lists.get("tools") {
        Some(_) => format!("{} B", c.context_cost().values().sum::<usize>()),
        None => "(not listed)".to_string(),
    };
    out.push_str(&format!(
        "  context cost of tool definitions: {} → {}\n",
        total(a),
        total(b)
    ));
    out
}

fn change_json(change: &Change) -> Value {
    json!({ "pointer": change.pointer, "before": change.before, "after": change.after })
}

/// The report as one JSON object.
pub fn json_report(a: &Catalog, b: &Catalog, diff: &Diff) -> Value {
    let pair = |p: &Option<(Option<String>, Option<String>)>| {
        p.as_ref().map(|(x, y)| json!({ "before": x, "after": y }))
    };
    let named = |list: &[(String, String)]| -> Vec<Value> {
        list.iter()
            .map(|(kind, name)| json!({ "kind": kind, "name": name }))
            .collect()
    };
    let changed: Vec<Value> = diff
        .changed
        .iter()
        .map(|c| {
            let members: serde_json::Map<String, Value> = c
                .members
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().map(change_json).collect()))
                .collect();
            json!({ "kind": c.kind, "name": c.name, "members": members })
        })
        .collect();
    let cost = |c: &Catalog| json!(c.context_cost());
    json!({
        "a": a.source,
        "b": b.source,
        "drift": diff.drift(),
        "added": named(&diff.added),
        "removed": named(&diff.removed),
        "changed": changed,
        "revision": pair(&diff.revision),
        "server": pair(&diff.server),
        "capabilities": diff.capabilities.iter().map(change_json).collect::<Vec<_>>(),
        "unlisted": diff.unlisted.iter().map(|(kind, side)| json!({ "kind": kind, "missing_in": side })).collect::<Vec<_>>(),
        "context_bytes": { "a": cost(a), "b": cost(b) },
        "latency": { "a": a.latency, "b": b.latency },
    })
}

/// The report as Markdown: a summary, each change with its JSON diff, the per-tool table.
pub fn markdown(a: &Catalog, b: &Catalog, diff: &Diff) -> String {
    let mut out = format!(
        "# mcpscope diff\n\n`{}` → `{}`: **{}**\n\n",
        markdown_cell(&a.source),
        markdown_cell(&b.source),
        if diff.drift() { "drift" } else { "no drift" }
    );
    if let Some((x, y)) = &diff.revision {
        out.push_str(&format!("- revision: `{}` → `{}`\n", opt(x), opt(y)));
    }
    if let Some((x, y)) = &diff.server {
        out.push_str(&format!("- server: `{}` → `{}`\n", opt(x), opt(y)));
    }
    for (kind, side) in &diff.unlisted {
        out.push_str(&format!(
            "- {kind}: never listed in {side} (not compared)\n"
        ));
    }
    for (kind, name) in &diff.added {
        out.push_str(&format!("- added {} `{name}`\n", singular(kind)));
    }
    for (kind, name) in &diff.removed {
        out.push_str(&format!("- removed {} `{name}`\n", singular(kind)));
    }
    let mut blocks = String::new();
    if !diff.capabilities.is_empty() {
        blocks.push_str("\n## capabilities\n\n```diff\n");
        for change in &diff.capabilities {
            blocks.push_str(&format!("{}\n", change_line(change)));
        }
        blocks.push_str("```\n");
    }
    for changed in &diff.changed {
        out.push_str(&format!(
            "- changed {} `{}`: {}\n",
            singular(&changed.kind),
            changed.name,
            changed
                .members
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
        blocks.push_str(&format!(
            "\n## {} `{}`\n\n```diff\n",
            singular(&changed.kind),
            changed.name
        ));
        for (member, changes) in &changed.members {
            for change in changes {
                let line = change_at(change, &format!("{member}{}", change.pointer));
                // A `diff` block colours `+` and `-` lines; `!` marks a value replaced.
                blocks.push_str(&line.replacen('~', "!", 1));
                blocks.push('\n');
            }
        }
        blocks.push_str("```\n");
    }
    out.push_str(&blocks);
    let rows = tool_rows(a, b);
    if !rows.is_empty() {
        out.push_str("\n## tools\n\n| tool | A | B |\n|---|---|---|\n");
        for (tool, [x, y]) in rows {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                markdown_cell(&tool),
                markdown_cell(&x),
                markdown_cell(&y)
            ));
        }
    }
    out
}

/// What `mcpscope diff` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The recordings (one with `baseline` or `save_baseline`, else two).
    pub files: Vec<PathBuf>,
    /// Compare against this baseline instead of a first recording.
    pub baseline: Option<PathBuf>,
    /// Write the (one) recording's baseline here instead of comparing.
    pub save_baseline: Option<PathBuf>,
    /// One JSON object instead of text.
    pub json: bool,
    /// Markdown instead of text.
    pub markdown: bool,
}

fn read_baseline(path: &Path) -> Result<Catalog, Error> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Usage(format!("--baseline {name}: {e}")))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| Error::Usage(format!("{name}: not JSON ({e})")))?;
    Catalog::from_json(&name, &value)
}

/// Runs a diff (or saves a baseline); returns whether the server drifted.
pub fn run(options: &Options, out: &mut dyn Write, warn: &mut dyn Write) -> Result<bool, Error> {
    if options.json && options.markdown {
        return Err(Error::Usage(
            "--json and --markdown exclude each other".into(),
        ));
    }
    let catalog = |path: &PathBuf, warn: &mut dyn Write| -> Result<Catalog, Error> {
        let folded = crate::load(path, warn)?;
        Ok(Catalog::from_folded(path.display().to_string(), &folded))
    };
    if let Some(save) = &options.save_baseline {
        if options.baseline.is_some() {
            return Err(Error::Usage(
                "--save-baseline and --baseline exclude each other".into(),
            ));
        }
        let [file] = options.files.as_slice() else {
            return Err(Error::Usage(
                "diff --save-baseline FILE takes one recording".into(),
            ));
        };
        let saved = catalog(file, warn)?;
        let mut text = serde_json::to_string_pretty(&saved.to_json())
            .map_err(|e| Error::Usage(e.to_string()))?;
        text.push('\n');
        mcpscope_engine::record::write_private(save, &text)
            .map_err(|e| Error::Usage(format!("--save-baseline {}: {e}", save.display())))?;
        writeln!(
            out,
            "saved the baseline of {} ({} tools, {} resources, {} resource templates, {} prompts) to {}",
            saved.source,
            saved.lists.get("tools").map_or(0, BTreeMap::len),
            saved.lists.get("resources").map_or(0, BTreeMap::len),
            saved
                .lists
                .get("resourceTemplates")
                .map_or(0, BTreeMap::len),
            saved.lists.get("prompts").map_or(0, BTreeMap::len),
            save.display()
        )?;
        return Ok(false);
    }
    let (a, b) = match (&options.baseline, options.files.as_slice()) {
        (Some(baseline), [file]) => (read_baseline(baseline)?, catalog(file, warn)?),
        (Some(_), _) => {
            return Err(Error::Usage(
                "diff --baseline FILE takes one recording".into(),
            ));
        }
        (None, [first, second]) => (catalog(first, warn)?, catalog(second, warn)?),
        (None, _) => {
            return Err(Error::Usage(
                "diff takes two recordings (or one with --baseline FILE)".into(),
            ));
        }
    };
    let diff = compare(&a, &b);
    if options.json {
        serde_json::to_writer(&mut *out, &json_report(&a, &b, &diff))
            .map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else if options.markdown {
        out.write_all(markdown(&a, &b, &diff).as_bytes())?;
    } else {
        out.write_all(text(&a, &b, &diff).as_bytes())?;
    }
    Ok(diff.drift())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_compare_through_their_defaults() {
        let a = json!({"name": "t", "annotations": {"readOnlyHint": false}});
        let b = json!({"name": "t"});
        assert_eq!(effective_annotations(&a), effective_annotations(&b));
        let c = json!({"name": "t", "annotations": {"readOnlyHint": true}});
        let changes = json_diff(&effective_annotations(&a), &effective_annotations(&c));
        assert_eq!(
            changes,
            [Change {
                pointer: "/readOnlyHint".into(),
                before: Some(json!(false)),
                after: Some(json!(true))
            }]
        );
    }

    #[test]
    fn json_diffs_name_each_leaf() {
        let a =
            json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}});
        let b = json!({"type": "object", "required": ["a", "b"],
            "properties": {"a": {"type": "integer"}, "b": {}}});
        let pointers: Vec<String> = json_diff(&a, &b).into_iter().map(|c| c.pointer).collect();
        assert_eq!(
            pointers,
            ["/properties/a/type", "/properties/b", "/required"]
        );
    }
}
