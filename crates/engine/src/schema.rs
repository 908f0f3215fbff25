//! Schema checks of calls: a `tools/call`'s arguments against its tool's `inputSchema`, the
//! result's `structuredContent` against its `outputSchema` (and a result that lacks it), and an
//! accepted elicitation's `content` against the `requestedSchema` it answers. Validated by the
//! `jsonschema` crate (no references are fetched), off the forwarding path: a view or a check
//! asks for one call when it needs it.
//!
//! The dialect: a schema's own `$schema` when it has one; otherwise JSON Schema 2020-12 from
//! revision 2025-11-25 on (its "JSON Schema Usage" section makes 2020-12 the default, as do
//! later revisions) and draft-07 for older revisions, which name none (their schema is
//! published as draft-07).
//!
//! A server writes the schemas, so each is costed before it is compiled and each value before
//! it is checked ([`budget`]): a schema whose references loop on one value, that fans out past
//! a million evaluations, or that is too large or deep is not checked, and the check says so
//! once as an [`UNCHECKED`] finding instead of taking the process down.

mod budget;

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::{Draft, Validator};
use serde_json::Value;

use crate::event::Direction;
use crate::model::{Body, Call, Model, Notice, Verdict, What};

/// The first revision whose schemas default to JSON Schema 2020-12.
pub const FIRST_2020_12: &str = "2025-11-25";

/// What a violation is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// A `tools/call`'s `arguments` against the tool's `inputSchema`.
    Input,
    /// A `tools/call` result's `structuredContent` against the tool's `outputSchema`.
    Output,
    /// An accepted elicitation's `content` against its `requestedSchema`.
    Elicitation,
}

impl Side {
    /// `input`, `output`, `elicitation`.
    pub fn word(self) -> &'static str {
        match self {
            Side::Input => "input",
            Side::Output => "output",
            Side::Elicitation => "elicitation",
        }
    }

    /// The member of the message that was checked.
    pub fn instance(self) -> &'static str {
        match self {
            Side::Input => "arguments",
            Side::Output => "structuredContent",
            Side::Elicitation => "content",
        }
    }
}

/// One way a call breaks a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What was checked.
    pub side: Side,
    /// Where in the checked value (`$` for the value itself, `$.address.zip`, `$.items[2]`).
    pub path: String,
    /// The schema keyword that failed (`type`, `required`, …; `outputSchema` for a missing
    /// `structuredContent`, `$schema` for a schema that cannot be compiled).
    pub keyword: String,
    /// The validator's message.
    pub message: String,
}

/// The keyword of the finding that says a schema (or one value against it) was not checked,
/// and why: it would cost more than the budget allows.
pub const UNCHECKED: &str = "unchecked";

impl Violation {
    /// Whether this says the schema was not checked (rather than that the value breaks it).
    pub fn is_unchecked(&self) -> bool {
        self.keyword == UNCHECKED
    }

    fn unchecked(side: Side, why: String) -> Self {
        Violation {
            side,
            path: "$".to_string(),
            keyword: UNCHECKED.to_string(),
            message: format!("schema not checked: {why}"),
        }
    }

    /// `arguments $.text: type: 7 is not of type "string"`.
    pub fn text(&self) -> String {
        format!(
            "{} {}: {}: {}",
            self.side.instance(),
            self.path,
            self.keyword,
            self.message
        )
    }
}

/// A schema as the cache keeps it.
#[derive(Clone)]
enum Compiled {
    /// Ready to check values, with what checking one costs.
    Ready(Arc<Validator>, Arc<budget::Budget>),
    /// Past the budget: why it is not checked.
    Refused(String),
    /// The validator cannot compile it: its message.
    Broken(String),
}

/// Compiled schemas, each once per definition text and dialect: keep one for as long as the
/// calls it checks (a view keeps it across frames).
#[derive(Default)]
pub struct Checker {
    cache: HashMap<(Draft, Body), Compiled>,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("compiled", &self.cache.len())
            .finish()
    }
}

/// The dialect a schema without `$schema` has in `revision` (unknown: the latest rule).
pub fn default_draft(revision: Option<&str>) -> Draft {
    match revision {
        Some(r) if r.len() == 10 && r < FIRST_2020_12 => Draft::Draft7,
        _ => Draft::Draft202012,
    }
}

