//! mcpscope's test kit: the MCP test client, the demo's scripted steps on it, the event-script
//! builder, the built-in MCP test server, the recorded scenarios and wire byte counting.

pub mod client;
pub mod democlient;
pub mod fixtures;
pub mod scenario;
pub mod testserver;
pub mod wirecount;
