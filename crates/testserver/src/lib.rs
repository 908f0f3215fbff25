//! `mcpscope serve-test`: a small built-in Streamable HTTP MCP server.
//!
//! Endpoint `/mcp`. Speaks 2025-03-26, 2025-06-18 and 2025-11-25 (initialize handshake,
//! `Mcp-Session-Id`, GET streams, resumption with `Last-Event-ID`, 2025-03-26 batches) and the
//! session-less 2026-07-28 (`server/discover`, the per-request `_meta` envelope with its
//! `Mcp-Method`/`Mcp-Name` header checks, input-required rounds, `subscriptions/listen`).
//! Tools: `echo`, `slow`, `peek`, `poke`, `fail`, `measure`, the task-capable `slow_task`
//! ([`tasks`]: 2025-11-25 tasks, `tasks/*` requests and `notifications/tasks/status`), plus the conformance suite's `test_*` tools,
//! prompts and resources. Requests whose Host or Origin is not this machine are refused (403).
//!
//! Also the one MCP test client ([`client`]) and the demo's scripted steps on it ([`democlient`]),
//! which `demo` and `matrix` drive.

pub(crate) mod backchannel;
pub(crate) mod catalog;
pub mod client;
pub mod democlient;
pub(crate) mod guard;
pub(crate) mod modern;
pub(crate) mod stream;
pub(crate) mod tasks;
pub(crate) mod tools;

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use mcpscope_engine::revision::is_sessionless;
use stream::{Body, StreamLog};
use tools::{Ctx, Emit};

/// Protocol revisions spoken, oldest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];
/// The session-less revision.
pub const SESSIONLESS_VERSION: &str = mcpscope_engine::revision::FIRST_SESSIONLESS;
/// Revision chosen when the client asks for one we do not speak.
pub const LATEST_SESSION_VERSION: &str = "2025-11-25";
/// Interval of `: keep-alive` comments on idle streams.
pub const KEEPALIVE: Duration = Duration::from_secs(15);
/// Largest accepted request body.
pub const MAX_BODY: usize = 4 << 20;
/// Streams remembered per session for resumption.
const MAX_STREAMS: usize = 64;
/// Live GET streams per session.
const MAX_GETS: usize = 16;

/// Options of the test server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to listen (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Answer requests with `application/json` instead of SSE.
    pub json_responses: bool,
    /// Put `id:` fields on SSE events.
    pub event_ids: bool,
    /// `retry:` to send in the priming event (2025-11-25).
    pub retry_ms: Option<u64>,
    /// Write a `: keep-alive` comment on a stream idle this long; `None`: idle streams are
    /// silent on the wire.
    pub keepalive: Option<Duration>,
    /// How the `slow` tool behaves whatever its arguments say (a matrix case's timing).
    pub slow: Option<SlowPlan>,
}

/// How the `slow` tool behaves: `steps` notifications `interval_ms` apart, then the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowPlan {
    /// Notifications before the result (progress with a progress token, else log messages).
    pub steps: u64,
    /// The wait before each, ms.
    pub interval_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            json_responses: false,
            event_ids: true,
            retry_ms: None,
            keepalive: Some(KEEPALIVE),
            slow: None,
        }
    }
}

/// GET requests the server refuses, to show how a client copes when it cannot listen or resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetRefusal {
    /// Answer every GET with this status (e.g. 405: no standalone or resumption stream).
    pub every_get: Option<u16>,
    /// Answer every resumption (GET with `Last-Event-ID`) with this status (e.g. 404).
    pub resumption: Option<u16>,
}

/// A running test server.
#[derive(Debug)]
pub struct TestServer {
    /// The bound address.
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl TestServer {
    /// The MCP endpoint, `http://ADDR/mcp` (loopback when bound to an unspecified address).
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            });
        }
        format!("http://{addr}/mcp")
    }

    /// Stops accepting, drops open connections and waits for the server task.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Binds, spawns the server and returns at once.
pub async fn start(opts: Options) -> anyhow::Result<TestServer> {
    start_refusing(opts, GetRefusal::default()).await
}

