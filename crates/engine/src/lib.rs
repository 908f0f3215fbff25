//! mcpscope's engine: the vocabulary of timestamped [`event::Event`]s, the wire formats (SSE,
//! JSON-RPC), the pure [`model::Model`] folded from events, the recording format and the fault
//! grammar. It runs no I/O of its own beyond reading and writing recording files: no tokio, hyper
//! or ratatui, so live, replay, headless and every view fold the same events the same way.

pub mod event;
pub mod fault;
#[cfg(feature = "test-util")]
pub mod fixtures;
#[cfg(feature = "test-util")]
pub mod long_recording;
pub mod model;
pub mod record;
pub mod redact;
pub mod revision;
pub mod schema;
pub mod wire;

/// A usage error: reported in one line with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
