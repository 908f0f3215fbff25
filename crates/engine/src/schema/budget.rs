//! What a schema may cost before the validator sees it. A server writes its tools' schemas, so a
//! schema is hostile input: a `$ref` cycle that never descends into the value (`a → b → a`)
//! makes the validator compile copies of itself for ever, and thirty levels of
//! `anyOf: [{$ref: prev}, {$ref: prev}]` ask for 2³⁰ evaluations of one value. Both took the
//! whole proxy down. This module reads a schema as a graph of subschemas before it is compiled
//! and counts, for each value checked, how many (subschema, part of the value) evaluations the
//! validator could make at most; a schema or a value past the budget is not checked, and the
//! caller says why.
//!
//! The count is an upper bound of the validator's work: every applicator is taken as applied
//! (every `patternProperties` pattern to every member, both branches of an `if`), and a member
//! of the value is counted once for each path of subschemas that reaches it. It is computed in
//! time and memory proportional to (subschemas × parts of the value), never to the count.

use std::collections::HashMap;

use serde_json::Value;

/// At most this many subschemas (objects and booleans in schema position) in one schema.
pub(crate) const MAX_SUBSCHEMAS: usize = 10_000;
/// At most this deep a schema document nests.
pub(crate) const MAX_DEPTH: usize = 128;
/// At most this many evaluations to check one value (and, before compiling, one member).
pub(crate) const MAX_STEPS: u64 = 1_000_000;

/// Keywords whose schema applies to the value itself.
const IN_PLACE_ONE: &[&str] = &["not", "if", "then", "else"];
/// Keywords whose array of schemas applies to the value itself.
const IN_PLACE_MANY: &[&str] = &["allOf", "anyOf", "oneOf"];
/// Keywords whose map of schemas applies to the value itself.
const IN_PLACE_MAP: &[&str] = &["dependentSchemas", "dependencies"];
/// Keywords whose schema applies to each member of an object.
const EACH_MEMBER: &[&str] = &["additionalProperties", "unevaluatedProperties"];
/// Keywords whose schema applies to each item of an array.
const EACH_ITEM: &[&str] = &["additionalItems", "unevaluatedItems", "contains"];
/// Keywords that hold subschemas only to be referred to.
const DEFINITIONS: &[&str] = &["$defs", "definitions"];
/// Keywords whose schemas apply to something other than the value (ignored by the count, still
/// read for anchors and size).
const ELSEWHERE: &[&str] = &["contentSchema"];

/// One subschema and where its keywords lead.
#[derive(Debug, Default)]
struct Node {
    /// Subschemas applied to the same value (applicators and resolved references).
    in_place: Vec<usize>,
    /// `properties`: a member's own subschema.
    named: Vec<(String, usize)>,
    /// Subschemas applied to every member of an object (`patternProperties` taken as matching
    /// every member, `additionalProperties`, `unevaluatedProperties`).
    each_member: Vec<usize>,
    /// Subschemas applied to each member's name.
    names: Vec<usize>,
    /// Positional item subschemas (`prefixItems`, draft-07 array `items`).
    positional: Vec<usize>,
    /// Subschemas applied to every item.
    each_item: Vec<usize>,
}

/// A schema read as a graph, ready to count what checking a value costs.
#[derive(Debug)]
pub(crate) struct Budget {
    nodes: Vec<Node>,
}

/// Reads `schema` as a graph, or says why it will not be checked.
pub(crate) fn plan(schema: &Value) -> Result<Budget, String> {
    let mut reader = Reader::default();
    reader.scan(schema, schema, 0)?;
    reader.node(schema)?;
    while let Some((value, index)) = reader.pending.pop() {
        reader.link(value, index)?;
    }
    let budget = Budget {
        nodes: reader.nodes,
    };
    if let Some(cycle) = budget.in_place_cycle() {
        return Err(format!(
            "its references loop back to the same value without descending into it ({cycle})"
        ));
    }
    // The fan-out of one member: what evaluating any single value costs, whatever its shape.
    let leaf = Value::Null;
    budget.steps(&leaf).map_err(|_| {
        format!(
            "its applicators fan out to more than {MAX_STEPS} evaluations of a single value \
             (nested anyOf/oneOf/allOf over the same references)"
        )
    })?;
    Ok(budget)
}