/// [`start`], refusing the GET requests `refusal` names.
pub async fn start_refusing(opts: Options, refusal: GetRefusal) -> anyhow::Result<TestServer> {
    let listener = TcpListener::bind(opts.listen).await?;
    let addr = listener.local_addr()?;
    let mut shared = Shared::new(opts);
    shared.refusal = refusal;
    let shared = Arc::new(shared);
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, shared, rx));
    Ok(TestServer {
        addr,
        shutdown: tx,
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let (tcp, _) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                tracing::warn!(%err, "serve-test: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(route(shared, req).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tcp), svc);
            tokio::select! {
                res = conn => {
                    if let Err(err) = res {
                        tracing::debug!(%err, "serve-test: connection ended with an error");
                    }
                }
                _ = shutdown.changed() => {}
            }
        });
    }
    shared.end_all();
}

/// State shared by all connections.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) opts: Options,
    refusal: GetRefusal,
    sessions: Mutex<HashMap<String, Session>>,
    /// The `peek`/`poke` counter.
    pub(crate) counter: AtomicI64,
    next_stream: AtomicU64,
    next_session: AtomicU64,
    random: std::collections::hash_map::RandomState,
    /// Server-to-client requests awaiting the client's answer.
    pub(crate) backchannel: backchannel::BackChannel,
    /// Open `subscriptions/listen` streams (2026-07-28).
    pub(crate) listeners: modern::Listeners,
    /// Tasks made by task-augmented calls (2025-11-25).
    pub(crate) tasks: tasks::Tasks,
}

#[derive(Debug)]
struct Session {
    version: String,
    /// Streams kept for resumption, oldest first.
    streams: VecDeque<Arc<StreamLog>>,
    /// GET streams receiving server-initiated notifications.
    gets: VecDeque<Arc<StreamLog>>,
    /// Resources the session subscribed to (`resources/subscribe`).
    subscriptions: HashSet<String>,
}

impl Session {
    fn remember(&mut self, log: &Arc<StreamLog>) {
        self.streams.push_back(Arc::clone(log));
        while self.streams.len() > MAX_STREAMS {
            // Forget the oldest finished stream, or else the oldest one.
            let pos = self
                .streams
                .iter()
                .position(|s| s.is_finished())
                .unwrap_or(0);
            if let Some(old) = self.streams.remove(pos) {
                old.finish();
            }
        }
    }

    fn end(&self) {
        for log in self.streams.iter().chain(self.gets.iter()) {
            log.finish();
        }
    }
}

