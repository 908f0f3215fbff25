//! Connections toward the upstream (HTTP, or HTTPS with rustls).
//!
//! Each client connection gets its own upstream connection, driven from the exchange's own task
//! (the request future and the response body poll it), so a request, its response and every
//! body chunk stay on one task: no hand-off to a connection task per chunk. It also keeps the
//! mapping faithful: one client connection, one upstream connection. Its one timer bounds the
//! wait for each response head: a request moves its deadline later, which costs the timer an
//! atomic update instead of a registration per exchange.

use std::sync::Arc;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tower_service::Service;

/// The connector (TCP, then TLS for `https://`).
pub(crate) type Connector = HttpsConnector<HttpConnector>;

/// Builds the connector, trusting `extra` roots besides the Web PKI's (`--ca-file`);
/// `insecure` accepts any certificate.
pub(crate) fn connector_with(
    insecure: bool,
    extra: &[CertificateDer<'static>],
) -> Result<Connector, crate::ProxyError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let tls = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        for cert in extra {
            roots.add(cert.clone())?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    // The whole connect (TCP, TLS, handshake) is bounded by the connect timeout of the caller.
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}

/// Why an upstream connection could not be made.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConnectError(pub String);

/// One HTTP/1.1 connection to the upstream, driven by whoever holds it.
pub struct UpstreamConn {
    sender: SendRequest<Full<Bytes>>,
    driver: Pin<Box<dyn Future<Output = hyper::Result<()>> + Send>>,
    ended: bool,
    /// The deadline of the response head being waited for, reset by each request.
    head_deadline: Pin<Box<tokio::time::Sleep>>,
}

impl UpstreamConn {
    /// Connects (TCP, TLS when `https://`) and does the HTTP/1.1 handshake.
    pub async fn connect(connector: &Connector, uri: &Uri) -> Result<Self, ConnectError> {
        let mut connector = connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(|e| ConnectError(error_text(&*e)))?;
        let io = connector
            .call(uri.clone())
            .await
            .map_err(|e| ConnectError(error_text(&*e)))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| ConnectError(error_text(&e)))?;
        Ok(Self {
            sender,
            driver: Box::pin(conn),
            ended: false,
            head_deadline: Box::pin(tokio::time::sleep(Duration::ZERO)),
        })
    }

    /// Does the connection's pending I/O; returns whether the connection has ended.
    pub fn poll_drive(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.ended && self.driver.as_mut().poll(cx).is_ready() {
            self.ended = true;
        }
        self.ended
    }

    /// Waits until a request can be sent (driving the connection); false if it ended.
    pub async fn ready(&mut self) -> bool {
        std::future::poll_fn(|cx| {
            if self.poll_drive(cx) {
                return Poll::Ready(false);
            }
            match self.sender.poll_ready(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(true),
                Poll::Ready(Err(_)) => Poll::Ready(false),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// Sends a request and waits for the response head, driving the connection meanwhile, for
    /// `within` at most. A request the connection never sent (it was closing) is handed back
    /// for another one.
    pub async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
        within: Duration,
    ) -> Result<Response<Incoming>, SendError> {
        let mut response = Box::pin(self.sender.try_send_request(request));
        self.head_deadline
            .as_mut()
            .reset(tokio::time::Instant::now() + within);
        let driver = &mut self.driver;
        let ended = &mut self.ended;
        let deadline = &mut self.head_deadline;
        std::future::poll_fn(|cx| {
            if !*ended && driver.as_mut().poll(cx).is_ready() {
                *ended = true;
            }
            match response.as_mut().poll(cx) {
                Poll::Ready(result) => Poll::Ready(Some(result)),
                Poll::Pending if deadline.as_mut().poll(cx).is_ready() => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
        .ok_or(SendError::TimedOut)?
        .map_err(|mut e| match e.take_message() {
            Some(request) => SendError::NotSent(Box::new(request), e.into_error()),
            None => SendError::Failed(e.into_error()),
        })
    }
}

/// A request that failed.
pub enum SendError {
    /// The connection was closing and never sent it: it may go on another connection.
    NotSent(Box<Request<Full<Bytes>>>, hyper::Error),
    /// It failed after it was sent.
    Failed(hyper::Error),
    /// No response head came within the time given.
    TimedOut,
}

/// An error and its causes, in one line.
pub(crate) fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// A verifier that accepts every certificate (`--insecure`).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// How long the start-up check of the upstream waits for a TCP connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens (and closes) one TCP connection to the upstream's host and port, to warn at start when
/// nothing listens there.
pub async fn probe(upstream: &Uri) -> Result<(), String> {
    let host = upstream.host().ok_or("no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let https = upstream.scheme_str() == Some("https");
    let port = upstream.port_u16().unwrap_or(if https { 443 } else { 80 });
    match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no connection within {PROBE_TIMEOUT:?}")),
    }
}
