//! `subscriptions/listen` calls (2026-07-28) seen as what they are: subscriptions. Such a call
//! is never meant to be answered; its response stream carries the change notifications it asked
//! for for as long as it lives. Derived from the calls the model holds, nothing of its own.

use serde_json::Value;

use super::{Call, Model, OrphanCause, Verdict};

/// The method whose response stream is a subscription.
pub const LISTEN: &str = "subscriptions/listen";

/// One listen stream.
#[derive(Debug, Clone)]
pub struct Subscription<'a> {
    /// The `subscriptions/listen` call.
    pub call: &'a Call,
    /// What it asked to hear of: `tools list`, `prompts list`, `resources list`,
    /// `resource URI` (empty for a call collapsed to a compact row).
    pub listens_to: Vec<String>,
    /// Alive or how it ended.
    pub state: SubscriptionState,
}

/// Whether a subscription lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriptionState {
    /// Its stream is open: changes still reach the client.
    Live,
    /// The client closed it (the normal way to unsubscribe).
    Closed,
    /// The server ended it with a response, or refused it with an error.
    Ended(String),
    /// Its stream died under it: the client hears of no more changes until it listens again.
    Dead(String),
}

impl SubscriptionState {
    /// A short phrase for display: `live`, `closed by the client`, `dead: …`, `ended: …`.
    pub fn describe(&self) -> String {
        match self {
            SubscriptionState::Live => "live".into(),
            SubscriptionState::Closed => "closed by the client".into(),
            SubscriptionState::Ended(why) => format!("ended: {why}"),
            SubscriptionState::Dead(why) => format!("dead: {why}"),
        }
    }
}

/// What a listen request's params ask to hear of.
pub fn listens_to(params: &Value) -> Vec<String> {
    let Some(asked) = params.get("notifications") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (flag, what) in [
        ("toolsListChanged", "tools list"),
        ("promptsListChanged", "prompts list"),
        ("resourcesListChanged", "resources list"),
    ] {
        if asked.get(flag) == Some(&Value::Bool(true)) {
            out.push(what.to_string());
        }
    }
    for uri in asked
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        out.push(format!("resource {uri}"));
    }
    out
}

/// The state of a listen call's subscription.
pub fn state(verdict: &Verdict) -> SubscriptionState {
    match verdict {
        Verdict::Pending | Verdict::Resumable { .. } => SubscriptionState::Live,
        Verdict::Cancelled { .. }
        | Verdict::Orphaned {
            cause: OrphanCause::ClientClosed,
            ..
        } => SubscriptionState::Closed,
        Verdict::Orphaned { cause, .. } => SubscriptionState::Dead(cause.describe().into()),
        Verdict::Answered => SubscriptionState::Ended("the server closed it".into()),
        Verdict::Error { message } => SubscriptionState::Ended(format!("refused: {message}")),
    }
}

impl Model {
    /// The listen streams among the calls held, oldest first.
    pub fn subscriptions(&self) -> Vec<Subscription<'_>> {
        self.calls
            .iter()
            .filter(|c| c.method == LISTEN)
            .map(|call| Subscription {
                call,
                listens_to: listens_to(&call.params()),
                state: state(&call.verdict),
            })
            .collect()
    }
}
