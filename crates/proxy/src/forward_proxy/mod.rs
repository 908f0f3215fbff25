//! Forward-proxy mode (`--forward`): mcpscope as the HTTP(S) proxy of an agent host or SDK
//! (`HTTPS_PROXY`), every server's URL left as it is. Absolute-form requests carry `http://`
//! exchanges; a `CONNECT` is intercepted with a leaf certificate of the local [`Ca`] for the
//! name it connects to (ALPN h2 and http/1.1), or, when `--intercept` does not list the host,
//! tunnelled blind. Inside, each request is an MCP exchange ([`classify`]) that runs the same
//! pipeline as reverse mode with its upstream taken from the request's own authority (and
//! without any OAuth rewrite: the client talks to the real URLs), or another exchange that is
//! forwarded unchanged and only counted ([`pass`]).

pub(crate) mod classify;
pub(crate) mod pass;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use crate::activity::{Activity, Tracked};
use crate::ca::Ca;
use crate::conn::{ClientConn, ResetFlag};
use crate::error::ProxyError;
use crate::shared::Shared;
use crate::stage::ForwardTarget;
use crate::stage::guard::names_allowed_host;
use crate::{ConnSlot, ProxyBody};
use pass::{Line, PassClient, plain};

/// How forward-proxy mode is set up.
pub struct ForwardMode {
    /// The local CA that issues the leaves of intercepted connections.
    pub ca: Arc<Ca>,
    /// Hosts (`name` or `name:port`) whose CONNECTs are intercepted; empty: every host.
    pub intercept: Vec<String>,
    /// Origins seen speaking MCP (their SSE GETs, DELETEs and JSON POSTs are MCP too).
    known: Mutex<HashSet<String>>,
    /// Remote clients may reach servers on this machine's loopback
    /// (`--allow-remote-loopback`).
    remote_loopback: bool,
}

impl std::fmt::Debug for ForwardMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardMode")
            .field("ca", &self.ca)
            .field("intercept", &self.intercept)
            .finish_non_exhaustive()
    }
}

impl ForwardMode {
    /// Forward-proxy mode with `ca`, intercepting the `intercept` hosts (every host if empty).
    pub fn new(ca: Arc<Ca>, intercept: Vec<String>) -> Self {
        Self {
            ca,
            intercept,
            known: Mutex::new(HashSet::new()),
            remote_loopback: false,
        }
    }

    /// Lets remote clients (those not on loopback) reach servers on this machine's loopback;
    /// refused by default.
    pub fn remote_may_reach_loopback(mut self, allowed: bool) -> Self {
        self.remote_loopback = allowed;
        self
    }

    /// Whether a CONNECT to `host:port` is intercepted (else tunnelled blind).
    pub fn intercepts(&self, host: &str, port: u16) -> bool {
        self.intercept.is_empty() || names_allowed_host(&self.intercept, &format!("{host}:{port}"))
    }

    fn is_known(&self, origin: &str) -> bool {
        self.known.lock().is_ok_and(|known| known.contains(origin))
    }

    fn learn(&self, origin: &str) {
        if let Ok(mut known) = self.known.lock() {
            known.insert(origin.to_string());
        }
    }
}

/// What the proxy's start names as its upstream in forward-proxy mode.
pub const UPSTREAM_LABEL: &str = mcpscope_engine::model::FORWARD_PROXY_UPSTREAM;

/// What every connection of the forward proxy shares.
#[derive(Clone)]
struct Front {
    shared: Arc<Shared>,
    mode: Arc<ForwardMode>,
    client: PassClient,
    /// The connection's client is not on this machine's loopback.
    remote: bool,
}

/// Accepts connections of the forward proxy until aborted.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mode: Arc<ForwardMode>,
) {
    let front = Front {
        client: pass::client(shared.upstream.connector.clone()),
        shared,
        mode,
        remote: false,
    };
    let mut acceptor = crate::accept::Acceptor::default();
    loop {
        let (tcp, peer) = acceptor.accept(&listener, "forward proxy").await;
        let _ = tcp.set_nodelay(true);
        let conn = front.shared.ids.conn();
        let reset = ResetFlag::default();
        let activity = Activity::default();
        let io = TokioIo::new(ClientConn::new(tcp, reset.clone(), activity.clone()));
        let front = Front {
            remote: !is_loopback(peer.ip()),
            ..front.clone()
        };
        tokio::spawn(serve(front, io, conn, reset, activity, None));
    }
}

