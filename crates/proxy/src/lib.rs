//! The intercepting proxy: a hyper server in front of a shared hyper client, with a tap on every
//! stream. It forwards bytes, timing and the kind of stream end faithfully, and never waits on
//! the views or the recorder.
//!
//! Each request runs the [`stage`] pipeline: guard → read → plan → forward.

pub(crate) mod accept;
pub(crate) mod activity;
pub mod ca;
pub(crate) mod conn;
pub mod controller;
pub(crate) mod endpoint;
pub(crate) mod error;
pub mod forward_env;
pub(crate) mod forward_proxy;
pub(crate) mod headers;
pub(crate) mod intercept;
pub mod mock;
pub(crate) mod oauth;
pub(crate) mod rescue;
pub(crate) mod shaper;
pub(crate) mod shared;
pub(crate) mod stage;
pub mod stdio;
pub(crate) mod tap;
pub(crate) mod upstream;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use activity::{Activity, Tracked};
use conn::{ClientConn, ResetFlag};
pub use error::ProxyError;
pub use forward_proxy::{ForwardMode, UPSTREAM_LABEL};
use mcpscope_engine::event::EventKind;
use mcpscope_session::sink::EventSink;
pub use shared::Shared;
pub use stage::guard::host_allowed;
use stage::pending::Pending;
use stage::plan::Decision;
use stage::read::Unread;
use stage::{Exchange, forward as forward_stage, guard, plan, read};
use upstream::UpstreamConn;
pub use upstream::probe;

/// The body type the proxy answers with.
pub type ProxyBody = UnsyncBoxBody<Bytes, ProxyError>;

/// The upstream connection kept for a client connection between its requests.
pub type ConnSlot = Arc<Mutex<Option<UpstreamConn>>>;

/// How the proxy is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The upstream MCP endpoint.
    pub upstream: Uri,
    /// Accept any TLS certificate.
    pub insecure: bool,
    /// Listening on a non-loopback address was allowed (`--allow-remote`); the `Host` guard
    /// still applies: remote names must be listed in `allow_hosts`.
    pub allow_remote: bool,
    /// Origins a browser page may call from besides loopback ones (`--allow-origin`).
    pub allow_origins: Vec<String>,
    /// Host names remote clients may use besides loopback ones (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// How long the proxy waits for each side.
    pub timeouts: Timeouts,
    /// How much one exchange may make the proxy hold.
    pub limits: Limits,
    /// Answer a call whose SSE stream dies unresumable with a JSON-RPC error of the proxy's own
    /// instead of passing the death on (`--rescue`).
    pub rescue: bool,
    /// Forward the client's `Host` and `Origin` to the upstream unguarded (`--pass-host`,
    /// loopback listen addresses only): the upstream's own DNS-rebinding protection answers.
    pub pass_host: bool,
    /// Forward-proxy mode (`--forward`): each exchange goes to the server its request names,
    /// not to `upstream`.
    pub forward: Option<Arc<forward_proxy::ForwardMode>>,
    /// Certificates trusted for upstream TLS besides the Web PKI roots (`--ca-file`).
    pub ca_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl Default for Config {
    /// A proxy on a free loopback port, in front of `http://127.0.0.1/` (set `upstream`).
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            upstream: Uri::from_static("http://127.0.0.1/"),
            insecure: false,
            allow_remote: false,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            timeouts: Timeouts::default(),
            limits: Limits::default(),
            rescue: false,
            pass_host: false,
            forward: None,
            ca_roots: Vec::new(),
        }
    }
}

/// How long the proxy waits for each side before it gives up on an exchange or a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A client's request head must arrive within this (slow-header clients).
    pub request_head: Duration,
    /// A client's request body must arrive within this.
    pub request_body: Duration,
    /// A client connection with no exchange in flight is closed after this.
    pub idle: Duration,
    /// Connecting to the upstream.
    pub connect: Duration,
    /// The upstream's response head must arrive within this (the client then gets a 504).
    /// A response that has started (an SSE stream) is never cut by a timer.
    pub response_head: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            request_head: Duration::from_secs(10),
            request_body: Duration::from_secs(30),
            idle: Duration::from_secs(120),
            connect: Duration::from_secs(10),
            response_head: Duration::from_secs(120),
        }
    }
}

/// How many bytes one exchange may make the proxy hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request body (read whole before forwarding); past it the client gets a 413.
    pub request_body: usize,
    /// One SSE line or event's data that the tap decodes; past it the stream is forwarded
    /// undecoded and flagged.
    pub sse_event: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            request_body: 64 * 1024 * 1024,
            sse_event: mcpscope_engine::wire::sse::DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

