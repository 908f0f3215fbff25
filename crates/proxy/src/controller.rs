//! The live proxy's fault controller: scripted rules at start, and the [`FaultControl`] a view
//! uses to fault a live stream or arm a rule.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::{Proxy, Shared};
use mcpscope_engine::event::StreamId;
use mcpscope_engine::fault::control::{
    FaultChoice, FaultControl, HeldRequest, RESENT_HEADER, Release, Resend,
};
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

/// The [`FaultControl`] over `proxy` and `engine`, for the TUI; it re-sends requests to the
/// proxy's own address.
pub fn controller(proxy: &Proxy, engine: Arc<RuleEngine>) -> Arc<dyn FaultControl> {
    Arc::new(Controller {
        shared: proxy.shared.clone(),
        engine,
        listen: Some(proxy.addr),
    })
}

/// Faults a live stream through the proxy and arms rules in the engine.
pub struct Controller {
    shared: Arc<Shared>,
    engine: Arc<RuleEngine>,
    listen: Option<SocketAddr>,
}

impl Controller {
    /// A controller over the proxy's shared state and a rule engine (it cannot re-send).
    pub fn new(shared: Arc<Shared>, engine: Arc<RuleEngine>) -> Self {
        Self {
            shared,
            engine,
            listen: None,
        }
    }
}

/// How long a re-sent request's answer is read before the connection is dropped.
const RESEND_PATIENCE: Duration = Duration::from_secs(120);

/// Headers the transport sets itself.
const TRANSPORT_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    RESENT_HEADER,
];

/// Sends `request` to the proxy at `addr` and reads the answer to its end (bounded).
async fn send_again(addr: SocketAddr, request: http::Request<Full<Bytes>>) {
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    };
    match tokio::time::timeout(RESEND_PATIENCE, exchange).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::info!("re-sent request failed: {e}"),
        Err(_) => tracing::info!("re-sent request still open after {RESEND_PATIENCE:?}: dropped"),
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

    fn set_intercept(&self, filter: Option<String>) -> Result<(), String> {
        let parsed = filter.as_deref().and_then(crate::intercept::Filter::parse);
        self.shared.intercept.set(parsed);
        Ok(())
    }

    fn held(&self) -> Vec<HeldRequest> {
        self.shared.intercept.held()
    }

    fn release(&self, id: u64, how: Release) -> Result<(), String> {
        self.shared.intercept.release(id, how)
    }

    fn resend(&self, request: Resend) -> Result<(), String> {
        let addr = self.listen.ok_or("this proxy cannot re-send")?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
        // A forward proxy takes the request in absolute form, for the server it went to.
        let (uri, host) = match &self.shared.config.forward {
            None => (request.path.clone(), addr.to_string()),
            Some(_) => {
                let origin = request
                    .origin
                    .as_deref()
                    .ok_or("the request's server is not known: it cannot be re-sent")?;
                let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
                (format!("{origin}{}", request.path), authority.to_string())
            }
        };
        let mut builder = http::Request::builder()
            .method(request.method.as_str())
            .uri(uri.as_str())
            .header(http::header::HOST, host)
            .header(RESENT_HEADER, request.of.as_str());
        for (name, value) in &request.headers {
            if !TRANSPORT_HEADERS
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h))
            {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        let request = builder
            .body(Full::new(Bytes::from(request.body)))
            .map_err(|e| e.to_string())?;
        runtime.spawn(send_again(addr, request));
        Ok(())
    }
}
