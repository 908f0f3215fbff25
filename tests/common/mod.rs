//! Shared helpers for the integration tests.

pub mod live;
pub mod node_server;
pub mod peers;
pub mod raw;
pub mod screen;