/// Serves one client connection: the proxy's own (`target` none: absolute-form requests and
/// CONNECTs) or the decrypted inside of an intercepted CONNECT (`target` its server).
/// (Boxed: an intercepted CONNECT serves its inside with this very function.)
fn serve<I>(
    front: Front,
    io: TokioIo<I>,
    conn: u64,
    reset: ResetFlag,
    activity: Activity,
    target: Option<Uri>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    Box::pin(serve_conn(front, io, conn, reset, activity, target))
}

async fn serve_conn<I>(
    front: Front,
    io: TokioIo<I>,
    conn: u64,
    reset: ResetFlag,
    activity: Activity,
    target: Option<Uri>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let timeouts = front.shared.config.timeouts;
    let watched = activity.clone();
    let link = ConnSlot::default();
    let last = Arc::new(Mutex::new(None::<Uri>));
    let service = hyper::service::service_fn(move |req| {
        request(
            front.clone(),
            req,
            conn,
            reset.clone(),
            link.clone(),
            last.clone(),
            watched.clone(),
            target.clone(),
        )
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let serving = builder.serve_connection_with_upgrades(io, service);
    tokio::select! {
        ended = serving => {
            if let Err(e) = ended {
                tracing::debug!("forward connection {conn} ended: {e}");
            }
        }
        why = activity.expired(timeouts.request_head, timeouts.idle) => {
            tracing::debug!("forward connection {conn} closed: {why}");
        }
    }
}

/// One request on a forward-proxy connection.
#[allow(clippy::too_many_arguments)]
async fn request(
    front: Front,
    mut req: Request<Incoming>,
    conn: u64,
    reset: ResetFlag,
    link: ConnSlot,
    last: Arc<Mutex<Option<Uri>>>,
    activity: Activity,
    inside: Option<Uri>,
) -> Result<Response<Tracked<ProxyBody>>, ProxyError> {
    let h2 = req.version() == http::Version::HTTP_2;
    if inside.is_none()
        && front.remote
        && !front.mode.remote_loopback
        && let Some(refused) = loopback_target(req.uri()).await
    {
        let in_flight = activity.begin(h2);
        let text = format!(
            "mcpscope: a remote client may not reach {refused} on this machine's loopback \
             (start mcpscope with --allow-remote-loopback to allow it)\n"
        );
        return Ok(plain(StatusCode::FORBIDDEN, text).map(|b| Tracked::new(b, in_flight)));
    }
    if inside.is_none() && req.method() == Method::CONNECT {
        let in_flight = activity.begin(h2);
        let response = connect(&front, req, conn, reset, activity).await;
        return Ok(response.map(|body| Tracked::new(body, in_flight)));
    }
    let target = match inside.clone().or_else(|| absolute_target(req.uri())) {
        Some(target) => target,
        None => {
            let in_flight = activity.begin(h2);
            let text = format!(
                "mcpscope --forward is an HTTP proxy: set HTTPS_PROXY and HTTP_PROXY to http://{} \
                 (see `mcpscope env`), or run mcpscope with --upstream URL\n",
                front.shared.config.listen
            );
            return Ok(plain(StatusCode::BAD_REQUEST, text).map(|b| Tracked::new(b, in_flight)));
        }
    };
    let origin = target.to_string();
    let mcp = classify::is_mcp(
        req.method(),
        req.uri().path(),
        req.headers(),
        front.mode.is_known(&origin),
    );
    if !mcp {
        let in_flight = activity.begin(h2);
        let response =
            pass::pass(&front.client, &front.shared.sink, conn, reset, &target, req).await?;
        return Ok(response.map(|body| Tracked::new(body, in_flight)));
    }
    front.mode.learn(&origin);
    // An absolute-form client may send requests for several servers on one connection: the
    // kept upstream connection serves only the server it was made to.
    if let Ok(mut last) = last.lock()
        && last.as_ref() != Some(&target)
    {
        if last.is_some()
            && let Ok(mut kept) = link.lock()
        {
            kept.take();
        }
        *last = Some(target.clone());
    }
    req.extensions_mut().insert(ForwardTarget(target));
    crate::handle(req, conn, reset, link, activity, front.shared.clone()).await
}

/// Whether an address is this machine's loopback (or the unspecified address, which reaches
/// it too), IPv4-mapped IPv6 included.
fn is_loopback(ip: std::net::IpAddr) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback() || ip.is_unspecified()
}

/// The `host:port` a request (CONNECT or absolute-form) names, when it is on this machine's
/// loopback: by its literal address, or by any address its name resolves to.
async fn loopback_target(uri: &Uri) -> Option<String> {
    let authority = uri.authority()?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(match uri.scheme_str() {
        Some("http") => 80,
        _ => 443,
    });
    let shown = format!("{}:{port}", authority.host());
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return is_loopback(ip).then_some(shown);
    }
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return Some(shown);
    }
    // A name that resolves to loopback reaches it as well (a name that does not resolve is
    // left to the connection, which fails on its own).
    let resolved = tokio::net::lookup_host((host, port)).await.ok()?;
    let mut resolved = resolved;
    resolved.any(|a| is_loopback(a.ip())).then_some(shown)
}