impl Shared {
    fn new(opts: Options) -> Self {
        Self {
            opts,
            refusal: GetRefusal::default(),
            sessions: Mutex::new(HashMap::new()),
            counter: AtomicI64::new(0),
            next_stream: AtomicU64::new(1),
            next_session: AtomicU64::new(1),
            random: std::collections::hash_map::RandomState::new(),
            backchannel: backchannel::BackChannel::default(),
            listeners: modern::Listeners::default(),
            tasks: tasks::Tasks::default(),
        }
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn new_session_id(&self) -> String {
        let n = self.next_session.fetch_add(1, Ordering::SeqCst);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut a = self.random.build_hasher();
        a.write_u64(n);
        a.write_u128(nanos);
        let mut b = self.random.build_hasher();
        b.write_u64(!n);
        b.write_u128(nanos);
        format!("{:016x}{:016x}", a.finish(), b.finish())
    }

    fn new_stream(&self, ids: bool) -> Arc<StreamLog> {
        let n = self.next_stream.fetch_add(1, Ordering::SeqCst);
        StreamLog::new(format!("s{n}"), ids)
    }

    /// Sends a server-initiated notification on every GET stream of `session`.
    pub(crate) fn broadcast(&self, session: &str, msg: &Value) {
        let sessions = self.sessions();
        if let Some(s) = sessions.get(session) {
            for log in &s.gets {
                log.push_message(msg);
            }
        }
    }

    /// Records a session's `resources/subscribe` (`on`) or `resources/unsubscribe`.
    pub(crate) fn subscribe(&self, session: &str, uri: &str, on: bool) {
        if let Some(s) = self.sessions().get_mut(session) {
            if on {
                s.subscriptions.insert(uri.to_string());
            } else {
                s.subscriptions.remove(uri);
            }
        }
    }

    /// Announces that `uri` changed: to listen streams that asked for it, and on the GET streams
    /// of sessions subscribed to it.
    pub(crate) fn resource_changed(&self, uri: &str) {
        self.listeners
            .publish(&modern::Change::ResourceUpdated(uri.to_string()));
        let note = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
        for s in self.sessions().values() {
            if s.subscriptions.contains(uri) {
                for log in &s.gets {
                    log.push_message(&note);
                }
            }
        }
    }

    fn end_all(&self) {
        for s in self.sessions().values() {
            s.end();
        }
        self.listeners.end_all();
        self.tasks.end_all();
    }
}

// ---------------------------------------------------------------- HTTP helpers

fn empty(status: StatusCode) -> Response<Body> {
    let mut resp = Response::new(Empty::new().map_err(|never| match never {}).boxed_unsync());
    *resp.status_mut() = status;
    resp
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    let body = Full::new(Bytes::from(v.to_string()))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn http_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    json_response(status, &tools::error(&Value::Null, code, message))
}

fn sse_response(body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

fn header_str<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn with_session_header(mut resp: Response<Body>, session: &str) -> Response<Body> {
    if let Ok(v) = HeaderValue::from_str(session) {
        resp.headers_mut().insert("mcp-session-id", v);
    }
    resp
}

// ---------------------------------------------------------------- routing

async fn route(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if let Some(why) = guard::refusal(req.headers()) {
        return http_error(StatusCode::FORBIDDEN, -32000, &why);
    }
    if req.uri().path() != "/mcp" {
        return empty(StatusCode::NOT_FOUND);
    }
    match *req.method() {
        Method::POST => post(shared, req).await,
        Method::GET => get(shared, req),
        Method::DELETE => delete(shared, req),
        _ => {
            let mut resp = empty(StatusCode::METHOD_NOT_ALLOWED);
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            resp
        }
    }
}

/// Looks up the session of a request: `Err` is the response for a missing or unknown one.
fn find_session(
    shared: &Shared,
    req: &Request<Incoming>,
) -> Result<(String, String), Box<Response<Body>>> {
    let Some(id) = header_str(req, "mcp-session-id") else {
        return Err(Box::new(http_error(
            StatusCode::BAD_REQUEST,
            -32000,
            "Bad Request: missing Mcp-Session-Id",
        )));
    };
    match shared.sessions().get(id) {
        Some(s) => Ok((id.to_string(), s.version.clone())),
        None => Err(Box::new(http_error(
            StatusCode::NOT_FOUND,
            -32001,
            "Session not found",
        ))),
    }
}

fn is_request(msg: &Value) -> bool {
    msg.get("method").is_some_and(Value::is_string) && msg.get("id").is_some_and(|id| !id.is_null())
}

fn is_valid_message(msg: &Value) -> bool {
    msg.is_object()
        && (msg.get("method").is_some_and(Value::is_string)
            || msg.get("result").is_some()
            || msg.get("error").is_some())
}

fn is_response(msg: &Value) -> bool {
    msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some())
}

async fn post(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let protocol = header_str(&req, "mcp-protocol-version").map(str::to_string);
    let session = find_session(&shared, &req);
    let headers = req.headers().clone();
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                tools::INVALID_REQUEST,
                "Request body too large",
            );
        }
    };
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(err) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                tools::PARSE_ERROR,
                &format!("Parse error: {err}"),
            );
        }
    };

    // 2026-07-28 (or a revision asked for in the envelope that we do not speak): no session,
    // no handshake, every request checked against its headers.
    let known = protocol
        .as_deref()
        .is_some_and(|p| SUPPORTED_VERSIONS.contains(&p));
    let modern = protocol.as_deref().is_some_and(is_sessionless)
        || (!known && session.is_err() && modern::body_version(&msg).is_some());
    if modern {
        if !msg.is_object() || !is_valid_message(&msg) || is_response(&msg) {
            return http_error(
                StatusCode::BAD_REQUEST,
                tools::INVALID_REQUEST,
                "Body must be a single JSON-RPC request or notification object",
            );
        }
        if !is_request(&msg) {
            return empty(StatusCode::ACCEPTED);
        }
        if let Err(refusal) = modern::validate(&headers, &msg) {
            let (status, answer) = *refusal;
            return json_response(status, &answer);
        }
        return respond(&shared, None, SESSIONLESS_VERSION, vec![msg], false).await;
    }
    if let Some(p) = protocol.as_deref()
        && !known
    {
        return http_error(
            StatusCode::BAD_REQUEST,
            -32000,
            &format!("Bad Request: unsupported MCP-Protocol-Version {p}"),
        );
    }

    // initialize: a new session.
    if is_request(&msg) && msg.get("method").and_then(Value::as_str) == Some("initialize") {
        return initialize(&shared, &msg).await;
    }

    let (session_id, version) = match session {
        Ok(pair) => pair,
        Err(resp) => return *resp,
    };
    let messages = match msg {
        Value::Array(items) => {
            if version != "2025-03-26" {
                return http_error(
                    StatusCode::BAD_REQUEST,
                    tools::INVALID_REQUEST,
                    "Batches are not supported",
                );
            }
            if items.is_empty() || !items.iter().all(is_valid_message) {
                return http_error(
                    StatusCode::BAD_REQUEST,
                    tools::INVALID_REQUEST,
                    "Invalid batch",
                );
            }
            for item in items.iter().filter(|m| is_response(m)) {
                shared.backchannel.answer(item);
            }
            let requests: Vec<Value> = items.into_iter().filter(is_request).collect();
            if requests.is_empty() {
                return empty(StatusCode::ACCEPTED);
            }
            return respond(&shared, Some(&session_id), &version, requests, true).await;
        }
        other => other,
    };
    if !is_valid_message(&messages) {
        return http_error(
            StatusCode::BAD_REQUEST,
            tools::INVALID_REQUEST,
            "Invalid request",
        );
    }
    if is_response(&messages) {
        shared.backchannel.answer(&messages);
        return empty(StatusCode::ACCEPTED);
    }
    if !is_request(&messages) {
        return empty(StatusCode::ACCEPTED);
    }
    respond(&shared, Some(&session_id), &version, vec![messages], false).await
}

