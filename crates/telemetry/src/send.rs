//! One OTLP/HTTP request: a protobuf `ExportTraceServiceRequest` POSTed with a timeout.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::Options;

/// Posts requests to one endpoint.
pub struct Sender {
    client: Client<HttpConnector, Full<Bytes>>,
    endpoint: Uri,
    timeout: Duration,
}

impl Sender {
    /// A sender for `options.endpoint` with `options.timeout` per request.
    pub fn new(options: &Options) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(options.timeout));
        connector.set_nodelay(true);
        Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            endpoint: options.endpoint.clone(),
            timeout: options.timeout,
        }
    }

    /// Sends `request`; an error says why it was not accepted (refused, timed out, non-2xx).
    pub async fn post(&self, request: &ExportTraceServiceRequest) -> Result<(), String> {
        let body = Bytes::from(request.encode_to_vec());
        let req = Request::post(&self.endpoint)
            .header(header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let response = self.client.request(req).await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read the answer to the end so the connection can be reused.
            let _ = response.into_body().collect().await;
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
