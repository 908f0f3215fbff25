//! Fault rules and the engine that matches them against requests (the proxy's [`Planner`]).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::plan::{Fault, Plan, Planner, RequestInfo, Trigger};
use super::spec::{self, SpecError};

/// Whether a rule fires once or on every match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Repeat {
    /// Fires once (per tool with `per-tool`), then is spent.
    #[default]
    Once,
    /// Fires on every match (from the n-th on, with `nth=`).
    Always,
}

/// One fault rule: a fault, when it fires on its stream, and which requests it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The fault.
    pub fault: Fault,
    /// When it fires on the matched exchange.
    pub trigger: Trigger,
    /// JSON-RPC method to match (with it, notifications of that method match too).
    pub method: Option<String>,
    /// Tool name to match (`tools/call` with `params.name`).
    pub tool: Option<String>,
    /// `Mcp-Session-Id` to match.
    pub session: Option<String>,
    /// The server to match: its origin, host or `host:port` (see
    /// [`crate::wire::oauth::Origin::server_named`]).
    pub server: Option<String>,
    /// Fire on the n-th matching request (from 1).
    pub nth: Option<u32>,
    /// Once or always.
    pub repeat: Repeat,
    /// Count matches (and `once`) per tool name (per method for other requests).
    pub per_tool: bool,
}

impl Rule {
    /// A rule with this fault that matches every request, once.
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            trigger: Trigger::Now,
            method: None,
            tool: None,
            session: None,
            server: None,
            nth: None,
            repeat: Repeat::Once,
            per_tool: false,
        }
    }

    /// Checks combinations that cannot work; the error names the offending word.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if let (Fault::Status(_), Trigger::AfterEvents(n)) = (&self.fault, self.trigger) {
            return Err((
                format!("{n} events"),
                "a status fault answers before any event: use `after DUR` or no trigger".into(),
            ));
        }
        if let (Some(tool), Some(method)) = (&self.tool, &self.method)
            && method != "tools/call"
        {
            return Err((
                format!("tool={tool}"),
                format!("tool= only matches tools/call, not method={method}"),
            ));
        }
        if self.nth == Some(0) {
            return Err(("nth=0".into(), "nth counts from 1".into()));
        }
        Ok(())
    }

    /// The key a request is counted under, if the request matches (the tool name for
    /// `tools/call`, the method otherwise).
    pub fn matches(&self, request: &RequestInfo<'_>) -> Option<String> {
        if let Some(want) = &self.session
            && request.session != Some(want.as_str())
        {
            return None;
        }
        if let Some(want) = &self.server
            && !request
                .server
                .is_some_and(|server| crate::wire::oauth::Origin::server_named(server, want))
        {
            return None;
        }
        let body = request.body?;
        let elements: &[Value] = match body {
            Value::Array(items) => items,
            one => std::slice::from_ref(one),
        };
        elements.iter().find_map(|m| self.matches_message(m))
    }

    fn matches_message(&self, message: &Value) -> Option<String> {
        let method = message.get("method")?.as_str()?;
        let is_request = message.get("id").is_some_and(|id| !id.is_null());
        match &self.method {
            Some(want) if want != method => return None,
            Some(_) => {}
            None if !is_request => return None,
            None => {}
        }
        let tool = (method == "tools/call")
            .then(|| message.get("params")?.get("name")?.as_str())
            .flatten();
        if let Some(want) = &self.tool
            && tool != Some(want.as_str())
        {
            return None;
        }
        Some(tool.unwrap_or(method).to_string())
    }
}

impl fmt::Display for Rule {
    /// The rule in the grammar it parses from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.fault.spec())?;
        if let Some(trigger) = spec::format_trigger(self.trigger) {
            write!(f, " {trigger}")?;
        }
        let matchers: Vec<String> = [
            self.method.as_ref().map(|m| format!("method={m}")),
            self.tool.as_ref().map(|t| format!("tool={t}")),
            self.session.as_ref().map(|s| format!("session={s}")),
            self.server.as_ref().map(|s| format!("server={s}")),
            self.nth.map(|n| format!("nth={n}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !matchers.is_empty() {
            write!(f, " when {}", matchers.join(" "))?;
        }
        if self.per_tool {
            f.write_str(" per-tool")?;
        }
        f.write_str(match self.repeat {
            Repeat::Once => " once",
            Repeat::Always => " always",
        })
    }
}

impl std::str::FromStr for Rule {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        spec::parse_rule(s)
    }
}

