//! The mock upstream: serves a recording's server side toward a live client, deaths included.
//!
//! Each live request is matched to a recorded exchange ([`super::matching`]); the mock answers
//! with the recorded head (status, content type, `Mcp-Session-Id` reused as is) and body (JSON
//! re-serialized with the live request id; SSE events re-emitted with their recorded pacing,
//! fields and data, the response's id substituted), then ends the way the recording did: clean
//! end, TCP reset (SO_LINGER 0), or an abort. Plain GET streams follow the recording's timeline:
//! their events and end happen once the other exchanges have been re-enacted up to that moment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::matching::{self, End, Exchange, Piece, Query};
use crate::conn::{ClientConn, ResetFlag};
use mcpscope_engine::event::{EndHow, Leg, header};
use mcpscope_engine::record::Recording;
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::jsonrpc::{self, Kind};

/// Recorded moments this close together count as simultaneous when a GET stream waits for the
/// rest of the replay (a server death resets the POST stream and the GET streams within µs).
const SIMULTANEOUS_MS: i64 = 100;
/// Largest request body read.
const MAX_BODY: usize = 4 << 20;
/// Pause between the last bytes and a reset, so the bytes leave before the RST.
const FLUSH_PAUSE: Duration = Duration::from_millis(15);

/// The error that aborts a response (hyper then closes or resets the connection).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplayError(String);

