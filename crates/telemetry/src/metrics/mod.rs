//! Prometheus metrics: a copy of each event the proxy reports is folded into a model of its own
//! (holding only what is still open), and what the fold says (calls answered, failed, orphaned,
//! streams ended, client reactions, rescues, faults) is counted in a `prometheus-client`
//! registry, served as text at `/metrics` ([`serve`]). Names follow the OpenTelemetry MCP
//! semantic conventions where they have one (`mcp.client.operation.duration` is
//! `mcp_client_operation_duration_seconds`, labelled `mcp_method_name`, `gen_ai_tool_name`);
//! the rest are `mcpscope_*`. Label values a peer chooses (methods, tools) are capped
//! ([`labels::Capped`]), so a hostile server cannot grow the series without limit.

mod labels;
pub mod serve;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
use mcpscope_engine::event::{Direction, Event, EventKind};
use mcpscope_engine::model::{Model, Notice, Retention, What};
use mcpscope_session::SessionBuilder;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tokio::task::JoinHandle;

use labels::Capped;

/// Labels of one series: `(name, value)` pairs.
type Labels = Vec<(String, String)>;

/// Distinct method names kept as labels; later ones are `other`.
const METHODS: usize = 64;
/// Distinct tool names kept as labels; later ones are `other`.
const TOOLS: usize = 128;
/// Bytes of a method or tool name kept in a label.
const NAME_BYTES: usize = 64;

fn labels<const N: usize>(pairs: [(&str, &str); N]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn direction(dir: Direction) -> &'static str {
    match dir {
        Direction::ClientToServer => "client_to_server",
        Direction::ServerToClient => "server_to_client",
    }
}

