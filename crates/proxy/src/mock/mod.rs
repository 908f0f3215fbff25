//! The mock upstream: a recording served back as a server that re-enacts the server side,
//! deaths included.

pub mod matching;
pub mod serve;

pub use serve::{MAX_CONNECTIONS, ServeHandle, serve, serve_with};
