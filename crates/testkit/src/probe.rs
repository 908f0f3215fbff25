//! A raw Streamable HTTP client that reports exactly how each answer ended: used to make the
//! shipped recordings and to check that a client sees the same thing live and from a replay.

use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use mcpscope_engine::event::EndHow;
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::sse::SseParser;

/// Protocol revision the probe speaks.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Bound on every exchange.
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// What became of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The JSON-RPC response arrived (the whole message: `result` or `error`).
    Response(Value),
    /// A non-2xx HTTP status, with the body text.
    Status(u16, String),
    /// The answer ended before the response.
    Died {
        /// How it ended.
        how: EndHow,
        /// Whether a response head had arrived.
        head: bool,
        /// SSE events seen before.
        events: usize,
        /// The last SSE event id seen.
        last_event_id: Option<String>,
    },
    /// A 2xx answer without a JSON-RPC response (202, or an empty body).
    NoResponse(u16),
}

impl Outcome {
    /// The `result`, if the call was answered with one.
    pub fn result(&self) -> Option<&Value> {
        match self {
            Outcome::Response(v) => v.get("result"),
            _ => None,
        }
    }

    /// The first text content of a tool result.
    pub fn text(&self) -> Option<&str> {
        self.result()?
            .pointer("/content/0/text")
            .and_then(Value::as_str)
    }

    /// How the answer died, if it did.
    pub fn died(&self) -> Option<EndHow> {
        match self {
            Outcome::Died { how, .. } => Some(*how),
            _ => None,
        }
    }
}

/// A plain GET stream read in the background.
pub struct GetStream {
    /// The status of the GET.
    pub status: u16,
    task: Option<JoinHandle<Outcome>>,
}

impl GetStream {
    /// Waits (bounded) for the stream to end; `None` if it is still open after `within`.
    pub async fn ended(&mut self, within: Duration) -> Option<Outcome> {
        let task = self.task.as_mut()?;
        match tokio::time::timeout(within, task).await {
            Ok(Ok(outcome)) => {
                self.task = None;
                Some(outcome)
            }
            _ => None,
        }
    }

    /// Closes the stream from the client side.
    pub fn close(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for GetStream {
    fn drop(&mut self) {
        self.close();
    }
}

/// The client.
pub struct Probe {
    http: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    /// The session id, once assigned.
    pub session: Option<String>,
    next_id: i64,
}

impl Probe {
    /// A client for the MCP endpoint `url` (plain http).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let uri: Uri = url.parse().with_context(|| format!("bad url {url:?}"))?;
        Ok(Self {
            http: Client::builder(TokioExecutor::new()).build_http(),
            uri,
            session: None,
            next_id: 1,
        })
    }

    /// The id the next request will carry.
    pub fn next_id(&self) -> i64 {
        self.next_id
    }

    /// `initialize`, keeping the session id.
    pub async fn initialize(&mut self) -> anyhow::Result<Outcome> {
        let params = json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "mcpscope-probe", "version": env!("CARGO_PKG_VERSION")}});
        let outcome = self.request("initialize", params).await?;
        if let Outcome::Response(_) = outcome {
            self.notify("notifications/initialized", json!({})).await?;
        }
        Ok(outcome)
    }

    /// `tools/call`; with `progress`, asks for progress notifications.
    pub async fn call(
        &mut self,
        tool: &str,
        arguments: Value,
        progress: bool,
    ) -> anyhow::Result<Outcome> {
        let mut params = json!({"name": tool, "arguments": arguments});
        if progress {
            params["_meta"] = json!({"progressToken": format!("p{}", self.next_id)});
        }
        self.request("tools/call", params).await
    }

    fn builder(&self, method: Method) -> http::request::Builder {
        let accept = if method == Method::GET {
            "text/event-stream"
        } else {
            "application/json, text/event-stream"
        };
        let mut req = Request::builder()
            .method(method)
            .uri(self.uri.clone())
            .header(header::ACCEPT, accept);
        if let Some(session) = &self.session {
            req = req
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        req
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> Result<http::Response<Incoming>, Outcome> {
        match tokio::time::timeout(TIMEOUT, self.http.request(req)).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(Outcome::Died {
                how: mcpscope_proxy::transport::classify(&e).0,
                head: false,
                events: 0,
                last_event_id: None,
            }),
            Err(_) => Err(Outcome::Died {
                how: EndHow::Cancelled,
                head: false,
                events: 0,
                last_event_id: None,
            }),
        }
    }

    /// Sends a notification; returns the status.
    pub async fn notify(&mut self, method: &str, params: Value) -> anyhow::Result<u16> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let req = self
            .builder(Method::POST)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(msg.to_string())))?;
        match self.send(req).await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let _ = resp.into_body().collect().await;
                Ok(status)
            }
            Err(outcome) => bail!("{method}: {outcome:?}"),
        }
    }

    /// Sends a request and reads its answer (JSON or SSE) to the response or the end.
    pub async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Outcome> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let req = self
            .builder(Method::POST)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(msg.to_string())))?;
        let resp = match self.send(req).await {
            Ok(resp) => resp,
            Err(outcome) => return Ok(outcome),
        };
        if self.session.is_none() {
            self.session = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
        }
        Ok(read_answer(resp, &id).await)
    }

    /// Resumes a stream: GET with `Last-Event-ID`, read until the response to `id`.
    pub async fn resume(&mut self, last_event_id: &str, id: Value) -> anyhow::Result<Outcome> {
        let req = self
            .builder(Method::GET)
            .header("last-event-id", last_event_id)
            .body(Full::new(Bytes::new()))?;
        Ok(match self.send(req).await {
            Ok(resp) => read_answer(resp, &id).await,
            Err(outcome) => outcome,
        })
    }

    /// Opens the plain GET stream and reads it in the background.
    pub async fn open_get(&mut self) -> anyhow::Result<GetStream> {
        let req = self.builder(Method::GET).body(Full::new(Bytes::new()))?;
        match self.send(req).await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let task = tokio::spawn(read_answer(resp, Value::Null));
                Ok(GetStream {
                    status,
                    task: Some(task),
                })
            }
            Err(outcome) => bail!("GET: {outcome:?}"),
        }
    }

    /// DELETE the session; returns the status.
    pub async fn delete(&mut self) -> anyhow::Result<u16> {
        let req = self.builder(Method::DELETE).body(Full::new(Bytes::new()))?;
        match self.send(req).await {
            Ok(resp) => Ok(resp.status().as_u16()),
            Err(outcome) => bail!("DELETE: {outcome:?}"),
        }
    }
}

