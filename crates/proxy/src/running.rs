//! A proxy with its hub (recorder and view feed), started together.

use mcpscope_engine::record::Recorder;
use mcpscope_engine::redact::Redactor;

use crate::{Config, Proxy};
use mcpscope_session::hub::Hub;
use mcpscope_session::sink::EventSink;

/// A proxy with its hub, ready for a view.
pub struct Running {
    /// The proxy.
    pub proxy: Proxy,
    /// The hub.
    pub hub: Hub,
}

/// Starts the hub (recording into `recorder`, if any; every event redacted by `redactor`
/// before it is recorded or shown) and the proxy.
pub async fn start_proxy(
    config: Config,
    recorder: Option<Recorder>,
    redactor: Redactor,
) -> anyhow::Result<Running> {
    let hub = Hub::start(recorder, redactor)?;
    let sink = EventSink::to_hub(hub.input.clone()).with_backlog(hub.backlog.clone());
    let proxy = crate::start(config, sink).await?;
    Ok(Running { proxy, hub })
}
