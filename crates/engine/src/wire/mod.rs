//! Wire formats: SSE framing, JSON-RPC messages and the content kind of a body.

pub mod content;
pub mod jsonrpc;
pub mod lines;
pub mod mirror;
pub mod oauth;
pub mod observe;
pub mod sse;

pub use content::ContentKind;

/// The text of bytes off the wire, U+FFFD for what is not UTF-8. Bytes that are UTF-8 (nearly
/// all) are checked whole on the fast path and borrowed; only the rest takes the lossy walk.
pub fn lossy_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}
