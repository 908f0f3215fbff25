//! The intercepting proxy: a hyper server in front of a shared hyper client, with a tap on every
//! stream. It forwards bytes, timing and the kind of stream end faithfully, and never waits on
//! the views or the recorder.

pub mod conn;
pub mod controller;
pub mod forward;
pub mod hub;
pub mod mock;
pub mod running;
pub mod sink;
pub mod tap;
pub mod transport;
pub mod upstream;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use conn::{ClientConn, ResetFlag};
use mcpscope_engine::event::{Direction, EndHow, EventKind, Leg, StreamId, header};
use mcpscope_engine::fault::{Fault, Plan, Planner, RequestInfo, Trigger};
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::jsonrpc;
use sink::EventSink;
use tap::{TapBody, TapContext, TapError};
use upstream::{SendError, UpstreamConn};

/// The most of a request body read before forwarding (JSON-RPC messages are small).
const REQUEST_CAP: usize = 64 * 1024 * 1024;

/// The body type the proxy answers with.
pub type ProxyBody = UnsyncBoxBody<Bytes, TapError>;

/// How the proxy is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The upstream MCP endpoint.
    pub upstream: Uri,
    /// Accept any TLS certificate.
    pub insecure: bool,
    /// Accept requests whose `Host` is not a loopback name.
    pub allow_remote: bool,
    /// Replace credentials in reported headers.
    pub redact: bool,
}

/// A live exchange that faults can be applied to.
#[derive(Debug)]
struct Live {
    session: Option<String>,
    http_method: String,
    control: mpsc::UnboundedSender<Plan>,
}

/// State shared by every connection.
pub struct Shared {
    sink: EventSink,
    config: Config,
    connector: upstream::Connector,
    next_stream: AtomicU64,
    next_conn: AtomicU64,
    live: Mutex<HashMap<StreamId, Live>>,
    down_until: Mutex<Option<Instant>>,
    planner: RwLock<Option<Arc<dyn Planner>>>,
}

impl Shared {
    /// Sets the rule engine consulted for every request.
    pub fn set_planner(&self, planner: Arc<dyn Planner>) {
        if let Ok(mut slot) = self.planner.write() {
            *slot = Some(planner);
        }
    }

    /// Applies a fault to a live exchange at once.
    pub fn apply(&self, stream: StreamId, plan: Plan) -> Result<(), String> {
        let live = self
            .live
            .lock()
            .map_err(|_| "proxy state poisoned".to_string())?;
        let entry = live
            .get(&stream)
            .ok_or_else(|| format!("stream #{stream} is not live"))?;
        entry
            .control
            .send(plan)
            .map_err(|_| format!("stream #{stream} has ended"))
    }

    /// Live exchanges: (id, HTTP method, session).
    pub fn live_streams(&self) -> Vec<(StreamId, String, Option<String>)> {
        let Ok(live) = self.live.lock() else {
            return Vec::new();
        };
        let mut out: Vec<_> = live
            .iter()
            .map(|(id, l)| (*id, l.http_method.clone(), l.session.clone()))
            .collect();
        out.sort_by_key(|(id, _, _)| *id);
        out
    }

