//! Wire formats: SSE framing, JSON-RPC messages and the content kind of a body.

pub mod content;
pub mod jsonrpc;
pub mod lines;
pub mod mirror;
pub mod oauth;
pub mod observe;
pub mod sse;

pub use content::ContentKind;