fn duration_histogram() -> Histogram {
    // 1 ms to about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// The metrics of one proxy, and the labels seen so far.
pub struct Metrics {
    registry: Registry,
    calls: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    orphaned: Family<Labels, Counter>,
    orphan_latency: Histogram,
    open_calls: Gauge,
    stream_ends: Family<Labels, Counter>,
    reactions: Family<Labels, Counter>,
    rescues: Counter,
    faults: Family<Labels, Counter>,
    bytes: Family<Labels, Counter>,
    sessions: Counter,
    invalid: Counter,
    events: Counter,
    dropped: Counter<u64, AtomicU64>,
    methods: Capped,
    tools: Capped,
    faults_seen: Capped,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric registered, all at zero.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<Labels, Counter>::default();
        registry.register(
            "mcpscope_calls",
            "Calls that ended, by method, tool and verdict (answered, tool_error, failed, orphaned, cancelled, superseded)",
            calls.clone(),
        );
        let duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram,
        );
        registry.register_with_unit(
            "mcp_client_operation_duration",
            "How long a call took from its request to its answer or error (OpenTelemetry mcp.client.operation.duration)",
            Unit::Seconds,
            duration.clone(),
        );
        let orphaned = Family::<Labels, Counter>::default();
        registry.register(
            "mcpscope_calls_orphaned",
            "Calls left without an answer by the death of the stream that owned them, by how it ended (eof, reset, error, cancelled, none) and method",
            orphaned.clone(),
        );
        let orphan_latency = duration_histogram();
        registry.register_with_unit(
            "mcpscope_death_to_orphan",
            "From a stream's death to the moment its call was known to be orphaned",
            Unit::Seconds,
            orphan_latency.clone(),
        );
        let open_calls = Gauge::default();
        registry.register(
            "mcpscope_calls_open",
            "Calls waiting for an answer now (pending or resumable)",
            open_calls.clone(),
        );
        let stream_ends = Family::<Labels, Counter>::default();
        registry.register(
            "mcpscope_stream_ends",
            "Response streams that ended, by how (eof, reset, error, cancelled), which leg ended them, the cause (upstream, client, injected) and whether the end was a death",
            stream_ends.clone(),
        );
        let reactions = Family::<Labels, Counter>::default();
        registry.register(
            "mcpscope_client_reactions",
            "What clients did after a call went wrong: retry, cancel, resume",
            reactions.clone(),
        );
        let rescues = Counter::default();
        registry.register(
            "mcpscope_rescues",
            "Calls whose stream died that the proxy answered with an error of its own (--rescue)",
            rescues.clone(),
        );
        let faults = Family::<Labels, Counter>::default();
        registry.register(
            "mcpscope_faults_fired",
            "Faults the proxy injected, by kind",
            faults.clone(),
        );
        let bytes = Family::<Labels, Counter>::default();
        registry.register_with_unit(
            "mcpscope_body",
            "Body bytes that passed, by direction (client_to_server, server_to_client)",
            Unit::Bytes,
            bytes.clone(),
        );
        let sessions = Counter::default();
        registry.register("mcpscope_sessions", "Sessions started", sessions.clone());
        let invalid = Counter::default();
        registry.register(
            "mcpscope_invalid_messages",
            "Messages that were not valid JSON-RPC",
            invalid.clone(),
        );
        let events = Counter::default();
        registry.register(
            "mcpscope_events",
            "Events the metrics folded",
            events.clone(),
        );
        let dropped = Counter::<u64, AtomicU64>::default();
        registry.register(
            "mcpscope_events_dropped",
            "Event copies the metrics dropped because their queue was full (the traffic and the view lose nothing)",
            dropped.clone(),
        );
        Self {
            registry,
            calls,
            duration,
            orphaned,
            orphan_latency,
            open_calls,
            stream_ends,
            reactions,
            rescues,
            faults,
            bytes,
            sessions,
            invalid,
            events,
            dropped,
            methods: Capped::new(METHODS, NAME_BYTES),
            tools: Capped::new(TOOLS, NAME_BYTES),
            faults_seen: Capped::new(METHODS, NAME_BYTES),
        }
    }

    /// The exposition of every metric, in the OpenMetrics text format (which Prometheus reads).
    pub fn text(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Counts what `event`, just folded into `model`, says by itself (bytes, stream ends).
    pub fn observe_event(&mut self, model: &Model, event: &Event) {
        self.events.inc();
        if let EventKind::StreamEnded {
            stream,
            dir,
            how,
            leg,
            bytes,
            ..
        } = &event.kind
        {
            self.bytes
                .get_or_create(&labels([("direction", direction(*dir))]))
                .inc_by(*bytes);
            if *dir == Direction::ServerToClient
                && let Some(s) = model.stream(*stream)
            {
                let cause = if !s.faults.is_empty() {
                    "injected"
                } else {
                    leg.as_str()
                };
                let death = if model.fate(s).is_death() {
                    "true"
                } else {
                    "false"
                };
                self.stream_ends
                    .get_or_create(&labels([
                        ("how", how.as_str()),
                        ("leg", leg.as_str()),
                        ("cause", cause),
                        ("death", death),
                    ]))
                    .inc();
            }
        }
    }

    /// Counts what the fold of `model` said (`notices`).
    pub fn observe(&mut self, model: &Model, notices: &[Notice]) {
        for notice in notices {
            self.notice(notice);
        }
        if !notices.is_empty() {
            self.open_calls.set(model.counts().pending as i64);
        }
    }

    fn call_labels(&mut self, method: &str, tool: Option<&str>, verdict: &str) -> Labels {
        let method = self.methods.value(method);
        let tool = tool.map(|t| self.tools.value(t)).unwrap_or_default();
        vec![
            ("mcp_method_name".to_owned(), method),
            ("gen_ai_tool_name".to_owned(), tool),
            ("verdict".to_owned(), verdict.to_owned()),
        ]
    }

    fn ended(&mut self, call: &mcpscope_engine::model::CallRef, verdict: &str) {
        let labels = self.call_labels(&call.method, call.tool.as_deref(), verdict);
        self.calls.get_or_create(&labels).inc();
    }

    fn timed(&mut self, call: &mcpscope_engine::model::CallRef, outcome: &str, elapsed_ms: i64) {
        let mut labels = self.call_labels(&call.method, call.tool.as_deref(), outcome);
        labels[2].0 = "outcome".to_owned();
        self.duration
            .get_or_create(&labels)
            .observe(elapsed_ms.max(0) as f64 / 1000.0);
    }

    fn notice(&mut self, notice: &Notice) {
        match &notice.what {
            What::SessionStarted { .. } => {
                self.sessions.inc();
            }
            What::CallAnswered {
                call,
                elapsed_ms,
                is_error,
                ..
            } => {
                let verdict = if *is_error { "tool_error" } else { "answered" };
                self.ended(call, verdict);
                self.timed(call, verdict, *elapsed_ms);
            }
            What::CallFailed {
                call, elapsed_ms, ..
            } => {
                self.ended(call, "failed");
                self.timed(call, "failed", *elapsed_ms);
            }
            What::CallSuperseded { call, .. } => self.ended(call, "superseded"),
            What::CallCancelled { call } => {
                self.ended(call, "cancelled");
                self.reaction("cancel");
            }
            What::CallOrphaned {
                call,
                stream_ended_at,
                how,
                ..
            } => {
                self.ended(call, "orphaned");
                let how = how.map_or("none", |h| h.as_str());
                let method = self.methods.value(&call.method);
                self.orphaned
                    .get_or_create(&vec![
                        ("how".to_owned(), how.to_owned()),
                        ("mcp_method_name".to_owned(), method),
                    ])
                    .inc();
                if let Ok(died) = DateTime::parse_from_rfc3339(stream_ended_at) {
                    let latency = notice.t - died.with_timezone(&Utc);
                    self.orphan_latency
                        .observe(latency.num_microseconds().unwrap_or(0).max(0) as f64 / 1e6);
                }
            }
            What::ClientRetry { .. } => self.reaction("retry"),
            What::CallResumed { .. } => self.reaction("resume"),
            What::CallRescued { .. } => {
                self.rescues.inc();
            }
            What::FaultInjected { fault, .. } => {
                let kind = fault.split_whitespace().next().unwrap_or("fault");
                let kind = self.faults_seen.value(kind);
                self.faults
                    .get_or_create(&vec![("fault".to_owned(), kind)])
                    .inc();
            }
            What::InvalidMessage { .. } => {
                self.invalid.inc();
            }
            _ => {}
        }
    }

    fn reaction(&mut self, reaction: &str) {
        self.reactions
            .get_or_create(&labels([("reaction", reaction)]))
            .inc();
    }
}

