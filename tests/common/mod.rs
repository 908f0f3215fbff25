//! Shared helpers for the integration tests.

pub mod live;
pub mod peers;
pub mod raw;
pub mod screen;
