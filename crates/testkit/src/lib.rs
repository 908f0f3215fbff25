//! mcpscope's test kit: the MCP test client, the demo's scripted steps on it, the event-script
//! builder, the built-in MCP test server and the recorded scenarios.

pub mod client;
pub mod democlient;
pub mod fixtures;
pub mod scenario;
pub mod testserver;
