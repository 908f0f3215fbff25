//! `mcpscope demo`: the built-in test server, the proxy with the seed report's fault rule, and a
//! scripted client driven into an orphaned call — nothing else needed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;

use crate::app::shutdown_signal;
use crate::cli::DemoArgs;
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::Config;
use mcpscope_proxy::controller as fault;
use mcpscope_session::Session;
use mcpscope_testserver as testserver;
use mcpscope_testserver::democlient;
use mcpscope_tui::headless::{self, View};

/// The rule the demo arms: the first `tools/call` of `poke` is reset mid-call. (`poke` answers
/// after about 300 ms, so the reset comes at 150 ms, while the call is in flight.)
pub const DEMO_RULE: &str = "reset after 150ms when tool=poke per-tool once";

/// Runs the demo until quit (TUI), Ctrl-C, or `--seconds`.
pub async fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    // No SSE event ids: a dead stream cannot be resumed, so its call is orphaned at once.
    let server = testserver::start(testserver::Options {
        listen: loopback,
        event_ids: false,
        ..Default::default()
    })
    .await
    .context("cannot start the test server")?;
    let url = server.url();
    let config = Config {
        listen: loopback,
        upstream: url.parse().context("test server URL")?,
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let mut session = Session::builder("demo", Redactor::new())
        .keep(args.keep)
        .upstream(url.clone())
        .start()?;
    let proxy = mcpscope_proxy::start(config, session.sink()).await?;
    session.publish(Some(proxy.addr.to_string()));
    let engine = fault::install(&proxy, &[DEMO_RULE.to_string()], None)?;
    let proxy_url = format!("http://{}/mcp", proxy.addr);
    crate::say!(
        "mcpscope demo: test server on {url} (no SSE event ids: a dead stream cannot be resumed)"
    );
    crate::say!("mcpscope demo: proxy on {proxy_url} (not recording)");
    for label in engine.armed() {
        crate::say!("mcpscope demo: fault rule armed: {label}");
    }
    crate::say!(
        "mcpscope demo: the client calls echo, slow and peek, then poke, whose stream the proxy \
         resets mid-call: watch that call become orphaned"
    );

    let client = tokio::spawn(democlient::drive(proxy_url));
    let (feed, pace) = session.view().context("view feed already taken")?;
    let stop = async {
        match args.seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    let result = if let View::Headless(style) = View::chosen(args.headless, args.json) {
        tokio::select! {
            _ = headless::run(feed, style, Some(pace)) => Ok(()),
            _ = shutdown_signal() => Ok(()),
            _ = stop => Ok(()),
        }
    } else {
        let mut info = mcpscope_tui::Info::live(session.info(), Some(pace));
        info.theme = args.theme.clone();
        let control = fault::controller(&proxy, engine);
        tokio::select! {
            r = mcpscope_tui::run_live(feed, info, Some(control)) => r,
            _ = stop => Ok(()),
        }
    };
    client.abort();
    proxy.shutdown();
    // Nothing is recorded, so the hub is not waited for (live connections still hold sinks).
    drop(proxy);
    drop(session);
    let _ = tokio::time::timeout(Duration::from_secs(1), server.shutdown()).await;
    result
}