/// A running metrics fold: the registry it counts into, readable at any time.
#[derive(Debug)]
pub struct Running {
    /// The metrics, shared with the endpoint.
    pub metrics: Arc<std::sync::Mutex<Metrics>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Stops folding.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// Events waiting to be folded before copies are dropped.
pub const QUEUE: usize = 65_536;

/// How often the fold looks at the clock (a resumable call becomes orphaned when its retry
/// window passes, with no event to say so).
const TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Subscribes the metrics to `session` (inside a tokio runtime): they fold a copy of every
/// event; a copy that finds the queue full is dropped and counted.
pub fn subscribe(session: &mut SessionBuilder) -> Running {
    let metrics = Arc::new(std::sync::Mutex::new(Metrics::new()));
    let dropped = metrics
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .dropped
        .clone();
    let mut copies = session.subscribe(QUEUE, move || {
        dropped.inc();
    });
    let task = {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut model = Model::with_retention(Retention::none());
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    event = copies.recv() => {
                        let Some(event) = event else { break };
                        let notices = model.apply(&event);
                        let mut m = metrics.lock().unwrap_or_else(|p| p.into_inner());
                        m.observe_event(&model, &event);
                        m.observe(&model, &notices);
                    }
                    _ = tick.tick() => {
                        let notices = model.advance(Utc::now());
                        let mut m = metrics.lock().unwrap_or_else(|p| p.into_inner());
                        m.observe(&model, &notices);
                    }
                }
            }
        })
    };
    Running { metrics, task }
}
