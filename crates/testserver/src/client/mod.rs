//! The MCP test client: one Streamable HTTP client for the demo, the recorded scenarios and the
//! tests. It initializes (keeping the session id and the protocol version), sends any request,
//! notification or raw body, and reads each answer (JSON, or SSE to the response) keeping every
//! SSE frame, every JSON-RPC message and how the body ended, as
//! [`mcpscope_transport::classify`] names it. GET streams can resume with `Last-Event-ID`
//! and run in the background. It never prints; it logs frames with `tracing` at debug level.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

mod answer;

pub use answer::{Answer, Background, Outcome, Reading, Seen};

/// The protocol revision the client speaks unless told otherwise.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Bound on each send and each read of an answer's body.
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// A Streamable HTTP MCP client over plain http.
pub struct McpClient {
    http: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    name: String,
    protocol: String,
    session: Option<String>,
    next_id: i64,
}

impl McpClient {
    /// A client for the MCP endpoint `url` (plain http), named `mcpscope-test-client`.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("bad MCP url {url:?}"))?;
        anyhow::ensure!(
            uri.scheme_str() == Some("http"),
            "the client speaks plain http only: {url}"
        );
        Ok(Self {
            http: Client::builder(TokioExecutor::new()).build_http(),
            uri,
            name: "mcpscope-test-client".into(),
            protocol: PROTOCOL_VERSION.into(),
            session: None,
            next_id: 1,
        })
    }

    /// The `clientInfo.name` sent with `initialize`.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }

    /// The protocol revision asked for in `initialize` and sent in `Mcp-Protocol-Version`.
    pub fn speaking(mut self, version: &str) -> Self {
        self.protocol = version.into();
        self
    }

    /// Uses `session` as if the server had assigned it.
    pub fn with_session(mut self, session: &str) -> Self {
        self.session = Some(session.into());
        self
    }

    /// The session id, once assigned.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The protocol revision in use (the one the server agreed to, after `initialize`).
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// The id the next request will carry.
    pub fn next_id(&self) -> i64 {
        self.next_id
    }

    /// `initialize`: keeps the session id and the agreed revision. Does not send
    /// `notifications/initialized` (see [`McpClient::initialized`]).
    pub async fn initialize(&mut self) -> anyhow::Result<Answer> {
        let params = json!({"protocolVersion": self.protocol, "capabilities": {},
            "clientInfo": {"name": self.name, "version": env!("CARGO_PKG_VERSION")}});
        let answer = self.request("initialize", params).await?;
        if let Some(version) = answer
            .result()
            .and_then(|r| r.get("protocolVersion"))
            .and_then(Value::as_str)
        {
            self.protocol = version.to_string();
        }
        Ok(answer)
    }

    /// `notifications/initialized`; returns the status.
    pub async fn initialized(&mut self) -> anyhow::Result<u16> {
        self.notify("notifications/initialized", json!({})).await
    }

    /// `initialize` then, if answered, `notifications/initialized`.
    pub async fn handshake(&mut self) -> anyhow::Result<Answer> {
        let answer = self.initialize().await?;
        if answer.result().is_some() {
            self.initialized().await?;
        }
        Ok(answer)
    }

    /// `tools/call`; with `progress`, the request carries `_meta.progressToken`.
    pub async fn call(
        &mut self,
        tool: &str,
        arguments: Value,
        progress: bool,
    ) -> anyhow::Result<Answer> {
        let mut params = json!({"name": tool, "arguments": arguments});
        if progress {
            params["_meta"] = json!({"progressToken": format!("p{}", self.next_id)});
        }
        self.request("tools/call", params).await
    }

    /// Sends a request with the next id and reads its answer to the response or the end.
    pub async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Answer> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        Ok(self.post(&msg).await?.answer(Some(&json!(id))).await)
    }

    /// Sends a notification; returns the status (the body, if any, is read and dropped).
    pub async fn notify(&mut self, method: &str, params: Value) -> anyhow::Result<u16> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let answer = self.post(&msg).await?.answer(None).await;
        anyhow::ensure!(answer.status != 0, "{method}: {:?}", answer.outcome);
        Ok(answer.status)
    }

    /// `notifications/cancelled` for the request `id`; returns the status.
    pub async fn cancel(&mut self, id: Value, reason: &str) -> anyhow::Result<u16> {
        let params = json!({"requestId": id, "reason": reason});
        self.notify("notifications/cancelled", params).await
    }

    /// POSTs any JSON-RPC message (or batch); the answer is left to read.
    pub async fn post(&mut self, message: &Value) -> anyhow::Result<Reading> {
        self.send(Method::POST, Some(message), &[]).await
    }

    /// Opens a GET stream, resuming after `last_event_id` if given; the stream is left to read.
    pub async fn get(&mut self, last_event_id: Option<&str>) -> anyhow::Result<Reading> {
        let extra: Vec<(&str, &str)> = last_event_id
            .map(|id| ("last-event-id", id))
            .into_iter()
            .collect();
        self.send(Method::GET, None, &extra).await
    }

    /// Resumes a stream: GET with `Last-Event-ID`, read until the response to `id`.
    pub async fn resume(&mut self, last_event_id: &str, id: Value) -> anyhow::Result<Answer> {
        Ok(self.get(Some(last_event_id)).await?.answer(Some(&id)).await)
    }

    /// Opens the plain GET stream and reads it to its end in the background.
    pub async fn open_get(&mut self) -> anyhow::Result<Background> {
        let reading = self.get(None).await?;
        anyhow::ensure!(reading.status != 0, "GET: {:?}", reading.ended());
        Ok(reading.in_background())
    }

    /// DELETE the session; returns the status and forgets the session.
    pub async fn delete(&mut self) -> anyhow::Result<u16> {
        let answer = self
            .send(Method::DELETE, None, &[])
            .await?
            .answer(None)
            .await;
        anyhow::ensure!(answer.status != 0, "DELETE: {:?}", answer.outcome);
        self.session = None;
        Ok(answer.status)
    }

    /// Sends `method` with an optional JSON body, the session headers and `extra` headers.
    pub async fn send(
        &mut self,
        method: Method,
        body: Option<&Value>,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Reading> {
        let bytes = body.map(|v| Bytes::from(v.to_string()));
        self.send_bytes(method, bytes, extra).await
    }

    /// Sends `method` with an optional body (sent as `application/json`, whatever it holds),
    /// the session headers and `extra` headers. A transport failure before the response head is
    /// a [`Reading`] with status 0 that has already ended.
    pub async fn send_bytes(
        &mut self,
        method: Method,
        body: Option<Bytes>,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Reading> {
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
                .header("mcp-protocol-version", &self.protocol);
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in extra {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(body.unwrap_or_default()))?;
        let resp = match tokio::time::timeout(TIMEOUT, self.http.request(req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                return Ok(Reading::failed(mcpscope_transport::classify(&e).0));
            }
            Err(_) => return Ok(Reading::failed(mcpscope_engine::event::EndHow::Cancelled)),
        };
        if self.session.is_none()
            && let Some(session) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            self.session = Some(session.to_string());
        }
        Ok(Reading::new(resp))
    }
}
