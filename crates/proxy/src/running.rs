//! A proxy with its hub (recorder and view feed), started together.

use std::path::PathBuf;

use anyhow::Context;
use mcpscope_engine::record::Recorder;

use crate::hub::Hub;
use crate::sink::EventSink;
use crate::{Config, Proxy};

/// A proxy with its hub, ready for a view.
pub struct Running {
    /// The proxy.
    pub proxy: Proxy,
    /// The hub.
    pub hub: Hub,
}

/// Starts the hub and the proxy.
pub async fn start_proxy(config: Config, recording: Option<PathBuf>) -> anyhow::Result<Running> {
    let recorder = match &recording {
        Some(path) => Some(
            Recorder::create(path, config.redact)
                .with_context(|| format!("cannot create the recording {}", path.display()))?,
        ),
        None => None,
    };
    let hub = Hub::start(recorder)?;
    let proxy = crate::start(config, EventSink::new(hub.input.clone())).await?;
    Ok(Running { proxy, hub })
}
