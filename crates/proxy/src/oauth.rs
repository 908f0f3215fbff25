//! OAuth-protected upstreams: the protected-resource metadata (RFC 9728) names the upstream's
//! address, which a client talking to the proxy refuses. Two things are rewritten to name the
//! proxy instead, each reported as a `Rewritten` event: the `resource_metadata` URL of a
//! `WWW-Authenticate` challenge and the `resource` of the metadata document. Nothing else is
//! touched (authorization-server URLs, tokens and the token exchange pass as they are). The
//! rules are in [`mcpscope_engine::wire::oauth`]; this module applies them to heads and bodies.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Uri};
use http_body::{Body, Frame, SizeHint};

use crate::ProxyBody;
use crate::error::ProxyError;
use mcpscope_engine::event::{EventKind, StreamId};
use mcpscope_engine::wire::oauth::{self, Origin, Rewrite};
use mcpscope_session::sink::EventSink;

/// The largest metadata document buffered to be rewritten; a larger one is forwarded unchanged
/// (and a note says so).
pub(crate) const MAX_METADATA_BODY: usize = 1024 * 1024;

/// The upstream's origin and the proxy's origin as the client addressed it.
#[derive(Debug, Clone)]
pub(crate) struct Addresses {
    /// The upstream's origin.
    pub upstream: Origin,
    /// The proxy's origin (`http://` + the client's `Host`).
    pub proxy: Origin,
}

impl Addresses {
    /// The upstream's origin, from its URL.
    pub(crate) fn upstream_origin(upstream: &Uri) -> Option<Origin> {
        Origin::of_authority(
            upstream.scheme_str().unwrap_or("http"),
            crate::headers::without_userinfo(upstream.authority()?.as_str()),
        )
    }

    /// The two origins, from the upstream's origin and the client's `Host` (or HTTP/2 authority);
    /// `None` when either does not parse.
    pub(crate) fn with_upstream(upstream: Origin, client_host: Option<&str>) -> Option<Self> {
        let proxy = Origin::of_authority("http", client_host?.trim())?;
        (!upstream.matches(&proxy)).then_some(Self { upstream, proxy })
    }
}

/// The client's `Host` (or, on HTTP/2, the request's authority).
pub(crate) fn client_host(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| uri.authority().map(|a| a.to_string()))
}

/// What reverse mode says, once, when it first rewrites protected-resource metadata.
pub(crate) const AUDIENCE_NOTICE: &str = "mcpscope: the protected-resource metadata was rewritten to name the proxy: tokens will be requested for the proxy's URL (an authorization server that binds the audience refuses them); `mcpscope --forward` keeps every URL and audience intact";

/// Whether [`AUDIENCE_NOTICE`] was said in this process.
static AUDIENCE_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn report(sink: &EventSink, stream: StreamId, rewrite: Rewrite) {
    if rewrite.what == "resource" && !AUDIENCE_SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        tracing::warn!("{AUDIENCE_NOTICE}");
        sink.emit(EventKind::Note {
            stream: Some(stream),
            text: AUDIENCE_NOTICE.to_string(),
        });
    }
    sink.emit(EventKind::Rewritten {
        stream,
        what: rewrite.what.to_string(),
        from: rewrite.from,
        to: rewrite.to,
    });
}

/// Rewrites the `resource_metadata` URL of every `WWW-Authenticate` header that names the
/// upstream; returns the rewrites (to be reported after the response head).
pub(crate) fn rewrite_challenges(headers: &mut HeaderMap, addresses: &Addresses) -> Vec<Rewrite> {
    let name = http::header::WWW_AUTHENTICATE;
    let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
    let mut rewrites = Vec::new();
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        let rewritten = value.to_str().ok().and_then(|text| {
            oauth::rewrite_www_authenticate(text, &addresses.upstream, &addresses.proxy)
        });
        match rewritten.and_then(|(text, rw)| Some((HeaderValue::from_str(&text).ok()?, rw))) {
            Some((new, rw)) => {
                rewrites.push(rw);
                out.push(new);
            }
            None => out.push(value),
        }
    }
    if !rewrites.is_empty() {
        headers.remove(&name);
        for value in out {
            headers.append(&name, value);
        }
    }
    rewrites
}

/// Reports rewrites made to a response head.
pub(crate) fn report_all(sink: &EventSink, stream: StreamId, rewrites: Vec<Rewrite>) {
    for rewrite in rewrites {
        report(sink, stream, rewrite);
    }
}

/// How many metadata paths learned from challenges are kept.
const MAX_LEARNED_PATHS: usize = 64;

/// Paths of protected-resource metadata documents that a `WWW-Authenticate` challenge named
/// somewhere else than the well-known path (`resource_metadata="…/custom/location.json"`).
#[derive(Debug, Default)]
pub(crate) struct MetadataPaths(Mutex<HashSet<String>>);

impl MetadataPaths {
    /// Remembers the path of a rewritten `resource_metadata` URL (up to a few dozen).
    pub(crate) fn learn(&self, rewrite: &Rewrite) {
        let Some((_, tail)) = Origin::of_url(&rewrite.to) else {
            return;
        };
        let path = tail.split(['?', '#']).next().unwrap_or("");
        if let Ok(mut paths) = self.0.lock()
            && paths.len() < MAX_LEARNED_PATHS
        {
            paths.insert(path.to_string());
        }
    }

