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
}
