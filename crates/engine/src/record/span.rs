//! Reading back part of a recording: the events between two sequence numbers, for a view that
//! evicted a call's detail from memory and is asked to show it again.

use std::io::{BufRead, BufReader};
use std::path::Path;

use super::reader::{ReadError, read_from};
use crate::event::Event;

/// The events with sequence numbers `from..=to` (0-based, in recording order, as
/// [`crate::model::Call::seq`] counts them). Lines outside the span are skipped unparsed.
pub fn read_span(path: &Path, from: u64, to: u64) -> Result<Vec<Event>, ReadError> {
    let io_err = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    let mut reader = BufReader::new(file);
    // The header line, checked by the full reader's rules.
    let mut header = Vec::new();
    reader.read_until(b'\n', &mut header).map_err(io_err)?;
    read_from(header.as_slice(), path)?;
    let mut events = Vec::new();
    let mut seq: u64 = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io_err)? == 0 || seq > to {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if seq >= from {
            match serde_json::from_slice::<Event>(&line) {
                Ok(event) => events.push(event),
                // A torn last line ends the span; the full reader reports it.
                Err(_) => break,
            }
        }
        seq += 1;
    }
    Ok(events)
}
