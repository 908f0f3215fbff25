//! Shared helpers for the integration tests.

pub mod forward;
pub mod node_server;
pub mod peers;
