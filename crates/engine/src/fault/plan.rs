//! What a fault does to one exchange, and when: executed by the proxy's tap.

use std::time::Duration;

/// One fault kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The response stream ends cleanly (FIN after a complete framing) before the result.
    Eof,
    /// The response stream is reset (TCP RST).
    Reset,
    /// The server dies: this stream and every GET stream of its session are reset, and new
    /// requests are refused (reset) for the given time.
    ServerDies {
        /// How long new requests are refused.
        down: Duration,
    },
    /// A JSON response is cut after half its bytes and the socket reset.
    JsonThenReset,
    /// An HTTP status (503, 500, 404 …) instead of the upstream's answer.
    Status(u16),
    /// The result is swallowed while the stream stays open.
    Stall,
    /// Every event (or a JSON body) is held back by this long.
    Delay(Duration),
    /// Bytes trickle at this many per second.
    Drip {
        /// Bytes per second.
        bytes_per_sec: u64,
    },
    /// The next SSE event is cut in half, then the stream ends cleanly.
    Truncate,
    /// The next SSE event is sent twice.
    Duplicate,
    /// Toward the upstream: the client vanishes (the upstream request is dropped) while the
    /// client's stream is held open.
    Vanish,
}

impl Fault {
    /// The fault in the rule grammar (`reset`, `status:503`, `delay:200ms`, …).
    pub fn spec(&self) -> String {
        match self {
            Fault::Eof => "eof".into(),
            Fault::Reset => "reset".into(),
            Fault::ServerDies { down } => format!("server-dies:{}ms", down.as_millis()),
            Fault::JsonThenReset => "json-reset".into(),
            Fault::Status(code) => format!("status:{code}"),
            Fault::Stall => "stall".into(),
            Fault::Delay(d) => format!("delay:{}ms", d.as_millis()),
            Fault::Drip { bytes_per_sec } => format!("drip:{bytes_per_sec}"),
            Fault::Truncate => "truncate".into(),
            Fault::Duplicate => "duplicate".into(),
            Fault::Vanish => "vanish".into(),
        }
    }

    /// Whether the tap must forward whole SSE events (instead of chunks as they come) for it.
    pub fn needs_event_alignment(&self) -> bool {
        matches!(
            self,
            Fault::Stall | Fault::Delay(_) | Fault::Truncate | Fault::Duplicate
        )
    }
}

/// When a fault fires on its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trigger {
    /// As soon as it is attached (before the response, for status faults).
    #[default]
    Now,
    /// This long after it was attached.
    After(Duration),
    /// After this many SSE events have passed on the stream.
    AfterEvents(u32),
}

/// A fault attached to one exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What.
    pub fault: Fault,
    /// When.
    pub trigger: Trigger,
    /// Which rule or action caused it (recorded with the event).
    pub origin: String,
}

/// What a planner knows of a request when it decides on a fault.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// Exchange id.
    pub stream: crate::event::StreamId,
    /// HTTP method.
    pub http_method: &'a str,
    /// `Mcp-Session-Id`, if any.
    pub session: Option<&'a str>,
    /// The server it goes to (`scheme://host[:port]`), when known.
    pub server: Option<&'a str>,
    /// The parsed JSON-RPC body, if it parsed.
    pub body: Option<&'a serde_json::Value>,
}

/// Decides, per request, whether a fault is attached to its exchange (the rule engine).
pub trait Planner: Send + Sync {
    /// The fault for this request, if any rule matches.
    fn plan(&self, request: &RequestInfo<'_>) -> Option<Plan>;

    /// Whether a rule may match a request now: when none is armed, the forwarding path leaves
    /// request bodies unparsed (a rule armed later applies to the requests read after it).
    fn reads_requests(&self) -> bool {
        true
    }
}