impl Checker {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many distinct schemas were compiled.
    pub fn compiled(&self) -> usize {
        self.cache.len()
    }

    fn validator(&mut self, schema: &Value, revision: Option<&str>) -> Compiled {
        let own = schema.get("$schema").is_some();
        let draft = default_draft(revision);
        let key = (draft, Body::new(schema));
        if let Some(found) = self.cache.get(&key) {
            return found.clone();
        }
        let compiled = match budget::plan(schema) {
            Err(why) => Compiled::Refused(why),
            Ok(cost) => {
                let mut options = jsonschema::options();
                if !own {
                    options.with_draft(draft);
                }
                match options.build(schema) {
                    Ok(validator) => Compiled::Ready(Arc::new(validator), Arc::new(cost)),
                    Err(e) => Compiled::Broken(e.to_string()),
                }
            }
        };
        self.cache.insert(key, compiled.clone());
        compiled
    }

    fn validate(
        &mut self,
        side: Side,
        schema: &Value,
        instance: &Value,
        revision: Option<&str>,
        out: &mut Vec<Violation>,
    ) {
        match self.validator(schema, revision) {
            Compiled::Ready(_, cost) if cost.steps(instance).is_err() => {
                out.push(Violation::unchecked(
                    side,
                    format!(
                        "checking this {} would take more than {} evaluations",
                        side.instance(),
                        budget::MAX_STEPS
                    ),
                ));
            }
            Compiled::Refused(why) => out.push(Violation::unchecked(side, why)),
            Compiled::Ready(validator, _) => {
                for error in validator.iter_errors(instance) {
                    let keyword = error
                        .schema_path
                        .as_str()
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    out.push(Violation {
                        side,
                        path: json_path(error.instance_path.as_str()),
                        keyword,
                        message: error.to_string(),
                    });
                }
            }
            Compiled::Broken(error) => out.push(Violation {
                side,
                path: "$".to_string(),
                keyword: "$schema".to_string(),
                message: format!("the schema cannot be used: {error}"),
            }),
        }
    }

    /// Every violation of one call (none for calls without a schema to check, or whose detail
    /// a compact model no longer holds).
    pub fn check(&mut self, model: &Model, call: &Call) -> Vec<Violation> {
        let mut out = Vec::new();
        let revision = call.revision.as_deref();
        match (call.dir, &*call.method) {
            (Direction::ClientToServer, "tools/call") => {
                let Some(definition) = call
                    .tool
                    .as_ref()
                    .and_then(|tool| model.tool_info(call.session, tool))
                    .and_then(|info| info.definition.as_ref())
                    .map(Body::value)
                else {
                    return out;
                };
                if call.evicted.is_some() {
                    return out;
                }
                if let Some(schema) = definition.get("inputSchema") {
                    let arguments = call
                        .params()
                        .get("arguments")
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Default::default()));
                    self.validate(Side::Input, schema, &arguments, revision, &mut out);
                }
                if let Some(schema) = definition.get("outputSchema")
                    && call.verdict == Verdict::Answered
                    && !call.tool_error
                    && !call.input_required
                    && let Some(result) = call.response()
                {
                    match result.get("structuredContent") {
                        Some(content) => {
                            self.validate(Side::Output, schema, content, revision, &mut out)
                        }
                        None => out.push(Violation {
                            side: Side::Output,
                            path: "$".to_string(),
                            keyword: "outputSchema".to_string(),
                            message: "the result has no structuredContent, though the tool \
                                      declares an outputSchema"
                                .to_string(),
                        }),
                    }
                }
            }
            (Direction::ServerToClient, "elicitation/create") => {
                if call.verdict != Verdict::Answered {
                    return out;
                }
                let Some(schema) = call.params().get("requestedSchema").cloned() else {
                    return out;
                };
                let Some(result) = call.response() else {
                    return out;
                };
                if result.get("action").and_then(Value::as_str) != Some("accept") {
                    return out;
                }
                let content = result
                    .get("content")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default()));
                self.validate(Side::Elicitation, &schema, &content, revision, &mut out);
            }
            _ => {}
        }
        out
    }
}

/// Unchecked schemas remembered as said, at most (past it the memory starts over).
const MAX_SAID: usize = 4_096;

