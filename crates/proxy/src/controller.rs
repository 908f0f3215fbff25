//! The live proxy's fault controller: scripted rules at start, and the [`FaultControl`] a view
//! uses to fault a live stream or arm a rule.

use std::path::Path;
use std::sync::Arc;

use crate::{Proxy, Shared};
use mcpscope_engine::event::StreamId;
use mcpscope_engine::fault::control::{FaultChoice, FaultControl};
use mcpscope_engine::fault::plan::{Fault, Plan};
use mcpscope_engine::fault::rules::{RuleEngine, RuleId};
use mcpscope_engine::fault::spec;

/// Parses `--fault` specs and a `--faults` file into rules, arms them in a new engine and sets
/// it as the proxy's planner (also when empty, so that rules can be armed later).
/// Errors are [`UsageError`]s naming the spec and the bad word.
pub fn install(
    proxy: &Proxy,
    specs: &[String],
    file: Option<&Path>,
) -> anyhow::Result<Arc<RuleEngine>> {
    let engine = Arc::new(mcpscope_engine::fault::load(specs, file)?);
    proxy.shared.set_planner(engine.clone());
    for label in engine.armed() {
        tracing::info!(%label, "fault rule armed");
    }
    Ok(engine)
}

/// The [`FaultControl`] over `proxy` and `engine`, for the TUI.
pub fn controller(proxy: &Proxy, engine: Arc<RuleEngine>) -> Arc<dyn FaultControl> {
    Arc::new(Controller {
        shared: proxy.shared.clone(),
        engine,
    })
}

/// Faults a live stream through the proxy and arms rules in the engine.
pub struct Controller {
    shared: Arc<Shared>,
    engine: Arc<RuleEngine>,
}

impl Controller {
    /// A controller over the proxy's shared state and a rule engine.
    pub fn new(shared: Arc<Shared>, engine: Arc<RuleEngine>) -> Self {
        Self { shared, engine }
    }
}

/// The faults that can hit a live stream, in menu order.
pub fn live_choices() -> Vec<FaultChoice> {
    [
        ("reset", "reset the stream (TCP RST)"),
        ("eof", "end the stream cleanly before the result"),
        (
            "server-dies:5s",
            "reset it and the session's GET streams; refuse requests for 5 s",
        ),
        ("json-reset", "cut a JSON body halfway, then reset"),
        ("stall", "swallow the result; keep the stream open"),
        ("delay:2s", "hold every event back by 2 s"),
        ("drip:64", "trickle the bytes at 64 B/s"),
        ("truncate", "cut the next event in half, then end cleanly"),
        ("duplicate", "send the next event twice"),
        (
            "vanish",
            "drop the upstream request; keep the client waiting",
        ),
    ]
    .into_iter()
    .map(|(spec, description)| FaultChoice {
        spec: spec.into(),
        description: description.into(),
    })
    .collect()
}

impl FaultControl for Controller {
    fn stream_faults(&self) -> Vec<FaultChoice> {
        live_choices()
    }

    fn apply_to_stream(&self, stream: StreamId, spec_text: &str) -> Result<(), String> {
        let (fault, trigger) = spec::parse_live(spec_text).map_err(|e| e.to_string())?;
        if let Fault::Status(code) = fault {
            return Err(format!(
                "status:{code} replaces a response, and stream #{stream} already has one: \
                 arm a rule instead (e.g. `status:{code} when tool=NAME`)"
            ));
        }
        let plan = Plan {
            fault,
            trigger,
            origin: format!("live: {}", spec_text.trim()),
        };
        self.shared.apply(stream, plan)
    }

    fn arm(&self, rule: &str) -> Result<String, String> {
        self.engine.arm(rule).map_err(|e| e.to_string())
    }

    fn armed(&self) -> Vec<(RuleId, String)> {
        self.engine.armed_rules()
    }

    fn disarm(&self, id: RuleId) -> bool {
        self.engine.disarm(id)
    }
}
