//! Reading back part of a recording: the events between two sequence numbers, for a view that
//! evicted a call's detail from memory and is asked to show it again.

use std::path::Path;

use super::reader::{Events, ReadError};
use crate::event::Event;

/// The events with sequence numbers `from..=to` (0-based, in recording order, as
/// [`crate::model::Call::seq`] counts them), read from the start of the file (the recording is
/// still growing while a live view asks). A torn last line ends the span.
pub fn read_span(path: &Path, from: u64, to: u64) -> Result<Vec<Event>, ReadError> {
    let count = usize::try_from(to.saturating_sub(from).saturating_add(1)).unwrap_or(usize::MAX);
    let skip = usize::try_from(from).unwrap_or(usize::MAX);
    Events::open(path)?.skip(skip).take(count).collect()
}