/// Builds the graph: each subschema indexed once by its address in the document.
#[derive(Default)]
struct Reader<'a> {
    nodes: Vec<Node>,
    index: HashMap<*const Value, usize>,
    /// Subschemas indexed but whose keywords are not linked yet.
    pending: Vec<(&'a Value, usize)>,
    /// `$anchor` and `$dynamicAnchor` names, wherever they are.
    anchors: HashMap<String, Vec<&'a Value>>,
    /// Subschemas with an `$id`, by that `$id` (without a trailing `#`).
    ids: HashMap<String, &'a Value>,
    /// The resource (the document, or the nearest enclosing subschema with an `$id`) each
    /// object of the document belongs to.
    resource_of: HashMap<*const Value, &'a Value>,
    /// How many values the document holds.
    size: usize,
}

impl<'a> Reader<'a> {
    /// Counts the document and finds its anchors, ids and resources.
    fn scan(&mut self, value: &'a Value, resource: &'a Value, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
        }
        self.size += 1;
        if self.size > MAX_SUBSCHEMAS * 8 {
            return Err(format!("it holds more than {} values", MAX_SUBSCHEMAS * 8));
        }
        match value {
            Value::Object(map) => {
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(Value::String(name)) = map.get(key) {
                        self.anchors.entry(name.clone()).or_default().push(value);
                    }
                }
                let mut resource = resource;
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = map.get(key) {
                        self.ids.insert(id.trim_end_matches('#').to_string(), value);
                        resource = value;
                    }
                }
                self.resource_of.insert(value as *const Value, resource);
                for child in map.values() {
                    self.scan(child, resource, depth + 1)?;
                }
            }
            Value::Array(items) => {
                for child in items {
                    self.scan(child, resource, depth + 1)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The index of a subschema, queued for linking when new.
    fn node(&mut self, value: &'a Value) -> Result<usize, String> {
        let key = value as *const Value;
        if let Some(&index) = self.index.get(&key) {
            return Ok(index);
        }
        if self.nodes.len() >= MAX_SUBSCHEMAS {
            return Err(format!("it has more than {MAX_SUBSCHEMAS} subschemas"));
        }
        let index = self.nodes.len();
        self.nodes.push(Node::default());
        self.index.insert(key, index);
        self.pending.push((value, index));
        Ok(index)
    }

    /// Links one subschema's keywords to the subschemas they apply.
    fn link(&mut self, value: &'a Value, index: usize) -> Result<(), String> {
        let Value::Object(map) = value else {
            return Ok(());
        };
        let Some(&resource) = self.resource_of.get(&(value as *const Value)) else {
            return Ok(());
        };
        let mut node = Node::default();
        for key in IN_PLACE_ONE {
            if let Some(child) = map.get(*key).filter(|c| is_schema(c)) {
                node.in_place.push(self.node(child)?);
            }
        }
        for key in IN_PLACE_MANY {
            if let Some(Value::Array(children)) = map.get(*key) {
                for child in children.iter().filter(|c| is_schema(c)) {
                    node.in_place.push(self.node(child)?);
                }
            }
        }
        for key in IN_PLACE_MAP {
            if let Some(Value::Object(children)) = map.get(*key) {
                for child in children.values().filter(|c| is_schema(c)) {
                    node.in_place.push(self.node(child)?);
                }
            }
        }
        for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(Value::String(reference)) = map.get(key) {
                for target in self.resolve(resource, reference)? {
                    node.in_place.push(self.node(target)?);
                }
            }
        }
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, child) in properties.iter().filter(|(_, c)| is_schema(c)) {
                node.named.push((name.clone(), self.node(child)?));
            }
        }
        if let Some(Value::Object(patterns)) = map.get("patternProperties") {
            for child in patterns.values().filter(|c| is_schema(c)) {
                node.each_member.push(self.node(child)?);
            }
        }
        for key in EACH_MEMBER {
            if let Some(child) = map.get(*key).filter(|c| is_schema(c)) {
                node.each_member.push(self.node(child)?);
            }
        }
        if let Some(child) = map.get("propertyNames").filter(|c| is_schema(c)) {
            node.names.push(self.node(child)?);
        }
        match map.get("items") {
            Some(Value::Array(children)) => {
                for child in children.iter().filter(|c| is_schema(c)) {
                    node.positional.push(self.node(child)?);
                }
            }
            Some(child) if is_schema(child) => node.each_item.push(self.node(child)?),
            _ => {}
        }
        if let Some(Value::Array(children)) = map.get("prefixItems") {
            for child in children.iter().filter(|c| is_schema(c)) {
                node.positional.push(self.node(child)?);
            }
        }
        for key in EACH_ITEM {
            if let Some(child) = map.get(*key).filter(|c| is_schema(c)) {
                node.each_item.push(self.node(child)?);
            }
        }
        for key in DEFINITIONS.iter().chain(ELSEWHERE) {
            match map.get(*key) {
                Some(Value::Object(children)) if DEFINITIONS.contains(key) => {
                    for child in children.values().filter(|c| is_schema(c)) {
                        self.node(child)?;
                    }
                }
                Some(child) if is_schema(child) => {
                    self.node(child)?;
                }
                _ => {}
            }
        }
        self.nodes[index] = node;
        Ok(())
    }

    /// The subschemas a reference may name: a JSON pointer or an anchor in its resource, or
    /// a resource of the document by `$id`. A reference to the published meta-schemas names
    /// nothing here (the validator ships them); any other reference outside the document
    /// stops the check (the validator fetches nothing, and cannot be trusted to find it).
    fn resolve(&self, resource: &'a Value, reference: &str) -> Result<Vec<&'a Value>, String> {
        let (location, fragment) = match reference.split_once('#') {
            Some((location, fragment)) => (location, fragment),
            None => (reference, ""),
        };
        let resource: &'a Value = if location.is_empty() {
            resource
        } else if let Some(found) = self.by_id(location) {
            found
        } else if location.starts_with("https://json-schema.org/")
            || location.starts_with("http://json-schema.org/")
        {
            return Ok(Vec::new());
        } else {
            return Err(format!(
                "it refers to {reference:?}, which is not in the schema"
            ));
        };
        if fragment.is_empty() {
            return Ok(vec![resource]);
        }
        if fragment.starts_with('/') {
            let pointer = percent_decode(fragment);
            return match resource.pointer(&pointer) {
                Some(target) => Ok(vec![target]),
                None => Err(format!(
                    "its reference {reference:?} points at nothing in the schema"
                )),
            };
        }
        match self.anchors.get(fragment) {
            Some(targets) => Ok(targets.clone()),
            None => Err(format!(
                "its reference {reference:?} names an anchor the schema does not have"
            )),
        }
    }

    /// A resource by its `$id`: the whole id, or its last path segment for a relative one.
    fn by_id(&self, location: &str) -> Option<&'a Value> {
        if let Some(found) = self.ids.get(location) {
            return Some(found);
        }
        let tail = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
        let wanted = tail(location);
        self.ids
            .iter()
            .find(|(id, _)| tail(id) == wanted)
            .map(|(_, v)| *v)
    }
}

