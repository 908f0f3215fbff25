//! mcpscope: an intercepting proxy and terminal debugger for MCP Streamable HTTP sessions.
//!
//! Taps on every stream emit [`event::Event`]s; the pure [`model::Model`] folds them into
//! sessions, streams and calls with a verdict each; views, the recorder and replays share them.

pub mod app;
pub mod cli;
pub mod demo;
pub mod democlient;
pub mod event;
pub mod fault;
pub mod headless;
pub mod hub;
pub mod model;
pub mod proxy;
pub mod record;
pub mod replay;
pub mod testserver;
pub mod tui;
pub mod wire;