async fn initialize(shared: &Arc<Shared>, msg: &Value) -> Response<Body> {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let requested = msg
        .get("params")
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = match requested {
        Some(v) if SUPPORTED_VERSIONS.contains(&v) && !is_sessionless(v) => v.to_string(),
        _ => LATEST_SESSION_VERSION.to_string(),
    };
    let session_id = shared.new_session_id();
    shared.sessions().insert(
        session_id.clone(),
        Session {
            version: version.clone(),
            streams: VecDeque::new(),
            gets: VecDeque::new(),
            subscriptions: HashSet::new(),
        },
    );
    let response = tools::result(
        &id,
        json!({
            "protocolVersion": version,
            "capabilities": tools::capabilities(&version),
            "serverInfo": tools::server_info(),
            "instructions": tools::INSTRUCTIONS
        }),
    );
    let resp = if shared.opts.json_responses {
        json_response(StatusCode::OK, &response)
    } else {
        let log = open_stream(shared, Some(&session_id), &version);
        log.push_message(&response);
        log.finish();
        sse_response(log.body(0, shared.opts.keepalive))
    };
    with_session_header(resp, &session_id)
}

/// A new SSE stream for the session (registered for resumption), primed for 2025-11-25.
fn open_stream(shared: &Shared, session: Option<&str>, version: &str) -> Arc<StreamLog> {
    let ids = shared.opts.event_ids && session.is_some();
    let log = shared.new_stream(ids);
    if let Some(id) = session
        && let Some(s) = shared.sessions().get_mut(id)
    {
        s.remember(&log);
    }
    if version == "2025-11-25" {
        log.push_priming(shared.opts.retry_ms);
    }
    log
}

/// Answers one request (see [`respond`]), adding what 2026-07-28 requires of results.
async fn answer(ctx: &Ctx<'_>, req: &Value) -> Value {
    let mut response = tools::handle(ctx, req).await;
    if is_sessionless(ctx.version) {
        let method = req.get("method").and_then(Value::as_str).unwrap_or("");
        modern::decorate(method, &mut response);
    }
    response
}