/// The id an armed rule keeps until it is spent or disarmed (`#1`, `#2`, …; never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// An armed rule and its counts.
#[derive(Debug)]
struct Armed {
    id: RuleId,
    rule: Rule,
    /// Matches seen, per key (one key `""` unless per-tool).
    seen: HashMap<String, u32>,
    /// Keys a per-tool `once` rule has fired for.
    fired_for: HashSet<String>,
}

impl Armed {
    fn label(&self) -> String {
        let mut label = format!("{} {}", self.id, self.rule);
        if !self.fired_for.is_empty() {
            let mut keys: Vec<&str> = self.fired_for.iter().map(String::as_str).collect();
            keys.sort_unstable();
            label.push_str(&format!(" (fired for {})", keys.join(", ")));
        }
        label
    }
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u32,
    rules: Vec<Armed>,
    fired: u32,
}

/// The rule engine: thread-safe; rules are tried in the order they were armed, and the first
/// that fires takes the request (later rules do not count it).
#[derive(Debug, Default)]
pub struct RuleEngine {
    inner: Mutex<Inner>,
}

impl RuleEngine {
    /// An engine with no rules.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arms a rule; returns its label (`#1 reset after 500ms when tool=poke once`).
    pub fn add(&self, rule: Rule) -> String {
        let mut inner = self.lock();
        inner.next_id += 1;
        let armed = Armed {
            id: RuleId(inner.next_id),
            rule,
            seen: HashMap::new(),
            fired_for: HashSet::new(),
        };
        let label = armed.label();
        inner.rules.push(armed);
        label
    }

    /// Parses and arms a rule spec.
    pub fn arm(&self, spec: &str) -> Result<String, SpecError> {
        Ok(self.add(spec::parse_rule(spec)?))
    }

    /// Labels of the rules still armed, in order.
    pub fn armed(&self) -> Vec<String> {
        self.lock().rules.iter().map(Armed::label).collect()
    }

    /// The rules still armed, in order: (id, label).
    pub fn armed_rules(&self) -> Vec<(RuleId, String)> {
        self.lock()
            .rules
            .iter()
            .map(|armed| (armed.id, armed.label()))
            .collect()
    }

    /// Disarms the rule with this id; returns whether it was still armed (a rule that has fired
    /// and is spent is gone, and no other rule is touched).
    pub fn disarm(&self, id: RuleId) -> bool {
        let mut inner = self.lock();
        match inner.rules.iter().position(|armed| armed.id == id) {
            Some(index) => {
                inner.rules.remove(index);
                true
            }
            None => false,
        }
    }

    /// How many times rules have fired.
    pub fn fired(&self) -> u32 {
        self.lock().fired
    }
}

impl Planner for RuleEngine {
    fn reads_requests(&self) -> bool {
        !self.lock().rules.is_empty()
    }

    fn plan(&self, request: &RequestInfo<'_>) -> Option<Plan> {
        let mut inner = self.lock();
        let mut hit = None;
        for (index, armed) in inner.rules.iter_mut().enumerate() {
            let Some(key) = armed.rule.matches(request) else {
                continue;
            };
            let key = if armed.rule.per_tool {
                key
            } else {
                String::new()
            };
            if armed.fired_for.contains(&key) {
                continue;
            }
            let seen = armed.seen.entry(key.clone()).or_insert(0);
            *seen += 1;
            let due = match (armed.rule.nth, armed.rule.repeat) {
                (None, _) => true,
                (Some(n), Repeat::Once) => *seen == n,
                (Some(n), Repeat::Always) => *seen >= n,
            };
            if !due {
                continue;
            }
            let plan = Plan {
                fault: armed.rule.fault.clone(),
                trigger: armed.rule.trigger,
                origin: format!("rule {}: {}", armed.id, armed.rule),
            };
            let spent = match armed.rule.repeat {
                Repeat::Always => false,
                Repeat::Once if armed.rule.per_tool => {
                    armed.fired_for.insert(key);
                    false
                }
                Repeat::Once => true,
            };
            hit = Some((index, spent, plan));
            break;
        }
        let (index, spent, plan) = hit?;
        inner.fired += 1;
        if spent {
            inner.rules.remove(index);
        }
        tracing::info!(stream = request.stream, origin = %plan.origin, "fault rule fired");
        Some(plan)
    }
}
