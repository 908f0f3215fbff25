//! A sparse index of a recording: where every Nth event's line starts, so that a range of events
//! is read by seeking near it instead of from the top.

use std::ops::Range;
use std::path::Path;

use super::reader::{Events, IndexPoint, ReadError};
use crate::event::Event;

/// The index of one recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    /// Events between two points.
    pub every: u64,
    /// Events in the recording (the torn last line, if any, not counted).
    pub events: u64,
    /// Points at events 0, `every`, 2 × `every`, …
    pub points: Vec<IndexPoint>,
}

impl Index {
    /// The last point at or before event `seq`.
    pub fn point_before(&self, seq: u64) -> Option<&IndexPoint> {
        let at = self.points.partition_point(|p| p.at.seq <= seq);
        self.points.get(at.checked_sub(1)?)
    }
}

/// Scans a recording once and notes where every `every`th event starts (`every` of 0 is taken
/// as 1). Fails on a bad line, as reading does.
pub fn index_file(path: &Path, every: u64) -> Result<Index, ReadError> {
    let every = every.max(1);
    let mut events = Events::open(path)?;
    let mut points = Vec::new();
    loop {
        let at = events.position();
        let context = (at.seq.is_multiple_of(every)).then(|| events.context().clone());
        match events.next() {
            None => break,
            Some(Err(e)) => return Err(e),
            Some(Ok(_)) => {
                if let Some(context) = context {
                    points.push(IndexPoint { at, context });
                }
            }
        }
    }
    Ok(Index {
        every,
        events: events.position().seq,
        points,
    })
}

/// The events `seq.start..seq.end` of a recording (as far as it goes), read from the indexed
/// point nearest before them. `index` must be [`index_file`]'s for this file.
pub fn read_range(
    path: &Path,
    index: &Index,
    seq: Range<u64>,
) -> Result<impl Iterator<Item = Result<Event, ReadError>>, ReadError> {
    let events = match index.point_before(seq.start) {
        Some(point) => Events::open_at(path, point)?,
        None => Events::open(path)?,
    };
    let skip = seq.start - events.position().seq;
    let take = seq.end.saturating_sub(seq.start);
    Ok(events.skip(skip_count(skip)).take(skip_count(take)))
}

fn skip_count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Direction, EventKind};
    use crate::record::{Create, Recorder, read_file};
    use crate::wire::observe;

    /// A recording where SSE events and their messages on two streams interleave with notes, so
    /// that many index points fall between an event and its back-reference.
    fn write_sample(path: &Path) -> Vec<Event> {
        let mut recorder = Recorder::create(path, Create::Replace, true).expect("create");
        let mut events = Vec::new();
        for n in 0..200u64 {
            let stream = 1 + n % 2;
            let data = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"n":{n}}}}}"#
            );
            events.push(Event::now(EventKind::SseEvent {
                stream,
                id: None,
                event: None,
                retry: None,
                data: data.as_str().into(),
                start: n * 100,
                end: n * 100 + 99,
            }));
            if n % 3 == 0 {
                events.push(Event::now(EventKind::Note {
                    stream: None,
                    text: format!("between {n}"),
                }));
            }
            events.push(Event::now(observe::message(
                stream,
                Direction::ServerToClient,
                data.as_bytes(),
            )));
        }
        for event in &events {
            recorder.write(event).expect("write");
        }
        recorder.flush().expect("flush");
        events
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpscope-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir.join(name)
    }

    #[test]
    fn every_range_reads_the_same_events_as_the_whole_file() {
        let path = temp("ranges.jsonl");
        let events = write_sample(&path);
        assert_eq!(read_file(&path).expect("read").events, events);
        for every in [1, 2, 3, 7, 64, 1000] {
            let index = index_file(&path, every).expect("index");
            assert_eq!(index.events, events.len() as u64);
            let pending = index
                .points
                .iter()
                .filter(|p| p.context.pending_sse() > 0)
                .count();
            assert!(
                pending > 0 || every > 3,
                "{every}: {:?}",
                &index.points[..3]
            );
            for from in (0..events.len() as u64).step_by(5) {
                for len in [0, 1, 2, 9] {
                    let got: Vec<Event> = read_range(&path, &index, from..from + len)
                        .expect("open")
                        .collect::<Result<_, _>>()
                        .expect("read");
                    let end = (from + len).min(events.len() as u64);
                    assert_eq!(
                        got,
                        events[from as usize..end as usize],
                        "{every} {from} {len}"
                    );
                }
            }
        }
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn a_torn_last_line_is_skipped_with_a_warning() {
        let path = temp("torn.jsonl");
        let events = write_sample(&path);
        let text = std::fs::read(&path).expect("read");
        // Cut inside the last SSE event's line (the one before the last back-reference).
        let last_lines: Vec<usize> = text
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i)
            .collect();
        let cut = last_lines[last_lines.len() - 3] + 40;
        std::fs::write(&path, &text[..cut]).expect("write");
        let recording = read_file(&path).expect("opens");
        assert_eq!(recording.events, events[..events.len() - 2]);
        assert_eq!(recording.warnings.len(), 1, "{:?}", recording.warnings);
        assert!(recording.warnings[0].contains("the last line is truncated"));
        let index = index_file(&path, 10).expect("index");
        assert_eq!(index.events, events.len() as u64 - 2);
        std::fs::remove_file(&path).ok();
    }
}
