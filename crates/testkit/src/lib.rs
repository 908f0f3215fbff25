//! mcpscope's test kit: the scripted MCP client used by the demo and the tests, the replay
//! probe, the event-script builder, the built-in MCP test server and the recorded scenarios.

pub mod democlient;
pub mod fixtures;
pub mod probe;
pub mod scenario;
pub mod testserver;