    fn register(
        &self,
        stream: StreamId,
        http_method: &str,
        session: Option<String>,
    ) -> mpsc::UnboundedReceiver<Plan> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut live) = self.live.lock() {
            live.insert(
                stream,
                Live {
                    session,
                    http_method: http_method.to_string(),
                    control: tx,
                },
            );
        }
        rx
    }

    fn unregister(&self, stream: StreamId) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(&stream);
        }
    }

    /// The server "dies": every GET stream of the session is reset, and new requests are
    /// refused (reset) for `down`.
    fn server_dies(&self, origin: StreamId, session: Option<&str>, down: Duration) {
        if let Ok(mut until) = self.down_until.lock() {
            *until = Some(Instant::now() + down);
        }
        let Ok(live) = self.live.lock() else {
            return;
        };
        for (id, entry) in live.iter() {
            let same_session = session.is_none() || entry.session.as_deref() == session;
            if *id != origin && entry.http_method == "GET" && same_session {
                let _ = entry.control.send(Plan {
                    fault: Fault::Reset,
                    trigger: Trigger::Now,
                    origin: format!("server-dies on #{origin}"),
                });
            }
        }
    }

    fn is_down(&self) -> bool {
        self.down_until
            .lock()
            .ok()
            .and_then(|until| *until)
            .is_some_and(|until| Instant::now() < until)
    }

    fn planner(&self) -> Option<Arc<dyn Planner>> {
        self.planner.read().ok().and_then(|p| p.clone())
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
    /// Stops accepting connections.
    pub fn shutdown(&self) {
        self.task.abort();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds and starts the proxy; facts go to `sink`.
pub async fn start(config: Config, sink: EventSink) -> anyhow::Result<Proxy> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        sink,
        connector: upstream::connector(config.insecure)?,
        config,
        next_stream: AtomicU64::new(1),
        next_conn: AtomicU64::new(1),
        live: Mutex::new(HashMap::new()),
        down_until: Mutex::new(None),
        planner: RwLock::new(None),
    });
    shared.sink.emit(EventKind::ProxyStarted {
        listen: addr.to_string(),
        upstream: shared.config.upstream.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    });
    let task = tokio::spawn(accept_loop(listener, shared.clone()));
    Ok(Proxy { addr, shared, task })
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (tcp, _peer) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let conn_id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let reset = ResetFlag::default();
        let io = TokioIo::new(ClientConn::new(tcp, reset.clone()));
        let shared = shared.clone();
        let link = ConnSlot::default();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                handle(req, conn_id, reset.clone(), link.clone(), shared.clone())
            });
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(io, service)
                .await
            {
                tracing::debug!("connection {conn_id} ended: {e}");
            }
        });
    }
}

fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Answers one request from the proxy itself (not the upstream), reporting it.
fn local_answer(
    shared: &Shared,
    stream: StreamId,
    status: StatusCode,
    content_type: &str,
    body: String,
) -> Response<ProxyBody> {
    let len = body.len() as u64;
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    shared.sink.emit(EventKind::ResponseHead {
        stream,
        status: status.as_u16(),
        headers: forward::header_list(response.headers(), shared.config.redact),
    });
    shared.sink.emit(EventKind::StreamEnded {
        stream,
        dir: Direction::ServerToClient,
        how: EndHow::Eof,
        leg: Leg::Upstream,
        bytes: len,
        detail: Some("answered by mcpscope".into()),
    });
    response
}