/// The server of an absolute-form request (`http://host:port/path`): its scheme and authority.
fn absolute_target(uri: &Uri) -> Option<Uri> {
    let scheme = uri.scheme_str()?;
    let authority = uri.authority()?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    format!(
        "{scheme}://{}/",
        crate::headers::without_userinfo(authority.as_str())
    )
    .parse()
    .ok()
}

/// A CONNECT: answered 200, then the tunnel is either intercepted (TLS with a leaf of the CA,
/// its requests served like the proxy's own) or blind (bytes copied both ways, one line).
async fn connect(
    front: &Front,
    req: Request<Incoming>,
    conn: u64,
    reset: ResetFlag,
    activity: Activity,
) -> Response<ProxyBody> {
    let (host, port) = match connect_target(req.uri()) {
        Ok(target) => target,
        Err(why) => return plain(StatusCode::BAD_REQUEST, format!("mcpscope: {why}\n")),
    };
    if !front.mode.intercepts(&host, port) {
        return blind(front, req, conn, &host, port).await;
    }
    let config = match front.mode.ca.server_config(&host) {
        Ok(config) => config,
        Err(e) => {
            return plain(
                StatusCode::BAD_GATEWAY,
                format!("mcpscope: no certificate for {host}: {e}\n"),
            );
        }
    };
    let target: Option<Uri> = match port {
        443 => format!("https://{host}/"),
        _ => format!("https://{host}:{port}/"),
    }
    .parse()
    .ok();
    let front = front.clone();
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!("CONNECT {host}:{port} not upgraded: {e}");
                return;
            }
        };
        // A client may tunnel plain HTTP too (undici's proxy agent does for `http://`): the
        // first byte tells (22 opens a TLS handshake).
        let mut io = TokioIo::new(upgraded);
        let mut first = [0u8; 1];
        let timeout = front.shared.config.timeouts.request_head;
        let first = match tokio::time::timeout(FIRST_BYTE_WAIT, io.read(&mut first)).await {
            Ok(Ok(1)) => Some(first[0]),
            Ok(_) => return,
            // The client waits for the server: a protocol whose server speaks first.
            Err(_) => None,
        };
        let io = Prefixed { first, inner: io };
        let Some(first) = first.filter(|&b| b == TLS_HANDSHAKE || b.is_ascii_uppercase()) else {
            // Neither TLS nor HTTP (whose methods start with a capital): passed blind.
            let mut line = Line::new(
                front.shared.sink.clone(),
                conn,
                &format!("{host}:{port}"),
                "CONNECT",
                "",
            );
            match dial(&front, &host, port).await {
                Ok(server) => tunnel(line, io, server).await,
                Err(e) => line.finish(Some(e)),
            }
            return;
        };
        if first != TLS_HANDSHAKE {
            let plain = match port {
                80 => format!("http://{host}/"),
                _ => format!("http://{host}:{port}/"),
            }
            .parse()
            .ok();
            serve(front, TokioIo::new(io), conn, reset, activity, plain).await;
            return;
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let handshake = acceptor.accept(io);
        let tls = match tokio::time::timeout(timeout, handshake).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                // A client that does not trust the CA ends here: say so where it is seen.
                front.shared.note(
                    None,
                    format!(
                        "mcpscope: TLS with the client for {host}:{port} failed: {e} \
                         (does the client trust the CA of `mcpscope ca`?)"
                    ),
                );
                return;
            }
            Err(_) => return,
        };
        serve(front, TokioIo::new(tls), conn, reset, activity, target).await;
    });
    Response::new(crate::stage::answer::full(bytes::Bytes::new()))
}