/// Objects and booleans are schemas; anything else in schema position is ignored.
fn is_schema(value: &Value) -> bool {
    matches!(value, Value::Object(_) | Value::Bool(_))
}

/// A URI fragment's `%xx` escapes decoded.
fn percent_decode(fragment: &str) -> String {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && at + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[at + 1..at + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One (subschema, part of the value) pair still to count.
struct Frame<'v> {
    node: usize,
    value: &'v Value,
    /// Its children are counted: sum them.
    ready: bool,
}

impl Budget {
    /// A cycle of subschemas applied to the same value, as a path of subschema numbers.
    fn in_place_cycle(&self) -> Option<String> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let mut mark = vec![Mark::New; self.nodes.len()];
        for start in 0..self.nodes.len() {
            if mark[start] != Mark::New {
                continue;
            }
            // (node, next child to visit)
            let mut stack = vec![(start, 0usize)];
            mark[start] = Mark::Open;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&child) = self.nodes[node].in_place.get(*next) {
                    *next += 1;
                    match mark[child] {
                        Mark::New => {
                            mark[child] = Mark::Open;
                            stack.push((child, 0));
                        }
                        Mark::Open => {
                            let from = stack.iter().position(|(n, _)| *n == child).unwrap_or(0);
                            let path: Vec<String> = stack[from..]
                                .iter()
                                .map(|(n, _)| format!("#{n}"))
                                .chain(std::iter::once(format!("#{child}")))
                                .collect();
                            return Some(format!("subschemas {}", path.join(" → ")));
                        }
                        Mark::Done => {}
                    }
                } else {
                    mark[node] = Mark::Done;
                    stack.pop();
                }
            }
        }
        None
    }

    /// How many (subschema, part of `value`) evaluations checking `value` may take, or `Err`
    /// with the count reached once it passes [`MAX_STEPS`]. The graph has no in-place cycle.
    pub(crate) fn steps(&self, value: &Value) -> Result<u64, u64> {
        let mut counted: HashMap<(usize, *const Value), u64> = HashMap::new();
        let mut stack = vec![Frame {
            node: 0,
            value,
            ready: false,
        }];
        let mut children: Vec<(usize, &Value)> = Vec::new();
        while let Some(frame) = stack.pop() {
            let key = (frame.node, frame.value as *const Value);
            if counted.contains_key(&key) {
                continue;
            }
            children.clear();
            self.children(frame.node, frame.value, &mut children);
            if frame.ready {
                let mut total: u64 = 1;
                for (node, value) in &children {
                    let part = counted
                        .get(&(*node, *value as *const Value))
                        .copied()
                        .unwrap_or(MAX_STEPS + 1);
                    total = total.saturating_add(part);
                }
                if total > MAX_STEPS {
                    return Err(total);
                }
                counted.insert(key, total);
                if counted.len() as u64 > MAX_STEPS {
                    return Err(counted.len() as u64);
                }
            } else {
                stack.push(Frame {
                    ready: true,
                    ..frame
                });
                for &(node, value) in &children {
                    if !counted.contains_key(&(node, value as *const Value)) {
                        stack.push(Frame {
                            node,
                            value,
                            ready: false,
                        });
                    }
                }
            }
            if stack.len() as u64 > MAX_STEPS {
                return Err(stack.len() as u64);
            }
        }
        Ok(counted
            .get(&(0, value as *const Value))
            .copied()
            .unwrap_or(1))
    }

    /// The (subschema, part of the value) pairs one subschema applies.
    fn children<'v>(&self, node: usize, value: &'v Value, out: &mut Vec<(usize, &'v Value)>) {
        let node = &self.nodes[node];
        out.extend(node.in_place.iter().map(|&n| (n, value)));
        match value {
            Value::Object(members) => {
                for (name, member) in members {
                    for (named, n) in &node.named {
                        if named == name {
                            out.push((*n, member));
                        }
                    }
                    out.extend(node.each_member.iter().map(|&n| (n, member)));
                    // A member's name is a string: any leaf stands for it.
                    out.extend(node.names.iter().map(|&n| (n, &Value::Null)));
                }
            }
            Value::Array(items) => {
                for (at, item) in items.iter().enumerate() {
                    if let Some(&n) = node.positional.get(at) {
                        out.push((n, item));
                    }
                    out.extend(node.each_item.iter().map(|&n| (n, item)));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fan_out(levels: usize, keyword: &str) -> Value {
        let mut defs = serde_json::Map::new();
        defs.insert("l0".into(), json!({"type": "string"}));
        for level in 1..=levels {
            let prev = format!("#/$defs/l{}", level - 1);
            let body = if keyword == "not" {
                json!({"not": {"allOf": [{"$ref": prev}, {"$ref": prev}]}})
            } else {
                json!({keyword: [{"$ref": prev}, {"$ref": prev}]})
            };
            defs.insert(format!("l{level}"), body);
        }
        json!({"$defs": defs, "$ref": format!("#/$defs/l{levels}")})
    }

    #[test]
    fn a_reference_cycle_on_the_same_value_is_refused() {
        let schema = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a"});
        let why = plan(&schema).expect_err("refused");
        assert!(why.contains("loop back"), "{why}");
        let itself = json!({"$ref": "#"});
        assert!(plan(&itself).is_err());
        let anchor = json!({"$defs": {"x": {"$anchor": "x", "anyOf": [{"$ref": "#x"}]}},
            "$ref": "#x"});
        assert!(plan(&anchor).is_err());
    }

    #[test]
    fn exponential_fan_out_is_refused_before_compiling() {
        for keyword in ["anyOf", "oneOf", "allOf", "not"] {
            let why = plan(&fan_out(30, keyword)).expect_err(keyword);
            assert!(why.contains("fan out"), "{keyword}: {why}");
            // A few levels are ordinary.
            let fine = plan(&fan_out(5, keyword)).expect(keyword);
            assert!(fine.steps(&json!("x")).expect("within") < 200);
        }
    }

    #[test]
    fn recursion_through_the_value_is_ordinary_and_counted_by_its_depth() {
        let tree = json!({"$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"});
        let budget = plan(&tree).expect("a tree schema is checked");
        let small = json!({"children": [{"children": []}, {}]});
        let steps = budget.steps(&small).expect("within");
        assert!((5..100).contains(&steps), "{steps}");
        // Doubling through the value: anyOf of two descents, forty levels deep.
        let doubling = json!({"$defs": {"n": {"anyOf": [
            {"items": {"$ref": "#/$defs/n"}}, {"items": {"$ref": "#/$defs/n"}}]}},
            "$ref": "#/$defs/n"});
        let budget = plan(&doubling).expect("fine on one value");
        let mut deep = json!([]);
        for _ in 0..40 {
            deep = json!([deep]);
        }
        assert!(budget.steps(&deep).is_err(), "2^40 evaluations are refused");
    }

    #[test]
    fn references_outside_the_schema_are_refused_but_meta_schemas_are_not() {
        assert!(plan(&json!({"$ref": "https://example.com/s.json"})).is_err());
        assert!(plan(&json!({"$ref": "#/nothing/here"})).is_err());
        assert!(plan(&json!({"$ref": "https://json-schema.org/draft/2020-12/schema"})).is_ok());
        let by_id = json!({"$defs": {"a": {"$id": "https://x.test/a", "type": "string"}},
            "properties": {"p": {"$ref": "https://x.test/a"}}});
        assert!(plan(&by_id).is_ok());
    }

    #[test]
    fn size_and_depth_are_bounded() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"not": deep});
        }
        assert!(plan(&deep).expect_err("deep").contains("nests deeper"));
        let wide: serde_json::Map<String, Value> = (0..MAX_SUBSCHEMAS + 1)
            .map(|i| (format!("p{i}"), json!({})))
            .collect();
        assert!(plan(&json!({"properties": wide})).is_err());
    }

    #[test]
    fn an_ordinary_tool_schema_costs_little() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"}, "lines": {"type": "array", "items": {"type": "integer"}},
            "mode": {"enum": ["a", "b"]}}, "required": ["path"], "additionalProperties": false});
        let budget = plan(&schema).expect("checked");
        let steps = budget
            .steps(&json!({"path": "/x", "lines": [1, 2, 3], "mode": "a"}))
            .expect("within");
        assert!(steps < 20, "{steps}");
    }
}
