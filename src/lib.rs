//! mcpscope: an intercepting proxy and terminal debugger for MCP Streamable HTTP sessions.
//!
//! Taps on every stream emit [`event::Event`]s; the pure [`model::Model`] folds them into
//! sessions, streams and calls with a verdict each; views, the recorder and replays share them.

pub mod event;
pub mod model;
pub mod wire;
pub mod cli;
pub mod fault;
pub mod testserver;
pub mod democlient;