fn jsonrpc_error(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// The id of a single request body, for errors the proxy answers itself.
fn request_id(body: Option<&Value>) -> Value {
    body.and_then(|b| b.get("id"))
        .cloned()
        .unwrap_or(Value::Null)
}

async fn handle(
    req: Request<Incoming>,
    conn: u64,
    reset: ResetFlag,
    link: ConnSlot,
    shared: Arc<Shared>,
) -> Result<Response<ProxyBody>, TapError> {
    let stream = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    // On HTTP/2 a dead stream is reset on its own (RST_STREAM, from the body's error); resetting
    // the TCP connection would kill its sibling streams too.
    let reset = if req.version() == http::Version::HTTP_2 {
        ResetFlag::default()
    } else {
        reset
    };
    let sink = shared.sink.clone();
    let redact = shared.config.redact;
    let http_method = req.method().as_str().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.to_string());
    let headers = forward::header_list(req.headers(), redact);
    let session = header(&headers, "mcp-session-id").map(str::to_string);
    sink.emit(EventKind::StreamOpened {
        stream,
        conn,
        method: http_method.clone(),
        path,
        headers,
    });

    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    if !shared.config.allow_remote && !forward::is_loopback_host(&host) {
        let message = format!(
            "mcpscope: Host {host:?} is not a loopback name (DNS rebinding guard; see --allow-remote)"
        );
        return Ok(local_answer(
            &shared,
            stream,
            StatusCode::FORBIDDEN,
            "text/plain",
            message,
        ));
    }
    if shared.is_down() {
        sink.emit(EventKind::FaultInjected {
            stream,
            fault: "refused".into(),
            rule: Some("server-dies".into()),
        });
        sink.emit(EventKind::StreamEnded {
            stream,
            dir: Direction::ServerToClient,
            how: EndHow::Reset,
            leg: Leg::Upstream,
            bytes: 0,
            detail: Some("injected: the server is down".into()),
        });
        reset.set();
        return Err(TapError::new("server down (injected)"));
    }

    let (mut parts, body) = req.into_parts();
    let bytes = match read_request(body, &sink, stream).await {
        Ok(bytes) => bytes,
        Err(e) => return Err(e),
    };
    let parsed = if bytes.is_empty() {
        None
    } else {
        match jsonrpc::parse_body(&bytes) {
            Ok(body) => {
                sink.emit(EventKind::Message {
                    stream,
                    dir: Direction::ClientToServer,
                    body: body.clone(),
                });
                Some(body)
            }
            Err(reason) => {
                let raw = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).into_owned();
                sink.emit(EventKind::InvalidMessage {
                    stream,
                    dir: Direction::ClientToServer,
                    reason,
                    raw,
                });
                None
            }
        }
    };

    let plan = shared.planner().and_then(|p| {
        p.plan(&RequestInfo {
            stream,
            http_method: &http_method,
            session: session.as_deref(),
            body: parsed.as_ref(),
        })
    });
    if let Some(Plan {
        fault: Fault::Status(code),
        trigger,
        origin,
    }) = &plan
    {
        if let Trigger::After(d) = trigger {
            tokio::time::sleep(*d).await;
        }
        sink.emit(EventKind::FaultInjected {
            stream,
            fault: format!("status:{code}"),
            rule: Some(origin.clone()),
        });
        let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let (content_type, body) = if *code == 404 {
            (
                "application/json",
                jsonrpc_error(request_id(parsed.as_ref()), -32001, "Session not found"),
            )
        } else {
            ("text/plain", format!("{} (injected by mcpscope)", status))
        };
        return Ok(local_answer(&shared, stream, status, content_type, body));
    }

    let uri = match forward::upstream_uri(&shared.config.upstream, &parts.uri) {
        Ok(uri) => uri,
        Err(e) => {
            let body = jsonrpc_error(
                request_id(parsed.as_ref()),
                -32600,
                &format!("mcpscope: bad request URI: {e}"),
            );
            return Ok(local_answer(
                &shared,
                stream,
                StatusCode::BAD_REQUEST,
                "application/json",
                body,
            ));
        }
    };
    forward::strip_hop_by_hop(&mut parts.headers);
    if let Some(authority) = uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        parts.headers.insert(http::header::HOST, authority);
    }
    parts.uri = uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
    parts.version = http::Version::HTTP_11;
    let upstream_req = Request::from_parts(parts, Full::new(bytes));
    let control = shared.register(stream, &http_method, session.clone());

    let (response, upstream) = match send_upstream(&shared, &link, upstream_req).await {
        Ok(sent) => sent,
        Err(UpstreamFailure::Connect(cause)) => {
            shared.unregister(stream);
            let upstream = shared.config.upstream.to_string();
            sink.emit(EventKind::UpstreamUnreachable {
                stream,
                error: cause.clone(),
            });
            let message = format!("mcpscope: upstream {upstream} is unreachable: {cause}");
            let body = jsonrpc_error(request_id(parsed.as_ref()), -32000, &message);
            return Ok(local_answer(
                &shared,
                stream,
                StatusCode::BAD_GATEWAY,
                "application/json",
                body,
            ));
        }
        Err(UpstreamFailure::Failed(e)) => {
            shared.unregister(stream);
            let cause = upstream::error_text(&e);
            let (how, _) = transport::classify(&e);
            sink.emit(EventKind::StreamEnded {
                stream,
                dir: Direction::ServerToClient,
                how,
                leg: Leg::Upstream,
                bytes: 0,
                detail: Some(format!("before the response head: {cause}")),
            });
            if how == EndHow::Reset {
                reset.set();
            }
            return Err(TapError::new(&cause));
        }
    };

    let (mut parts, incoming) = response.into_parts();
    // An upstream that closes its connection after this response (close-delimited body or
    // `Connection: close`) is mirrored: the client's connection closes after it too.
    let closes = forward::closes_after(&parts.headers);
    forward::strip_hop_by_hop(&mut parts.headers);
    if closes {
        parts
            .headers
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    let content = ContentKind::of(
        parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    let content_length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    sink.emit(EventKind::ResponseHead {
        stream,
        status: parts.status.as_u16(),
        headers: forward::header_list(&parts.headers, redact),
    });
    let session = session.or_else(|| {
        parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let tap = TapBody::new(
        incoming,
        TapContext {
            stream,
            sink,
            reset,
            content,
            content_length,
            session,
            shared: shared.clone(),
            plan,
            control,
            upstream: Some(upstream),
            link,
        },
    );
    Ok(Response::from_parts(parts, tap.boxed_unsync()))
}

/// The upstream connection kept for a client connection between its requests.
pub type ConnSlot = Arc<Mutex<Option<UpstreamConn>>>;

/// Why a request did not get a response head from the upstream.
enum UpstreamFailure {
    /// No connection could be made.
    Connect(String),
    /// The connection failed under the request.
    Failed(hyper::Error),
}

/// Sends a request on the client connection's upstream connection (a new one when there is
/// none, or when the kept one was closing and never sent it).
async fn send_upstream(
    shared: &Shared,
    link: &ConnSlot,
    request: Request<Full<Bytes>>,
) -> Result<(Response<Incoming>, UpstreamConn), UpstreamFailure> {
    let kept = link.lock().ok().and_then(|mut slot| slot.take());
    let mut request = request;
    if let Some(mut conn) = kept
        && conn.ready().await
    {
        match conn.send(request).await {
            Ok(response) => return Ok((response, conn)),
            Err(SendError::NotSent(back, _)) => request = *back,
            Err(SendError::Failed(e)) => return Err(UpstreamFailure::Failed(e)),
        }
    }
    let mut conn = UpstreamConn::connect(&shared.connector, &shared.config.upstream)
        .await
        .map_err(|e| UpstreamFailure::Connect(e.0))?;
    match conn.send(request).await {
        Ok(response) => Ok((response, conn)),
        Err(SendError::NotSent(_, e) | SendError::Failed(e)) => Err(UpstreamFailure::Failed(e)),
    }
}

/// Reads a request body whole (bounded), reporting a client that vanished mid-body.
async fn read_request(
    mut body: Incoming,
    sink: &EventSink,
    stream: StreamId,
) -> Result<Bytes, TapError> {
    let mut buf = bytes::BytesMut::new();
    loop {
        match body.frame().await {
            None => return Ok(buf.freeze()),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if buf.len() + data.len() > REQUEST_CAP {
                        return Err(TapError::new("request body too large"));
                    }
                    buf.extend_from_slice(&data);
                }
            }
            Some(Err(e)) => {
                let (how, detail) = match transport::classify(&e) {
                    (EndHow::Reset, detail) => (EndHow::Reset, detail),
                    (_, detail) => (EndHow::Cancelled, detail),
                };
                sink.emit(EventKind::StreamEnded {
                    stream,
                    dir: Direction::ClientToServer,
                    how,
                    leg: Leg::Client,
                    bytes: buf.len() as u64,
                    detail: Some(detail),
                });
                return Err(TapError::new("client vanished mid-request"));
            }
        }
    }
}
