//! mcpscope's test kit (a dev-dependency only): recorded scenarios, wire byte counting, a raw
//! HTTP/1.1 wire observer, a live proxy in front of the test server, and a long recording with
//! its expected state. The event-script builder is the engine's `fixtures` (feature
//! `test-util`); the test server and client are `mcpscope-testserver`.

pub mod live;
pub mod raw;
pub mod scenario;
pub mod tmux;
pub mod wirecount;