/// A running mock upstream.
pub struct ServeHandle {
    /// The bound address.
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl ServeHandle {
    /// The MCP endpoint, `http://ADDR/mcp` (any path is served).
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The mismatch lines so far (requests no recorded exchange matched).
    pub fn mismatches(&self) -> Vec<String> {
        self.state
            .mismatches
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Recorded exchanges with a request that no live request has used yet.
    pub fn unused(&self) -> Vec<String> {
        let Ok(used) = self.state.used.lock() else {
            return Vec::new();
        };
        self.state
            .exchanges
            .iter()
            .zip(used.iter())
            .filter(|(ex, uses)| **uses == 0 && matchable(ex))
            .map(|(ex, _)| format!("#{} {}", ex.stream, ex.describe()))
            .collect()
    }

    /// Stops accepting connections.
    pub fn shutdown(&self) {
        self.task.abort();
    }
}

impl Drop for ServeHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct State {
    exchanges: Vec<Exchange>,
    /// How many live requests each exchange has answered.
    used: Mutex<Vec<u32>>,
    /// (recorded session, recorded request id) → the live request id.
    ids: Mutex<HashMap<(Option<String>, String), Value>>,
    /// (recorded session, recorded progress token) → the live token.
    tokens: Mutex<HashMap<(Option<String>, String), Value>>,
    /// How far the replay has got on the recorded timeline.
    clock: watch::Sender<Option<DateTime<Utc>>>,
    speed: f64,
    mismatches: Mutex<Vec<String>>,
    /// The timers of each client connection.
    timeouts: crate::Timeouts,
}

/// Whether an exchange is ever picked by matching.
fn matchable(ex: &Exchange) -> bool {
    match ex.http_method.as_str() {
        "POST" => ex.has_request(),
        _ => true,
    }
}

impl State {
    fn advance(&self, t: DateTime<Utc>) {
        self.clock.send_if_modified(|c| {
            if c.is_none_or(|c| c < t) {
                *c = Some(t);
                true
            } else {
                false
            }
        });
    }

    /// Whether every matchable exchange (other than plain GETs) opened before `t` was used.
    fn all_used_before(&self, t: DateTime<Utc>) -> bool {
        let Ok(used) = self.used.lock() else {
            return true;
        };
        self.exchanges
            .iter()
            .zip(used.iter())
            .all(|(ex, uses)| *uses > 0 || ex.opened >= t || ex.is_plain_get() || !matchable(ex))
    }

    fn scaled(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
        if self.speed <= 0.0 {
            return Duration::ZERO;
        }
        let ms = (to - from).num_microseconds().unwrap_or(0).max(0) as f64 / 1000.0;
        Duration::from_secs_f64(ms / self.speed / 1000.0)
    }

    fn mismatch(&self, line: String) {
        // A closed stderr must not end the mock server.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("mcpscope replay: MISMATCH {line}\n"),
        );
        if let Ok(mut m) = self.mismatches.lock() {
            m.push(line);
        }
    }

    /// Remembers which live ids and progress tokens stand for the recorded ones.
    fn map_ids(&self, ex: &Exchange, live: &Value) {
        let Some(recorded) = &ex.request else {
            return;
        };
        let session = ex.session().map(str::to_string);
        for (rec, live) in jsonrpc::messages(recorded)
            .into_iter()
            .zip(jsonrpc::messages(live))
        {
            if let (Some(r), Some(l)) = (rec.get("id"), live.get("id"))
                && let Ok(mut ids) = self.ids.lock()
            {
                ids.insert((session.clone(), jsonrpc::id_text(r)), l.clone());
            }
            let token = |m: &Value| m.pointer("/params/_meta/progressToken").cloned();
            if let (Some(r), Some(l)) = (token(rec), token(live))
                && let Ok(mut tokens) = self.tokens.lock()
            {
                tokens.insert((session.clone(), jsonrpc::id_text(&r)), l);
            }
        }
    }

    /// Substitutes live ids (responses) and progress tokens in a server message; returns
    /// whether anything changed.
    fn substitute(&self, session: Option<&str>, body: &mut Value) -> bool {
        let session = session.map(str::to_string);
        let mut changed = false;
        let mut fix = |msg: &mut Value| {
            let is_response = matches!(
                jsonrpc::classify(msg),
                Kind::Result { .. } | Kind::Error { .. }
            );
            if is_response {
                let live = msg.get("id").and_then(|id| {
                    let ids = self.ids.lock().ok()?;
                    ids.get(&(session.clone(), jsonrpc::id_text(id))).cloned()
                });
                if let Some(live) = live
                    && msg.get("id") != Some(&live)
                {
                    msg["id"] = live;
                    changed = true;
                }
            } else if msg.get("method").and_then(Value::as_str) == Some("notifications/progress") {
                let live = msg.pointer("/params/progressToken").and_then(|t| {
                    let tokens = self.tokens.lock().ok()?;
                    tokens.get(&(session.clone(), jsonrpc::id_text(t))).cloned()
                });
                if let (Some(live), Some(slot)) = (live, msg.pointer_mut("/params/progressToken"))
                    && *slot != live
                {
                    *slot = live;
                    changed = true;
                }
            }
        };
        match body {
            Value::Array(items) => items.iter_mut().for_each(&mut fix),
            other => fix(other),
        }
        changed
    }
}

/// Serves `recording` as a mock upstream on `listen`; `speed` scales the recorded pacing
/// (1 = as recorded, 2 = twice as fast, 0 = no waiting).
pub async fn serve(
    recording: Recording,
    listen: SocketAddr,
    speed: f64,
) -> anyhow::Result<ServeHandle> {
    serve_with(recording, listen, speed, crate::Timeouts::default()).await
}

/// The most client connections served at once; past it, accepting waits for one to end.
pub const MAX_CONNECTIONS: usize = 128;

/// [`serve`] with the proxy's timers: a request head or body that does not arrive in time, or
/// a connection idle past `timeouts.idle`, is closed (an exchange in flight never is), and at
/// most [`MAX_CONNECTIONS`] connections are served at once.
pub async fn serve_with(
    recording: Recording,
    listen: SocketAddr,
    speed: f64,
    timeouts: crate::Timeouts,
) -> anyhow::Result<ServeHandle> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr()?;
    let exchanges = matching::exchanges(&recording.events);
    let (clock, _) = watch::channel(None);
    let state = Arc::new(State {
        used: Mutex::new(vec![0; exchanges.len()]),
        exchanges,
        ids: Mutex::new(HashMap::new()),
        tokens: Mutex::new(HashMap::new()),
        clock,
        speed: if speed.is_finite() {
            speed.max(0.0)
        } else {
            0.0
        },
        mismatches: Mutex::new(Vec::new()),
        timeouts,
    });
    let task = tokio::spawn(accept_loop(listener, state.clone()));
    Ok(ServeHandle { addr, state, task })
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let mut acceptor = crate::accept::Acceptor::default();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (tcp, _) = acceptor.accept(&listener, "replay serve").await;
        let _ = tcp.set_nodelay(true);
        let reset = ResetFlag::default();
        let activity = crate::activity::Activity::default();
        let io = TokioIo::new(ClientConn::new(tcp, reset.clone(), activity.clone()));
        let state = state.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let timeouts = state.timeouts;
            let watched = activity.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let in_flight = watched.begin(req.version() == http::Version::HTTP_2);
                let reply = handle(req, reset.clone(), state.clone());
                async move {
                    reply
                        .await
                        .map(|r| r.map(|body| crate::activity::Tracked::new(body, in_flight)))
                }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let serving = builder.serve_connection(io, service);
            tokio::select! {
                ended = serving => {
                    if let Err(e) = ended {
                        tracing::debug!("replay serve: connection ended: {e}");
                    }
                }
                why = activity.expired(timeouts.request_head, timeouts.idle) => {
                    tracing::debug!("replay serve: connection closed: {why}");
                }
            }
        });
    }
}