/// Schema checks as calls happen, for the views that print each fact once (headless lines and
/// JSON, live and replayed): a `tools/call`'s arguments when it starts, its result when it is
/// answered, an elicitation's content when the client accepts. Give it to
/// [`Model::apply_inspected`], which shows it the call before the retention policy compacts it.
#[derive(Debug, Default)]
pub struct Watch {
    checker: Checker,
    /// The unchecked schemas already said (tool, side, why): each is said once.
    unchecked_said: std::collections::HashSet<(Option<String>, Side, String)>,
}

impl Watch {
    /// A watch with an empty schema cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The [`What::SchemaViolation`] notices that `notices` (just returned by the fold) bring.
    pub fn notices(&mut self, model: &Model, notices: &[Notice]) -> Vec<Notice> {
        let mut out = Vec::new();
        for notice in notices {
            let (call, sides): (_, &[Side]) = match &notice.what {
                What::CallStarted { call, .. } if call.method == "tools/call" => {
                    (call, &[Side::Input])
                }
                What::CallAnswered { call, .. } if call.method == "tools/call" => {
                    (call, &[Side::Output])
                }
                What::ServerRequestAnswered { call, .. } if call.method == "elicitation/create" => {
                    (call, &[Side::Elicitation])
                }
                _ => continue,
            };
            let Some(found) = model.call_by_ref(call) else {
                continue;
            };
            for violation in self.checker.check(model, found) {
                if !sides.contains(&violation.side) {
                    continue;
                }
                if violation.is_unchecked() {
                    let key = (
                        found.tool.as_deref().map(str::to_string),
                        violation.side,
                        violation.message.clone(),
                    );
                    // A server that lists ever new tools cannot grow what is remembered without limit.
                    if self.unchecked_said.len() >= MAX_SAID {
                        self.unchecked_said.clear();
                    }
                    if self.unchecked_said.insert(key) {
                        out.push(Notice {
                            t: notice.t,
                            server: notice.server.clone(),
                            what: What::SchemaUnchecked {
                                call: call.clone(),
                                side: violation.side.word(),
                                message: violation.message,
                            },
                        });
                    }
                } else {
                    out.push(Notice {
                        t: notice.t,
                        server: notice.server.clone(),
                        what: What::SchemaViolation {
                            call: call.clone(),
                            side: violation.side.word(),
                            member: violation.side.instance(),
                            path: violation.path,
                            keyword: violation.keyword,
                            message: violation.message,
                        },
                    });
                }
            }
        }
        out
    }
}

/// A JSON pointer (`/address/zip`, `/items/2`) as a path from `$` (`$.address.zip`,
/// `$.items[2]`); names that are not plain words are quoted (`$["a b"]`).
pub fn json_path(pointer: &str) -> String {
    let mut out = String::from("$");
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else if !segment.is_empty()
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            out.push('.');
            out.push_str(&segment);
        } else {
            out.push_str(&format!("[{}]", Value::String(segment)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_read_as_paths() {
        assert_eq!(json_path(""), "$");
        assert_eq!(json_path("/address/zip"), "$.address.zip");
        assert_eq!(json_path("/items/2"), "$.items[2]");
        assert_eq!(json_path("/a b/x~1y"), "$[\"a b\"][\"x/y\"]");
    }

    #[test]
    fn the_dialect_follows_the_revision_unless_the_schema_names_one() {
        assert_eq!(default_draft(Some("2025-06-18")), Draft::Draft7);
        assert_eq!(default_draft(Some("2025-11-25")), Draft::Draft202012);
        assert_eq!(default_draft(None), Draft::Draft202012);
        // `prefixItems` is a 2020-12 keyword: draft-07 ignores it.
        let schema = json!({"type": "array", "prefixItems": [{"type": "string"}]});
        let mut checker = Checker::new();
        let mut out = Vec::new();
        checker.validate(
            Side::Input,
            &schema,
            &json!([1]),
            Some("2025-11-25"),
            &mut out,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].path, "$[0]");
        assert_eq!(out[0].keyword, "type");
        out.clear();
        checker.validate(
            Side::Input,
            &schema,
            &json!([1]),
            Some("2025-06-18"),
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        let own = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "array", "prefixItems": [{"type": "string"}]});
        checker.validate(Side::Input, &own, &json!([1]), Some("2025-06-18"), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(checker.compiled(), 3);
    }
}
