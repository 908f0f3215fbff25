//! The interface through which a view (the TUI) injects faults into the live proxy.

use super::rules::RuleId;
use crate::event::StreamId;

/// A fault a user can choose from a menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultChoice {
    /// The fault in the rule grammar (`reset`, `eof`, `status:503`, `stall`, …).
    pub spec: String,
    /// What it does, in a few words.
    pub description: String,
}

/// The header that marks a request mcpscope sent again itself (`r` in the view).
pub const RESENT_HEADER: &str = "x-mcpscope-resent";

/// A request to send again through the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resend {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Request headers (hop-by-hop ones and the length are the transport's).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// What the mark says: the JSON-RPC id of the call sent again.
    pub of: String,
}

/// Implemented by the live proxy's fault controller; absent in replays.
pub trait FaultControl: Send + Sync {
    /// The faults that can be applied to a live stream now, in menu order.
    fn stream_faults(&self) -> Vec<FaultChoice>;
    /// Applies a fault to a live stream at once.
    fn apply_to_stream(&self, stream: StreamId, spec: &str) -> Result<(), String>;
    /// Arms a rule (rule grammar) for the next matching call; returns its label.
    fn arm(&self, rule: &str) -> Result<String, String>;
    /// Rules armed and not yet spent, in order: (id, label), for a status bar.
    fn armed(&self) -> Vec<(RuleId, String)>;
    /// Disarms the rule with this id; returns whether it was still armed. A rule that fired in
    /// the meantime is gone, and no other rule is disarmed in its place.
    fn disarm(&self, id: RuleId) -> bool;
    /// Sends a request again through the proxy, marked with [`RESENT_HEADER`], in the
    /// background: its answer shows as a new exchange.
    fn resend(&self, request: Resend) -> Result<(), String> {
        let _ = request;
        Err("re-sending needs a live proxy".into())
    }
}
