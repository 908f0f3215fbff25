//! Shared helpers for the integration tests.

pub mod live;
pub mod long_recording;
pub mod node_server;
pub mod peers;
pub mod raw;
pub mod screen;
