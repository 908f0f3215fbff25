//! `https://` upstreams: certificates are verified by default, and `--insecure` skips that.

use std::sync::Arc;
use std::time::Duration;

use mcpscope_engine::event::{Event, EventKind};
use mcpscope_proxy::{self as proxy, Config};
use mcpscope_session::sink::EventSink;
use mcpscope_testkit::raw::observe;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types::PrivatePkcs8KeyDer};

/// An HTTPS upstream with a self-signed certificate for `localhost`, answering one JSON result.
async fn self_signed_upstream() -> std::net::SocketAddr {
    let signed = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let key = PrivatePkcs8KeyDer::from(signed.key_pair.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![signed.cert.der().clone()], key.into())
        .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                // Read the request head (and ignore a small body) byte by byte: the stream is TLS.
                while !head.ends_with(b"\r\n\r\n") {
                    match tokio::io::AsyncReadExt::read(&mut tls, &mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let body = r#"{"jsonrpc":"2.0","id":1,"result":{"over":"tls"}}"#;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

async fn proxy(
    upstream: std::net::SocketAddr,
    insecure: bool,
) -> (proxy::Proxy, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: format!("https://localhost:{}/mcp", upstream.port())
            .parse()
            .expect("uri"),
        insecure,
        allow_remote: false,
        ..Default::default()
    };
    (
        proxy::start(config, EventSink::new(tx))
            .await
            .expect("proxy"),
        rx,
    )
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;

#[tokio::test]
async fn an_unverifiable_certificate_is_refused_by_default() {
    let upstream = self_signed_upstream().await;
    let (proxy, mut events) = proxy(upstream, false).await;
    let seen = observe(proxy.addr, "POST", CALL).await;
    assert_eq!(seen.status, 502);
    let text = String::from_utf8_lossy(&seen.body).to_lowercase();
    assert!(
        text.contains("certificate") || text.contains("issuer"),
        "{text}"
    );
    let unreachable = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = events.recv().await {
            if let EventKind::UpstreamUnreachable { error, .. } = event.kind {
                return error;
            }
        }
        String::new()
    })
    .await
    .expect("an upstream_unreachable event");
    assert!(!unreachable.is_empty());
}

#[tokio::test]
async fn insecure_accepts_it_and_the_call_goes_through() {
    let upstream = self_signed_upstream().await;
    let (proxy, _events) = proxy(upstream, true).await;
    let seen = observe(proxy.addr, "POST", CALL).await;
    assert_eq!(seen.status, 200, "{}", String::from_utf8_lossy(&seen.body));
    assert_eq!(
        String::from_utf8_lossy(&seen.body),
        r#"{"jsonrpc":"2.0","id":1,"result":{"over":"tls"}}"#
    );
}
