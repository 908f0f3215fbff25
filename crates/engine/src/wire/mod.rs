//! Wire formats: SSE framing and JSON-RPC messages.

pub mod jsonrpc;
pub mod sse;