/// A running proxy.
pub struct Proxy {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its shared state (fault control).
    pub shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Stops accepting connections, records an end (detail `shutdown`) for every exchange
    /// still open and seals the event sink: nothing later is recorded. Returns how many
    /// exchanges it ended.
    pub fn shutdown(&self) -> usize {
        self.task.abort();
        self.shared.sink.seal()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds and starts the proxy; facts go to `sink`.
pub async fn start(config: Config, sink: EventSink) -> Result<Proxy, ProxyError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ProxyError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(ProxyError::LocalAddr)?;
    let connector = upstream::connector_with(config.insecure, &config.ca_roots)?;
    let shared = Arc::new(Shared::new(config, connector, sink));
    let forward = shared.config.forward.clone();
    shared.sink.emit(EventKind::ProxyStarted {
        listen: addr.to_string(),
        upstream: match forward {
            Some(_) => forward_proxy::UPSTREAM_LABEL.to_string(),
            None => shared.config.upstream.to_string(),
        },
        version: env!("CARGO_PKG_VERSION").to_string(),
    });
    let task = match forward {
        Some(mode) => tokio::spawn(forward_proxy::accept_loop(listener, shared.clone(), mode)),
        None => tokio::spawn(accept_loop(listener, shared.clone())),
    };
    Ok(Proxy { addr, shared, task })
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut acceptor = accept::Acceptor::default();
    loop {
        let (tcp, _peer) = acceptor.accept(&listener, "proxy").await;
        let _ = tcp.set_nodelay(true);
        let conn_id = shared.ids.conn();
        let reset = ResetFlag::default();
        let activity = Activity::default();
        let io = TokioIo::new(ClientConn::new(tcp, reset.clone(), activity.clone()));
        let shared = shared.clone();
        let link = ConnSlot::default();
        tokio::spawn(async move {
            let timeouts = shared.config.timeouts;
            let watched = activity.clone();
            let service = hyper::service::service_fn(move |req| {
                handle(
                    req,
                    conn_id,
                    reset.clone(),
                    link.clone(),
                    watched.clone(),
                    shared.clone(),
                )
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let serving = builder.serve_connection(io, service);
            // Dropping the connection closes it; the watchdog only fires when no exchange is in
            // flight, so no response is ever cut by it.
            tokio::select! {
                ended = serving => {
                    if let Err(e) = ended {
                        tracing::debug!("connection {conn_id} ended: {e}");
                    }
                }
                why = activity.expired(timeouts.request_head, timeouts.idle) => {
                    tracing::debug!("connection {conn_id} closed: {why}");
                }
            }
        });
    }
}

/// One request through the pipeline, its connection counting it in flight until its response
/// body has ended. An exchange dropped before any stage answered it is ended by [`Pending`].
pub(crate) async fn handle(
    req: Request<Incoming>,
    conn: u64,
    reset: ResetFlag,
    link: ConnSlot,
    activity: Activity,
    shared: Arc<Shared>,
) -> Result<Response<Tracked<ProxyBody>>, ProxyError> {
    let in_flight = activity.begin(req.version() == http::Version::HTTP_2);
    let exchange = Exchange::open(&req, conn, reset, &shared);
    let pending = Pending::new(shared.clone(), exchange.stream);
    let response = pipeline(req, exchange, link, &shared).await?;
    pending.answered();
    Ok(response.map(|body| Tracked::new(body, in_flight)))
}

/// guard → read → hold → plan → forward.
async fn pipeline(
    req: Request<Incoming>,
    exchange: Exchange,
    link: ConnSlot,
    shared: &Arc<Shared>,
) -> Result<Response<ProxyBody>, ProxyError> {
    if let Err(refusal) = guard::check(shared, &req) {
        return refusal.answer(shared, &exchange);
    }
    let request = match read::read(req, shared, exchange.stream).await {
        Ok(request) => request,
        Err(Unread::Answered(response)) => return Ok(response),
        Err(Unread::Vanished(e)) => return Err(e),
    };
    let request = match stage::hold::hold(shared, &exchange, request).await {
        Ok(request) => request,
        Err(response) => return Ok(response),
    };
    match plan::decide(shared, &exchange, &request).await {
        Decision::Answered(response) => Ok(response),
        Decision::Forward(plan) => {
            forward_stage::forward(shared, link, exchange, request, plan).await
        }
    }
}

/// Checks an upstream URL: http or https, with a host.
pub fn parse_upstream(text: &str) -> Result<http::Uri, mcpscope_engine::UsageError> {
    // A password in the URL never reaches the terminal.
    let shown = mcpscope_engine::redact::Redactor::disabled().url(text);
    let uri: http::Uri = text.parse().map_err(|e| {
        mcpscope_engine::UsageError(format!("--upstream {shown:?} is not a URL: {e}"))
    })?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            return Err(mcpscope_engine::UsageError(format!(
                "--upstream {shown:?} must start with http:// or https://"
            )));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(mcpscope_engine::UsageError(format!(
            "--upstream {shown:?} has no host"
        )));
    }
    Ok(uri)
}
