//! One OTLP/HTTP request: a protobuf `ExportTraceServiceRequest` POSTed with a timeout.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::Options;
use mcpscope_engine::redact::UrlCredentials;

/// How much of a collector's answer is read (the rest is never buffered; the connection is
/// then closed instead of reused).
pub const MAX_ANSWER: usize = 4 * 1024;

/// Posts requests to one endpoint.
pub struct Sender {
    client: Client<HttpConnector, Full<Bytes>>,
    endpoint: Uri,
    /// The endpoint's userinfo as `Authorization: Basic`.
    authorization: Option<HeaderValue>,
    timeout: Duration,
}

/// An endpoint without its userinfo (sent as `Authorization` instead), and that header.
fn split_userinfo(endpoint: &Uri) -> (Uri, Option<HeaderValue>) {
    let text = endpoint.to_string();
    let Some(credentials) = UrlCredentials::of(&text) else {
        return (endpoint.clone(), None);
    };
    let mut parts = endpoint.clone().into_parts();
    parts.authority = endpoint.authority().and_then(|a| {
        let host = a.as_str().rsplit_once('@').map_or(a.as_str(), |(_, h)| h);
        host.parse().ok()
    });
    let stripped = Uri::from_parts(parts).unwrap_or_else(|_| endpoint.clone());
    let mut value = HeaderValue::from_str(&credentials.basic()).ok();
    if let Some(v) = value.as_mut() {
        v.set_sensitive(true);
    }
    (stripped, value)
}

impl Sender {
    /// A sender for `options.endpoint` with `options.timeout` per request.
    pub fn new(options: &Options) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(options.timeout));
        connector.set_nodelay(true);
        let (endpoint, authorization) = split_userinfo(&options.endpoint);
        Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            endpoint,
            authorization,
            timeout: options.timeout,
        }
    }

    /// Sends `request`; an error says why it was not accepted (refused, timed out, non-2xx).
    pub async fn post(&self, request: &ExportTraceServiceRequest) -> Result<(), String> {
        let body = Bytes::from(request.encode_to_vec());
        let mut req = Request::post(&self.endpoint)
            .header(header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        if let Some(authorization) = &self.authorization {
            req.headers_mut()
                .insert(header::AUTHORIZATION, authorization.clone());
        }
        let exchange = async {
            let response = self.client.request(req).await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read a short answer to its end, so the connection can be reused; past
            // `MAX_ANSWER` the rest is left unread (the connection closes).
            let mut body = response.into_body();
            let mut read = 0;
            while read <= MAX_ANSWER {
                match body.frame().await {
                    Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
                    _ => break,
                }
            }
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the collector answered {status}"))
            }
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        }
    }
}
