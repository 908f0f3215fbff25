//! The `/metrics` endpoint: HTTP/1.1 on its own listener, `GET /metrics` answered with the
//! registry's text, anything else refused. A request whose `Host` the caller's guard does not
//! allow (DNS rebinding) gets 403; connections are capped, and each must send its head within a
//! few seconds, so a peer holds nothing but its own connection.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::Metrics;

/// The content type of the OpenMetrics text format, which Prometheus reads.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Connections served at once; more wait in the listener's backlog.
const CONNECTIONS: usize = 64;

/// How long a connection may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a request's `Host` (`name[:port]`) may be answered.
pub type HostGuard = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Serves `metrics` on `listener` until the task is dropped or aborted.
pub async fn serve(listener: TcpListener, metrics: Arc<Mutex<Metrics>>, guard: HostGuard) {
    let slots = Arc::new(Semaphore::new(CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::debug!("metrics: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (metrics, guard) = (metrics.clone(), guard.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let answer = answer(&req, &metrics, &guard);
                async move { Ok::<_, Infallible>(answer) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!("metrics: connection ended: {e}");
            }
            drop(permit);
        });
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The answer to one request.
fn answer(
    req: &Request<Incoming>,
    metrics: &Mutex<Metrics>,
    guard: &HostGuard,
) -> Response<Full<Bytes>> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(host), None) => String::from_utf8_lossy(host.as_bytes()).into_owned(),
        _ => return plain(StatusCode::BAD_REQUEST, "one Host header, please"),
    };
    if !guard(&host) {
        return plain(
            StatusCode::FORBIDDEN,
            "this Host is not allowed (loopback names, or those given with --allow-host)",
        );
    }
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "the metrics are at /metrics");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let text = metrics.lock().unwrap_or_else(|p| p.into_inner()).text();
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(CONTENT_TYPE),
    );
    response
}
