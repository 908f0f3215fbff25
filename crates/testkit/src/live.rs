//! A live proxy in front of the built-in test server, with the fault engine installed and the
//! events on a channel: what the intercept and re-send tests drive; and a proxy with its
//! session ([`Proxied`]), as the binary runs them.

use std::sync::Arc;

use mcpscope_engine::event::Event;
use mcpscope_engine::fault::rules::RuleEngine;
use mcpscope_engine::record::Recorder;
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::controller as fault;
use mcpscope_proxy::{self as proxy, Config, Proxy};
use mcpscope_session::Session;
use mcpscope_session::hub::Tally;
use mcpscope_session::sink::EventSink;
use mcpscope_testserver::{self as testserver, TestServer};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The server, the proxy in front of it, its fault engine, its events and its MCP URL.
pub struct Live {
    /// The built-in test server.
    pub server: TestServer,
    /// The proxy in front of it.
    pub proxy: Proxy,
    /// The proxy's fault-rule engine.
    pub engine: Arc<RuleEngine>,
    /// Every event the proxy emits.
    pub events: UnboundedReceiver<Event>,
    /// The proxy's MCP endpoint URL.
    pub url: String,
}

/// Starts the test server and a proxy in front of it.
pub async fn start() -> Live {
    start_with(testserver::Options::default()).await
}

/// Starts the test server with `options` and a proxy in front of it.
pub async fn start_with(options: testserver::Options) -> Live {
    let server = testserver::start(options).await.expect("test server");
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: server.url().parse().expect("uri"),
        ..Default::default()
    };
    let (proxy, engine, events) = start_proxy(config).await;
    let url = format!("http://{}/mcp", proxy.addr);
    Live {
        server,
        proxy,
        engine,
        events,
        url,
    }
}

/// A proxy set up by `config` (a forward proxy, say), with the fault engine installed and every
/// event it emits on a channel.
pub async fn start_proxy(config: Config) -> (Proxy, Arc<RuleEngine>, UnboundedReceiver<Event>) {
    let (tx, events) = unbounded_channel::<Event>();
    let proxy = proxy::start(config, EventSink::new(tx))
        .await
        .expect("proxy");
    let engine = fault::install(&proxy, &[], None).expect("rules");
    (proxy, engine, events)
}

/// A proxy with its session, wired as the binary wires them: every event redacted, recorded
/// when there is a recorder, and on the session's feed.
pub struct Proxied {
    /// The proxy.
    pub proxy: Proxy,
    /// Its session.
    pub session: Session,
}

impl Proxied {
    /// Starts a session (recording into `recorder`, if any) and a proxy feeding it.
    pub async fn start(config: Config, recorder: Option<Recorder>, redactor: Redactor) -> Self {
        let session = Session::builder("http", redactor)
            .record(recorder)
            .start()
            .expect("session");
        let proxy = proxy::start(config, session.sink()).await.expect("proxy");
        Self { proxy, session }
    }

    /// The proxy's MCP endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.proxy.addr)
    }

    /// Stops the proxy (every open exchange ended) and finishes the session within
    /// `patience`: what the hub did, `None` if it did not finish in time.
    pub async fn stop(self, patience: std::time::Duration) -> Option<Tally> {
        self.proxy.shutdown();
        drop(self.proxy);
        self.session.finish(patience).await
    }
}
