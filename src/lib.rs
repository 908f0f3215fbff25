//! The `mcpscope` command's wiring: arguments, the proxy with its hub and a view, the demo and
//! replays. The engine, proxy, TUI and test kit live in their own crates under `crates/`.

pub mod app;
pub mod attach;
pub mod cli;
pub mod demo;
pub mod headless;
pub mod matrix;
pub mod pass_host;
pub mod replay;
pub mod signals;
pub mod stdio;
