//! Recordings: every event of a run as JSON Lines, after a header line with the format version.
//! The format is documented in `docs/recording-format.md`.

pub mod convert;
pub mod index;
pub mod line;
pub mod reader;
pub mod span;
pub mod writer;

pub use convert::{ConvertError, Converted, convert};
pub use index::{Index, index_file, read_range};
pub use reader::{Events, IndexPoint, Position, ReadError, Recording, read_file, read_from};
pub use span::read_span;
pub use writer::{Create, Follower, Recorder, open_private, write_private};

use serde::{Deserialize, Serialize};

/// The most bytes one recording line may hold (its newline aside): 128 MiB. A reader refuses a
/// longer line with an error naming it (it holds at most this much of it, never the whole);
/// the recorder never writes one: an event whose line would be longer is recorded as a note
/// saying what was left out. Above the longest line the proxy writes with its default limits
/// (a 64 MiB request body; a 16 MiB SSE event's data, escaped as a JSON string).
pub const MAX_LINE_BYTES: usize = 128 << 20;

/// The value of the header's `format` field.
pub const FORMAT_NAME: &str = "mcpscope-recording";

/// A recording's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// The format version ([`crate::event::FORMAT_VERSION`] when written by this mcpscope).
    pub version: u32,
    /// When recording began (RFC 3339).
    pub created: String,
    /// The mcpscope version that wrote it.
    pub tool_version: String,
    /// Whether credentials were redacted.
    pub redacted: bool,
}
