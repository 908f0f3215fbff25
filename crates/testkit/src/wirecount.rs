//! Measuring what crosses the wire: a TCP relay that counts every byte it passes, and an
//! upstream that answers each request with a flood of SSE events of about 1 KB.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes that crossed a relay, both ways, over all its connections so far (a connection counts
/// once it has closed).
#[derive(Debug, Clone, Default)]
pub struct Counted(Arc<AtomicU64>);

impl Counted {
    /// The bytes counted so far.
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Starts a relay on 127.0.0.1 in front of `target`; returns its address and its counter.
pub async fn counting_relay(target: SocketAddr) -> std::io::Result<(SocketAddr, Counted)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let counted = Counted::default();
    let total = counted.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let total = total.clone();
            tokio::spawn(async move {
                let Ok(mut server) = TcpStream::connect(target).await else {
                    return;
                };
                if let Ok((up, down)) =
                    tokio::io::copy_bidirectional(&mut client, &mut server).await
                {
                    total.0.fetch_add(up + down, Ordering::SeqCst);
                }
            });
        }
    });
    Ok((addr, counted))
}

/// One flood event: a progress notification padded to about 1 KB on the wire.
pub fn flood_event(n: usize) -> String {
    let pad = "x".repeat(900);
    format!(
        "id: {n}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"p1\",\"progress\":{n},\"message\":\"{pad}\"}}}}\n\n"
    )
}

/// Starts an upstream on 127.0.0.1 that answers every request with `events` flood events, then
/// a result for id 1, then closes the connection.
pub async fn flooding_upstream(events: usize) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            cache-control: no-cache\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for n in 0..events {
                    if socket.write_all(flood_event(n).as_bytes()).await.is_err() {
                        return;
                    }
                }
                let result = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n";
                let _ = socket.write_all(result.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok(addr)
}

/// Posts one `tools/call` to `addr` over a fresh connection (`Connection: close`) and reads the
/// whole response; returns it.
pub async fn post_once(addr: SocketAddr) -> std::io::Result<Vec<u8>> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{},"_meta":{"progressToken":"p1"}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(addr).await?;
    socket.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await?;
    Ok(response)
}