/// A response body fed by a task.
pub struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, ReplayError>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = ReplayError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ReplayError>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }
}

type Reply = Result<Response<ChannelBody>, ReplayError>;

fn simple(status: StatusCode, content_type: &str, body: String) -> Reply {
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(Ok(Bytes::from(body)));
    drop(tx);
    let mut response = Response::new(ChannelBody { rx });
    *response.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    Ok(response)
}

fn accepted() -> Reply {
    let (_, rx) = mpsc::channel(1);
    let mut response = Response::new(ChannelBody { rx });
    *response.status_mut() = StatusCode::ACCEPTED;
    Ok(response)
}

async fn handle(req: Request<Incoming>, reset: ResetFlag, state: Arc<State>) -> Reply {
    let http_method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let text_header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let session = text_header("mcp-session-id");
    let last_event_id = text_header("last-event-id");
    let within = state.timeouts.request_body;
    let reading = http_body_util::Limited::new(req.into_body(), MAX_BODY).collect();
    let bytes = match tokio::time::timeout(within, reading).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) => return Err(ReplayError(format!("reading the request: {e}"))),
        Err(_) => {
            return Err(ReplayError(format!(
                "the request body did not arrive within {within:?}"
            )));
        }
    };
    let body: Option<Value> = if bytes.is_empty() {
        None
    } else {
        serde_json::from_slice(&bytes).ok()
    };
    if http_method == "POST" && body.as_ref().is_some_and(|b| !matching::has_request(b)) {
        // Notifications and the client's responses.
        return accepted();
    }
    let query = Query {
        http_method: &http_method,
        session: session.as_deref(),
        last_event_id: last_event_id.as_deref(),
        body: body.as_ref(),
    };
    let picked = state
        .used
        .lock()
        .ok()
        .and_then(|mut used| matching::pick(&state.exchanges, &mut used, &query));
    let Some(index) = picked else {
        return no_match(&state, &query, &path);
    };
    let Some(ex) = state.exchanges.get(index).cloned() else {
        return no_match(&state, &query, &path);
    };
    tracing::info!("replay serve: {} → recorded #{}", ex.describe(), ex.stream);
    if let Some(live) = &body {
        state.map_ids(&ex, live);
    }
    state.advance(ex.opened);
    reenact(ex, body, reset, state).await
}

fn no_match(state: &State, query: &Query<'_>, path: &str) -> Reply {
    let (http_method, body) = (query.http_method, query.body);
    let what = matching::describe(http_method, body, query.last_event_id);
    let message = format!("mcpscope replay: no recorded exchange matches {what}");
    let session = query.session.unwrap_or("-");
    state.mismatch(format!("{what} on {path} session={session}"));
    match (http_method, body) {
        ("POST", Some(body)) => {
            let error =
                |m: &Value| jsonrpc::error(m.get("id").unwrap_or(&Value::Null), -32601, &message);
            let answer = match body {
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .filter(|m| matches!(jsonrpc::classify(m), Kind::Request { .. }))
                        .map(error)
                        .collect(),
                ),
                single => error(single),
            };
            simple(StatusCode::OK, "application/json", answer.to_string())
        }
        _ => simple(StatusCode::METHOD_NOT_ALLOWED, "text/plain", message),
    }
}

/// Response headers worth repeating (hop-by-hop, length and date are the transport's).
fn copy_headers(response: &mut Response<ChannelBody>, headers: &[(String, String)]) {
    const SKIP: [&str; 6] = [
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "date",
        "upgrade",
    ];
    for (name, value) in headers {
        if SKIP.iter().any(|s| name.eq_ignore_ascii_case(s)) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(n, v);
        }
    }
}

