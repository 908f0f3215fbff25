//! Exchanges that are not MCP, and blind tunnels: forwarded unchanged (bytes, heads, timing,
//! the kind of end) and recorded only as one counted [`EventKind::Unobserved`] line when they
//! end (host, method, path without query, status, bytes; never headers or bodies).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;

use crate::ProxyBody;
use crate::conn::ResetFlag;
use crate::error::ProxyError;
use crate::headers::strip_hop_by_hop;
use crate::stage::answer;
use crate::upstream::{Connector, error_text};
use mcpscope_engine::event::{EndHow, EventKind};
use mcpscope_session::sink::EventSink;

/// The client for exchanges that are not MCP (pooled, HTTP/1.1 upstream).
pub(crate) type PassClient = Client<Connector, Counted<Incoming>>;

/// Builds the client for exchanges that are not MCP.
pub(crate) fn client(connector: Connector) -> PassClient {
    Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector)
}

/// The one line an unobserved exchange leaves, sent when it ends.
pub(crate) struct Line {
    sink: EventSink,
    conn: u64,
    host: String,
    method: String,
    path: String,
    status: Option<u16>,
    up: Arc<AtomicU64>,
    down: u64,
    sent: bool,
}

impl Line {
    /// A line for an exchange with `host` (`name[:port]`).
    pub(crate) fn new(sink: EventSink, conn: u64, host: &str, method: &str, path: &str) -> Self {
        Self {
            sink,
            conn,
            host: host.to_string(),
            method: method.to_string(),
            path: path.split('?').next().unwrap_or("").to_string(),
            status: None,
            up: Arc::default(),
            down: 0,
            sent: false,
        }
    }

    /// Counts bytes sent to the server.
    pub(crate) fn up(&self, n: u64) {
        self.up.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts bytes sent to the client.
    pub(crate) fn down(&mut self, n: u64) {
        self.down += n;
    }

    /// Sends the line (once); `detail` says why it ended other than cleanly.
    pub(crate) fn finish(&mut self, detail: Option<String>) {
        if std::mem::replace(&mut self.sent, true) {
            return;
        }
        self.sink.emit(EventKind::Unobserved {
            conn: self.conn,
            host: self.host.clone(),
            method: self.method.clone(),
            path: self.path.clone(),
            status: self.status,
            bytes_up: self.up.load(Ordering::Relaxed),
            bytes_down: self.down,
            detail,
        });
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.finish(Some("cancelled".into()));
    }
}

/// A request body counted into a [`Line`].
pub(crate) struct Counted<B> {
    body: B,
    count: Arc<AtomicU64>,
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &frame
            && let Some(data) = frame.data_ref()
        {
            this.count.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body passed to the client unchanged, counted into its [`Line`]; an upstream
/// reset resets the client's connection too.
struct Passed {
    body: Incoming,
    line: Line,
    reset: ResetFlag,
}

impl Body for Passed {
    type Data = Bytes;
    type Error = ProxyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ProxyError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.line.down(data.len() as u64);
                }
                if this.body.is_end_stream() {
                    this.line.finish(None);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let (how, cause) = mcpscope_transport::classify(&e);
                if how == EndHow::Reset {
                    this.reset.set();
                }
                this.line.finish(Some(format!("{}: {cause}", how.as_str())));
                Poll::Ready(Some(Err(ProxyError::StreamEnded(how))))
            }
            Poll::Ready(None) => {
                this.line.finish(None);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Forwards a request that is not MCP to `target` (scheme and authority) and passes its
/// response back as it comes; an upstream that cannot be reached is answered 502 in words.
pub(crate) async fn pass(
    client: &PassClient,
    sink: &EventSink,
    conn: u64,
    reset: ResetFlag,
    target: &Uri,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let authority = target
        .authority()
        .map_or_else(String::new, |a| a.as_str().to_string());
    let path = req.uri().path().to_string();
    let mut line = Line::new(sink.clone(), conn, &authority, req.method().as_str(), &path);
    let (mut parts, body) = req.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let uri = format!(
        "{}://{authority}{path_and_query}",
        target.scheme_str().unwrap_or("http")
    );
    parts.uri = match uri.parse() {
        Ok(uri) => uri,
        Err(e) => {
            line.finish(Some(format!("bad URI: {e}")));
            return Ok(plain(
                StatusCode::BAD_REQUEST,
                format!("mcpscope: bad URI {uri:?}: {e}"),
            ));
        }
    };
    strip_hop_by_hop(&mut parts.headers);
    if let Ok(host) = HeaderValue::from_str(&authority) {
        parts.headers.insert(http::header::HOST, host);
    }
    parts.version = http::Version::HTTP_11;
    let body = Counted {
        body,
        count: line.up.clone(),
    };
    match client.request(Request::from_parts(parts, body)).await {
        Ok(response) => {
            line.status = Some(response.status().as_u16());
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            if body.is_end_stream() {
                // hyper never polls an empty body: it has ended already.
                line.finish(None);
            }
            let passed = Passed { body, line, reset };
            Ok(Response::from_parts(parts, passed.boxed_unsync()))
        }
        Err(e) => {
            let cause = error_text(&e);
            line.finish(Some(cause.clone()));
            Ok(plain(
                StatusCode::BAD_GATEWAY,
                format!("mcpscope: {authority} is unreachable: {cause}\n"),
            ))
        }
    }
}

/// A plain-text answer of the proxy's own.
pub(crate) fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut response = Response::new(answer::full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