/// Reads an answer: a JSON body, or SSE until the response to `id` (any response when `id` is
/// null and none is expected: a GET stream runs to its end).
async fn read_answer(
    resp: http::Response<Incoming>,
    id: impl std::borrow::Borrow<Value>,
) -> Outcome {
    let id = id.borrow();
    let status = resp.status().as_u16();
    let content = ContentKind::of(
        resp.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    let mut body = resp.into_body();
    if !(200..300).contains(&status) {
        let text = match tokio::time::timeout(TIMEOUT, body.collect()).await {
            Ok(Ok(b)) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
            _ => String::new(),
        };
        return Outcome::Status(status, text);
    }
    let sse = content == ContentKind::Sse;
    let mut parser = SseParser::new();
    let mut frames = Vec::new();
    let mut json = Vec::new();
    let mut events = 0;
    let mut last_event_id = None;
    loop {
        let frame = match tokio::time::timeout(TIMEOUT, body.frame()).await {
            Ok(frame) => frame,
            Err(_) => {
                return Outcome::Died {
                    how: EndHow::Cancelled,
                    head: true,
                    events,
                    last_event_id,
                };
            }
        };
        match frame {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if !sse {
                    json.extend_from_slice(&data);
                    continue;
                }
                parser.feed(&data, &mut frames);
                for f in frames.drain(..) {
                    events += 1;
                    if f.id.is_some() {
                        last_event_id = f.id.clone();
                    }
                    let Ok(msg) = serde_json::from_str::<Value>(&f.data) else {
                        continue;
                    };
                    let is_response = msg.get("method").is_none()
                        && (msg.get("result").is_some() || msg.get("error").is_some());
                    if is_response && !id.is_null() && msg.get("id") == Some(id) {
                        return Outcome::Response(msg);
                    }
                }
            }
            Some(Err(e)) => {
                return Outcome::Died {
                    how: mcpscope_proxy::transport::classify(&e).0,
                    head: true,
                    events,
                    last_event_id,
                };
            }
            None => break,
        }
    }
    if sse {
        return Outcome::Died {
            how: EndHow::Eof,
            head: true,
            events,
            last_event_id,
        };
    }
    if json.is_empty() {
        return Outcome::NoResponse(status);
    }
    match serde_json::from_slice::<Value>(&json) {
        Ok(v) => Outcome::Response(v),
        Err(_) => Outcome::Died {
            how: EndHow::Error,
            head: true,
            events: 0,
            last_event_id: None,
        },
    }
}