/// Whether the end is the server's doing (to re-enact) rather than the client going away.
fn server_end(end: &End) -> bool {
    end.leg == Leg::Upstream && end.how != EndHow::Cancelled
}

async fn reenact(ex: Exchange, live: Option<Value>, reset: ResetFlag, state: Arc<State>) -> Reply {
    let started = Instant::now();
    let Some(head) = ex.head.clone() else {
        // Refused before any answer (e.g. the server was down).
        match ex.end {
            Some(end) => {
                tokio::time::sleep(state.scaled(ex.opened, end.t)).await;
                state.advance(end.t);
                if end.how == EndHow::Reset {
                    reset.set();
                }
                return Err(ReplayError(format!(
                    "recorded: no answer, {}",
                    end.how.as_str()
                )));
            }
            None => {
                // The recording ends before the answer: never answer.
                std::future::pending::<()>().await;
                return Err(ReplayError("unreachable".into()));
            }
        }
    };
    tokio::time::sleep_until(started + state.scaled(ex.opened, head.t)).await;
    state.advance(head.t);
    let status = StatusCode::from_u16(head.status).unwrap_or(StatusCode::OK);
    let (tx, rx) = mpsc::channel(16);
    let mut response = Response::new(ChannelBody { rx });
    *response.status_mut() = status;
    copy_headers(&mut response, &head.headers);
    let head_at = Instant::now();
    if ex.is_sse() {
        tokio::spawn(sse_body(ex, tx, reset, state, head_at));
    } else {
        let bytes = json_body(&ex, live.as_ref(), &state);
        let cut = ex
            .end
            .filter(|e| server_end(e) && e.how != EndHow::Eof)
            .map(|e| e.bytes as usize);
        if let Some(cut) = cut {
            let recorded_len = header(&head.headers, "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let length = recorded_len.max(bytes.len()).max(cut + 1);
            if let Ok(v) = HeaderValue::from_str(&length.to_string()) {
                response
                    .headers_mut()
                    .insert(http::header::CONTENT_LENGTH, v);
            }
        }
        tokio::spawn(json_task(ex, bytes, cut, tx, reset, state, head_at));
    }
    Ok(response)
}

/// The JSON (or other) body: the recorded message with the live id, or a stand-in.
fn json_body(ex: &Exchange, live: Option<&Value>, state: &State) -> Bytes {
    let mut out = BytesMut::new();
    for item in &ex.items {
        match &item.piece {
            Piece::Json(value) => {
                let mut value = value.clone();
                state.substitute(ex.session(), &mut value);
                out.extend_from_slice(value.to_string().as_bytes());
            }
            Piece::Raw(text) => out.extend_from_slice(text.as_bytes()),
            Piece::Sse { .. } => {}
        }
    }
    if !out.is_empty() {
        return out.freeze();
    }
    let Some(head) = &ex.head else {
        return Bytes::new();
    };
    let bytes = ex.end.map_or(0, |e| e.bytes);
    if ContentKind::of_headers(&head.headers) == ContentKind::Json
        && (head.status >= 300 || bytes > 0)
    {
        // The body was not recorded (answered by the proxy, or cut): a stand-in.
        let id = live
            .and_then(|l| l.get("id"))
            .cloned()
            .unwrap_or(Value::Null);
        let stand_in = if head.status >= 300 {
            jsonrpc::error(
                &id,
                -32000,
                &format!("HTTP {} (replayed by mcpscope)", head.status),
            )
        } else {
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text",
                "text": " ".repeat(bytes as usize)}]}})
        };
        return Bytes::from(stand_in.to_string());
    }
    if bytes > 0 || head.status >= 300 {
        let reason = StatusCode::from_u16(head.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        return Bytes::from(format!("{} {reason} (replayed by mcpscope)", head.status));
    }
    Bytes::new()
}