/// A CONNECT tunnelled blind: the server is connected first (a 502 in words when it cannot
/// be), then bytes are copied both ways until both ends close; one line counts them.
async fn blind(
    front: &Front,
    req: Request<Incoming>,
    conn: u64,
    host: &str,
    port: u16,
) -> Response<ProxyBody> {
    let shared = &front.shared;
    let mut line = Line::new(
        shared.sink.clone(),
        conn,
        &format!("{host}:{port}"),
        "CONNECT",
        "",
    );
    let server = match dial(front, host, port).await {
        Ok(server) => server,
        Err(e) => {
            let status = if e == CONNECT_TIMEOUT {
                StatusCode::GATEWAY_TIMEOUT
            } else {
                StatusCode::BAD_GATEWAY
            };
            line.finish(Some(e.clone()));
            return plain(status, format!("mcpscope: {host}:{port}: {e}\n"));
        }
    };
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => tunnel(line, TokioIo::new(upgraded), server).await,
            Err(e) => line.finish(Some(format!("not upgraded: {e}"))),
        }
    });
    Response::new(crate::stage::answer::full(bytes::Bytes::new()))
}

/// How long an intercepted tunnel waits for the client's first byte before taking it for a
/// protocol whose server speaks first (passed blind). A TLS or HTTP client writes at once.
const FIRST_BYTE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What [`dial`] says when the server did not answer in time.
const CONNECT_TIMEOUT: &str = "no connection in time";

/// A CONNECT's `host:port`: an explicit port in 1–65535, no user info; or why not.
fn connect_target(uri: &Uri) -> Result<(String, u16), String> {
    let Some(authority) = uri.authority() else {
        return Err("CONNECT needs host:port".into());
    };
    if authority.as_str().contains('@') {
        return Err(format!(
            "CONNECT {authority}: a tunnel's target is host:port, without user info"
        ));
    }
    let Some(port) = authority.port() else {
        return Err(format!("CONNECT {authority}: needs host:port"));
    };
    match port.as_str().parse::<u16>() {
        Ok(number) if number > 0 => Ok((authority.host().to_string(), number)),
        _ => Err(format!(
            "CONNECT {authority}: port {} is not in 1-65535",
            port.as_str()
        )),
    }
}

/// A connection to a tunnel's server, or why there is none.
async fn dial(front: &Front, host: &str, port: u16) -> Result<TcpStream, String> {
    let name = host.trim_start_matches('[').trim_end_matches(']');
    let connecting = TcpStream::connect((name, port));
    match tokio::time::timeout(front.shared.config.timeouts.connect, connecting).await {
        Ok(Ok(server)) => {
            let _ = server.set_nodelay(true);
            Ok(server)
        }
        Ok(Err(e)) => Err(format!("unreachable: {e}")),
        Err(_) => Err(CONNECT_TIMEOUT.into()),
    }
}

/// Copies a blind tunnel both ways, then sends its one line.
async fn tunnel<C>(mut line: Line, mut client: C, mut server: TcpStream)
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match tokio::io::copy_bidirectional(&mut client, &mut server).await {
        Ok((up, down)) => {
            line.up(up);
            line.down(down);
            line.finish(None);
        }
        Err(e) => line.finish(Some(e.to_string())),
    }
}

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 22;

/// A stream whose first byte was read already (to tell TLS from plain HTTP), handed back first.
struct Prefixed<I> {
    first: Option<u8>,
    inner: I,
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Prefixed<I> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Some(byte) = this.first.take() {
            buf.put_slice(&[byte]);
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Prefixed<I> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refused(target: &str) -> Option<String> {
        let uri: Uri = target.parse().expect("a target");
        loopback_target(&uri).await
    }

    #[tokio::test]
    async fn loopback_targets_are_told_by_address_and_name() {
        for target in [
            "127.0.0.1:8080",
            "127.9.9.9:1",
            "[::1]:443",
            "[::ffff:127.0.0.1]:5",
            "0.0.0.0:80",
            "localhost:9000",
            "api.localhost:9000",
            "http://127.0.0.2/mcp",
        ] {
            assert!(refused(target).await.is_some(), "{target}");
        }
        // Addresses elsewhere (documentation ranges: nothing is sent to them).
        for target in [
            "192.0.2.1:443",
            "[2001:db8::1]:443",
            "http://198.51.100.7/mcp",
        ] {
            assert_eq!(refused(target).await, None, "{target}");
        }
    }

    #[test]
    fn ports_and_user_info_are_checked() {
        let target = |t: &str| connect_target(&t.parse::<Uri>().expect("uri"));
        assert_eq!(target("127.0.0.1:8080"), Ok(("127.0.0.1".into(), 8080)));
        assert!(target("127.0.0.1:99999").is_err());
        assert!(target("127.0.0.1:0").is_err());
        assert!(target("a@127.0.0.1:80").is_err());
        assert!(target("127.0.0.1").is_err());
    }
}
