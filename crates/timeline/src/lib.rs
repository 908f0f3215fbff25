//! A time cursor over a recording, with no terminal code: [`ReplayCursor`] over events in
//! memory, [`FileCursor`] over a file read as needed (its background [`indexer`] pass, the
//! [`savedindex`] it starts from, and the [`liveindex`] that writes one beside a recording as
//! it is recorded), both behind the [`Timeline`] trait; the [`player`] that plays one for a
//! view, and the [`live`] model a live view shows (with its pause); and [`recall`] of the model
//! at a past moment.

pub(crate) mod checkpoint;
pub(crate) mod cursor;
pub(crate) mod filecursor;
pub mod indexer;
pub mod live;
pub mod liveindex;
pub mod player;
pub(crate) mod readahead;
pub mod recall;
pub mod savedindex;
pub(crate) mod timeline;

pub use checkpoint::Checkpoint;
pub use cursor::{ReplayCursor, Speed};
pub use filecursor::FileCursor;
pub use timeline::Timeline;
