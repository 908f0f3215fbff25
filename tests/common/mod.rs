//! Shared helpers for the integration tests.

pub mod peers;
pub mod raw;