async fn json_task(
    ex: Exchange,
    bytes: Bytes,
    cut: Option<usize>,
    tx: mpsc::Sender<Result<Bytes, ReplayError>>,
    reset: ResetFlag,
    state: Arc<State>,
    head_at: Instant,
) {
    let Some(head_t) = ex.head.as_ref().map(|h| h.t) else {
        return;
    };
    let Some(cut) = cut else {
        if !bytes.is_empty() && tx.send(Ok(bytes)).await.is_err() {
            return;
        }
        match ex.end {
            Some(end) if !server_end(&end) => {
                // The client went away in the recording; leave that to the live client.
                tx.closed().await;
            }
            Some(end) => state.advance(end.t),
            None => tx.closed().await,
        }
        return;
    };
    let mut sent = bytes.slice(..cut.min(bytes.len()));
    if sent.len() < cut {
        let mut padded = BytesMut::from(&sent[..]);
        padded.resize(cut, b' ');
        sent = padded.freeze();
    }
    if !sent.is_empty() && tx.send(Ok(sent)).await.is_err() {
        return;
    }
    if let Some(end) = ex.end {
        tokio::time::sleep_until(head_at + state.scaled(head_t, end.t)).await;
        abort(&tx, &reset, &state, end).await;
    }
}

/// Ends a response abnormally: a reset (RST) or an abort (FIN mid-body).
async fn abort(
    tx: &mpsc::Sender<Result<Bytes, ReplayError>>,
    reset: &ResetFlag,
    state: &State,
    end: End,
) {
    tokio::time::sleep(FLUSH_PAUSE).await;
    state.advance(end.t);
    if end.how == EndHow::Reset {
        reset.set();
    }
    let _ = tx
        .send(Err(ReplayError(format!(
            "recorded end: {}",
            end.how.as_str()
        ))))
        .await;
}

/// Writes one SSE event.
fn sse_text(id: Option<&str>, event: Option<&str>, retry: Option<u64>, data: &str) -> String {
    mcpscope_engine::wire::sse::encode(id, event, retry, data)
}

/// Waits until a recorded moment is due: by the pacing relative to the response head, and for
/// plain GET streams, once the replay has reached that moment (or has nothing left before it).
async fn wait_due(ex: &Exchange, t: DateTime<Utc>, head_at: Instant, state: &State) {
    let Some(head_t) = ex.head.as_ref().map(|h| h.t) else {
        return;
    };
    let due = head_at + state.scaled(head_t, t);
    if !ex.is_plain_get() {
        tokio::time::sleep_until(due).await;
        return;
    }
    let mut clock = state.clock.subscribe();
    loop {
        let reached = clock
            .borrow_and_update()
            .is_some_and(|c| c + chrono::Duration::milliseconds(SIMULTANEOUS_MS) >= t);
        if reached || (Instant::now() >= due && state.all_used_before(t)) {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(due.max(Instant::now() + Duration::from_millis(50))) => {}
            changed = clock.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

async fn sse_body(
    ex: Exchange,
    tx: mpsc::Sender<Result<Bytes, ReplayError>>,
    reset: ResetFlag,
    state: Arc<State>,
    head_at: Instant,
) {
    let mut answered = false;
    for item in &ex.items {
        let Piece::Sse {
            id,
            event,
            retry,
            data,
        } = &item.piece
        else {
            continue;
        };
        tokio::select! {
            _ = wait_due(&ex, item.t, head_at, &state) => {}
            _ = tx.closed() => return,
        }
        let mut data = data.clone();
        if let Ok(mut value) = serde_json::from_str::<Value>(&data) {
            answered |= jsonrpc::messages(&value).iter().any(|m| {
                matches!(
                    jsonrpc::classify(m),
                    Kind::Result { .. } | Kind::Error { .. }
                )
            });
            if state.substitute(ex.session(), &mut value) {
                data = value.to_string();
            }
        }
        let text = sse_text(id.as_deref(), event.as_deref(), *retry, &data);
        if tx.send(Ok(Bytes::from(text))).await.is_err() {
            return;
        }
        state.advance(item.t);
    }
    match ex.end {
        Some(end) if server_end(&end) => {
            tokio::select! {
                _ = wait_due(&ex, end.t, head_at, &state) => {}
                _ = tx.closed() => return,
            }
            if end.how == EndHow::Eof {
                state.advance(end.t);
                // Dropping the sender ends the body cleanly.
            } else {
                abort(&tx, &reset, &state, end).await;
            }
        }
        Some(end) if answered => state.advance(end.t),
        // The client went away in the recording, or the recording stops here: hold the stream
        // open until the live client goes away.
        _ => tx.closed().await,
    }
}