/// Answers requests: one SSE stream (or JSON body) carrying all their responses. The work runs
/// in its own task, so that a client dropping the response does not stop it.
async fn respond(
    shared: &Arc<Shared>,
    session: Option<&str>,
    version: &str,
    requests: Vec<Value>,
    batch: bool,
) -> Response<Body> {
    let session_owned = session.map(str::to_string);
    let version_owned = version.to_string();
    let listen = !batch
        && requests
            .first()
            .and_then(|r| r.get("method"))
            .and_then(Value::as_str)
            == Some("subscriptions/listen");
    let resp = if listen {
        // The response is the stream of change notifications; it stays open.
        let log = shared.new_stream(false);
        let req = requests.first().cloned().unwrap_or(Value::Null);
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let params = req.get("params").cloned().unwrap_or(Value::Null);
        let body = log.body(0, shared.opts.keepalive);
        shared.listeners.open(&id, &params, log);
        sse_response(body)
    } else if shared.opts.json_responses {
        let task_shared = Arc::clone(shared);
        let task = tokio::spawn(async move {
            let ctx = Ctx {
                shared: &task_shared,
                session: session_owned.as_deref(),
                version: &version_owned,
                emit: &Emit::Discard,
            };
            let futs = requests.iter().map(|r| answer(&ctx, r));
            futures_util::future::join_all(futs).await
        });
        match task.await {
            Ok(mut responses) => {
                if batch {
                    json_response(StatusCode::OK, &Value::Array(responses))
                } else {
                    let one = responses.pop().unwrap_or(Value::Null);
                    json_response(StatusCode::OK, &one)
                }
            }
            Err(_) => http_error(StatusCode::INTERNAL_SERVER_ERROR, -32603, "Internal error"),
        }
    } else {
        let log = open_stream(shared, session, version);
        let task_shared = Arc::clone(shared);
        let task_log = Arc::clone(&log);
        tokio::spawn(async move {
            let emit = Emit::Stream(Arc::clone(&task_log));
            let ctx = Ctx {
                shared: &task_shared,
                session: session_owned.as_deref(),
                version: &version_owned,
                emit: &emit,
            };
            let futs = requests.iter().map(|r| {
                let ctx = &ctx;
                let log = &task_log;
                async move {
                    let response = answer(ctx, r).await;
                    log.push_message(&response);
                }
            });
            futures_util::future::join_all(futs).await;
            task_log.finish();
        });
        sse_response(log.body(0, shared.opts.keepalive))
    };
    match session {
        Some(id) => with_session_header(resp, id),
        None => resp,
    }
}

fn get(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if header_str(&req, "mcp-protocol-version").is_some_and(is_sessionless) {
        let mut resp = empty(StatusCode::METHOD_NOT_ALLOWED);
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    let (session_id, version) = match find_session(&shared, &req) {
        Ok(pair) => pair,
        Err(resp) => return *resp,
    };
    let resuming = header_str(&req, "last-event-id").is_some();
    let refused = shared
        .refusal
        .every_get
        .or(shared.refusal.resumption.filter(|_| resuming));
    if let Some(status) = refused.and_then(|s| StatusCode::from_u16(s).ok()) {
        let mut resp = empty(status);
        if status == StatusCode::METHOD_NOT_ALLOWED {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
        }
        return resp;
    }
    if let Some(last) = header_str(&req, "last-event-id") {
        let Some((name, seq)) = stream::parse_event_id(last) else {
            return http_error(
                StatusCode::BAD_REQUEST,
                -32000,
                "Bad Request: malformed Last-Event-ID",
            );
        };
        let found = shared
            .sessions()
            .get(&session_id)
            .and_then(|s| s.streams.iter().find(|l| l.name == name).cloned());
        let Some((log, from)) = found.and_then(|log| log.resume_point(seq).map(|from| (log, from)))
        else {
            return http_error(
                StatusCode::BAD_REQUEST,
                -32000,
                "Bad Request: unknown Last-Event-ID",
            );
        };
        tracing::debug!(stream = %log.name, from, "serve-test: resuming stream");
        return with_session_header(
            sse_response(log.body(from, shared.opts.keepalive)),
            &session_id,
        );
    }
    let log = open_stream(&shared, Some(&session_id), &version);
    if let Some(s) = shared.sessions().get_mut(&session_id) {
        s.gets.push_back(Arc::clone(&log));
        while s.gets.len() > MAX_GETS {
            s.gets.pop_front();
        }
    }
    with_session_header(
        sse_response(log.body(0, shared.opts.keepalive)),
        &session_id,
    )
}

fn delete(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let (session_id, _) = match find_session(&shared, &req) {
        Ok(pair) => pair,
        Err(resp) => return *resp,
    };
    if let Some(s) = shared.sessions().remove(&session_id) {
        s.end();
    }
    empty(StatusCode::OK)
}