    /// Whether `path` is a metadata document's: the well-known one (plain or path-aware) or one
    /// a challenge named.
    pub(crate) fn is_metadata_path(&self, path: &str) -> bool {
        oauth::is_prm_path(path) || self.0.lock().is_ok_and(|paths| paths.contains(path))
    }
}

/// Whether a response is a protected-resource metadata document to rewrite: a successful JSON
/// answer to a GET of a metadata path.
pub(crate) fn is_metadata(
    method: &str,
    metadata_path: bool,
    status: http::StatusCode,
    json: bool,
) -> bool {
    method == "GET" && status.is_success() && json && metadata_path
}

/// A metadata body, buffered whole (up to [`MAX_METADATA_BODY`]) and given to the client with
/// its `resource` rewritten; its length changes, so the head it goes with carries no
/// `Content-Length`.
pub(crate) struct MetadataBody {
    inner: ProxyBody,
    buf: BytesMut,
    /// Past the limit: what was buffered went out unchanged and the rest passes through.
    passing: bool,
    done: bool,
    trailers: Option<Frame<Bytes>>,
    addresses: Addresses,
    sink: EventSink,
    stream: StreamId,
}

impl MetadataBody {
    /// Wraps the (tapped) upstream body.
    pub(crate) fn new(
        inner: ProxyBody,
        addresses: Addresses,
        sink: EventSink,
        stream: StreamId,
    ) -> Self {
        Self {
            inner,
            buf: BytesMut::new(),
            passing: false,
            done: false,
            trailers: None,
            addresses,
            sink,
            stream,
        }
    }

    /// The whole document, rewritten when it names the upstream.
    fn finish(&mut self) -> Bytes {
        let body = std::mem::take(&mut self.buf).freeze();
        match oauth::rewrite_prm_body(&body, &self.addresses.upstream, &self.addresses.proxy) {
            Some((new, rewrite)) => {
                report(&self.sink, self.stream, rewrite);
                Bytes::from(new)
            }
            None => body,
        }
    }
}

impl Body for MetadataBody {
    type Data = Bytes;
    type Error = ProxyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ProxyError>>> {
        let this = &mut *self;
        if let Some(trailers) = this.trailers.take() {
            return Poll::Ready(Some(Ok(trailers)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if this.passing {
            return Pin::new(&mut this.inner).poll_frame(cx);
        }
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.buf.extend_from_slice(&data);
                        if this.buf.len() > MAX_METADATA_BODY {
                            this.passing = true;
                            this.sink.emit(EventKind::Note {
                                stream: Some(this.stream),
                                text: format!(
                                    "protected-resource metadata over {MAX_METADATA_BODY} bytes: forwarded unchanged"
                                ),
                            });
                            let buffered = std::mem::take(&mut this.buf).freeze();
                            return Poll::Ready(Some(Ok(Frame::data(buffered))));
                        }
                    }
                    Err(trailers) => {
                        this.trailers = Some(trailers);
                        this.done = true;
                        return Poll::Ready(Some(Ok(Frame::data(this.finish()))));
                    }
                },
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(Some(Ok(Frame::data(this.finish()))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(upstream: &Uri, client_host: Option<&str>) -> Option<Addresses> {
        Addresses::with_upstream(Addresses::upstream_origin(upstream)?, client_host)
    }

    #[test]
    fn addresses_from_upstream_and_host() {
        let up: Uri = "http://localhost:8000/mcp".parse().expect("uri");
        let a = of(&up, Some("127.0.0.1:9000")).expect("addresses");
        assert_eq!(a.upstream.text(), "http://localhost:8000");
        assert_eq!(a.proxy.text(), "http://127.0.0.1:9000");
        // The same origin on both sides: nothing to rewrite.
        assert!(of(&up, Some("127.0.0.1:8000")).is_none());
        assert!(of(&up, None).is_none());
    }

    #[test]
    fn challenges_are_rewritten_and_others_kept() {
        let up: Uri = "http://127.0.0.1:8000/mcp".parse().expect("uri");
        let a = of(&up, Some("localhost:9000")).expect("addresses");
        let mut h = HeaderMap::new();
        h.append(
            "www-authenticate",
            HeaderValue::from_static(
                r#"Bearer error="invalid_token", resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp""#,
            ),
        );
        h.append(
            "www-authenticate",
            HeaderValue::from_static(r#"Basic realm="x""#),
        );
        h.append(
            "x-other",
            HeaderValue::from_static("http://127.0.0.1:8000/"),
        );
        let rewrites = rewrite_challenges(&mut h, &a);
        assert_eq!(rewrites.len(), 1);
        let values: Vec<&str> = h
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(
            values,
            [
                r#"Bearer error="invalid_token", resource_metadata="http://localhost:9000/.well-known/oauth-protected-resource/mcp""#,
                r#"Basic realm="x""#
            ]
        );
        assert_eq!(h["x-other"], "http://127.0.0.1:8000/");
    }
}
