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
    /// The server it went to (`scheme://host[:port]`), when known: a forward proxy sends it
    /// there again (a reverse proxy to its upstream, whatever this says).
    pub origin: Option<String>,
    /// Request headers (hop-by-hop ones and the length are the transport's).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// What the mark says: the JSON-RPC id of the call sent again.
    pub of: String,
}

/// A request the intercept holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRequest {
    /// Its id among held requests.
    pub id: u64,
    /// The exchange it came on.
    pub stream: StreamId,
    /// `tools/call poke id=3`.
    pub summary: String,
    /// The body as the client sent it.
    pub body: String,
}

/// What becomes of a held request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// It goes on to the upstream: as it was, or with this body.
    Forward(Option<String>),
    /// It never reaches the upstream; the client gets a 502 from mcpscope.
    Drop,
    /// mcpscope answers it with this JSON-RPC error message.
    Error(String),
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
    /// Sets the intercept's filter (`tool:NAME`, `method:M`, or text in the method or tool
    /// name): matching requests are held until released. `None` clears it and releases every
    /// held request unchanged.
    fn set_intercept(&self, filter: Option<String>) -> Result<(), String> {
        let _ = filter;
        Err("intercepting needs a live proxy".into())
    }
    /// The requests held now, oldest first.
    fn held(&self) -> Vec<HeldRequest> {
        Vec::new()
    }
    /// Releases a held request.
    fn release(&self, id: u64, how: Release) -> Result<(), String> {
        let _ = (id, how);
        Err("intercepting needs a live proxy".into())
    }
}
