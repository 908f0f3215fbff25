//! Newline-delimited streams (stdio transport): bytes in, whole lines out, each line bounded.
//! [`LineObserver`] turns each line of a JSON-RPC stream into a `message` or an
//! `invalid_message`, as [`super::observe`] does for HTTP bodies; it never holds bytes back from
//! whoever forwards them.

use crate::event::{Direction, EventKind, StreamId};
use crate::wire::jsonrpc;

/// The most of an invalid line quoted in its report.
const RAW_QUOTE: usize = 4096;

/// Splits a byte stream into lines (without `\n` or a trailing `\r`). A line longer than the cap
/// is given once, cut to the cap and marked cut; the rest of it is skipped.
#[derive(Debug, Clone)]
pub struct LineSplitter {
    buf: Vec<u8>,
    cap: usize,
    /// Skipping the rest of a line already given cut.
    skipping: bool,
}

impl LineSplitter {
    /// A splitter keeping at most `cap` bytes of a line.
    pub fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            skipping: false,
        }
    }

    /// Feeds bytes; calls `line(text, cut)` for each line they complete (or cut).
    pub fn feed(&mut self, mut bytes: &[u8], mut line: impl FnMut(&[u8], bool)) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let (part, rest, complete) = match newline {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if !self.skipping {
                let room = self.cap - self.buf.len();
                if part.len() > room {
                    self.buf.extend_from_slice(&part[..room]);
                    line(&self.buf, true);
                    self.buf.clear();
                    self.skipping = true;
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            if complete {
                if !self.skipping {
                    let text = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
                    line(text, false);
                }
                self.buf.clear();
                self.skipping = false;
            }
        }
    }

    /// The end of the stream: the last line if it had no newline.
    pub fn finish(&mut self, mut line: impl FnMut(&[u8], bool)) {
        if !self.skipping && !self.buf.is_empty() {
            let text = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
            line(text, false);
        }
        self.buf.clear();
        self.skipping = false;
    }
}

/// Invalid lines in a row reported one by one; past them only the `2^k`-th line of the run is,
/// each after a note with the count so far, and the run's length is noted when it ends: output
/// that is not JSON-RPC at all costs the recording a few dozen events, not one per line.
pub const INVALID_RUN_IN_FULL: u64 = 16;

/// Observes one direction of a newline-delimited JSON-RPC stream.
#[derive(Debug, Clone)]
pub struct LineObserver {
    stream: StreamId,
    dir: Direction,
    lines: LineSplitter,
    cap: usize,
    /// Invalid lines in a row so far, and whether some of them went unreported since the last
    /// note.
    run: (u64, bool),
}

impl LineObserver {
    /// An observer of `dir` on `stream`; a line longer than `cap` bytes is reported invalid.
    pub fn new(stream: StreamId, dir: Direction, cap: usize) -> Self {
        Self {
            stream,
            dir,
            lines: LineSplitter::new(cap),
            cap,
            run: (0, false),
        }
    }

    /// Feeds bytes as they pass; returns what the lines they complete say.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<EventKind> {
        let mut out = Vec::new();
        let (stream, dir, cap, run) = (self.stream, self.dir, self.cap, &mut self.run);
        self.lines.feed(bytes, |line, cut| {
            if let Some(event) = report(stream, dir, cap, line, cut) {
                sample(stream, run, event, &mut out);
            }
        });
        out
    }

    /// The end of the stream: what its last line says, if it had no newline.
    pub fn finish(&mut self) -> Vec<EventKind> {
        let mut out = Vec::new();
        let (stream, dir, cap, run) = (self.stream, self.dir, self.cap, &mut self.run);
        self.lines.finish(|line, cut| {
            if let Some(event) = report(stream, dir, cap, line, cut) {
                sample(stream, run, event, &mut out);
            }
        });
        end_run(stream, run, &mut out);
        out
    }
}

/// The note of a run of invalid lines.
fn run_note(stream: StreamId, count: u64, so_far: bool) -> EventKind {
    EventKind::Note {
        stream: Some(stream),
        text: format!(
            "{count} invalid lines in a row{}; past the first {INVALID_RUN_IN_FULL} only every \
             power of two is recorded",
            if so_far { " so far" } else { "" }
        ),
    }
}

/// A run of invalid lines ended: its length is noted if some of it went unreported.
fn end_run(stream: StreamId, run: &mut (u64, bool), out: &mut Vec<EventKind>) {
    if run.1 {
        out.push(run_note(stream, run.0, false));
    }
    *run = (0, false);
}

/// Passes a line's report on, counting and sampling runs of invalid lines.
fn sample(stream: StreamId, run: &mut (u64, bool), event: EventKind, out: &mut Vec<EventKind>) {
    if !matches!(event, EventKind::InvalidMessage { .. }) {
        end_run(stream, run, out);
        out.push(event);
        return;
    }
    run.0 += 1;
    let count = run.0;
    if count <= INVALID_RUN_IN_FULL {
        out.push(event);
    } else if count.is_power_of_two() {
        out.push(run_note(stream, count, true));
        out.push(event);
        run.1 = false;
    } else {
        run.1 = true;
    }
}

/// What one line says: a message, an invalid message, or nothing (a blank line).
fn report(
    stream: StreamId,
    dir: Direction,
    cap: usize,
    line: &[u8],
    cut: bool,
) -> Option<EventKind> {
    if !cut && line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let parsed = if cut {
        Err(format!("line longer than {cap} bytes"))
    } else {
        jsonrpc::parse_body(line)
    };
    Some(match parsed {
        Ok(body) => EventKind::Message { stream, dir, body },
        Err(reason) => EventKind::InvalidMessage {
            stream,
            dir,
            reason,
            raw: String::from_utf8_lossy(&line[..line.len().min(RAW_QUOTE)]).into_owned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(events: &[EventKind]) -> Vec<&'static str> {
        events
            .iter()
            .map(|e| match e {
                EventKind::Message { .. } => "message",
                EventKind::InvalidMessage { .. } => "invalid",
                _ => "other",
            })
            .collect()
    }

    #[test]
    fn a_line_split_across_reads_is_one_message() {
        let mut o = LineObserver::new(1, Direction::ServerToClient, 1024);
        assert!(o.feed(br#"{"jsonrpc":"2.0","#).is_empty());
        let events = o.feed(b"\"id\":1,\"result\":{}}\r\n\n  \n{\"x\":");
        assert_eq!(kinds(&events), ["message"]);
        assert_eq!(kinds(&o.feed(b"1}\nnot json\n")), ["message", "invalid"]);
        assert!(o.finish().is_empty());
    }

    #[test]
    fn a_last_line_without_newline_is_reported_at_the_end() {
        let mut o = LineObserver::new(1, Direction::ClientToServer, 1024);
        assert!(o.feed(br#"{"jsonrpc":"2.0","method":"x"}"#).is_empty());
        assert_eq!(kinds(&o.finish()), ["message"]);
    }

    #[test]
    fn a_long_line_is_reported_once_and_the_next_line_is_read() {
        let mut o = LineObserver::new(1, Direction::ServerToClient, 8);
        let mut events = o.feed(b"0123456");
        events.extend(o.feed(b"789abcdef"));
        events.extend(o.feed(b"ghij\n{}\n"));
        assert_eq!(kinds(&events), ["invalid", "message"]);
        let EventKind::InvalidMessage { reason, raw, .. } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(reason, "line longer than 8 bytes");
        assert_eq!(raw, "01234567");
    }

    #[test]
    fn the_splitter_cuts_long_lines() {
        let mut s = LineSplitter::new(4);
        let mut lines = Vec::new();
        s.feed(b"ab\ncdefgh\nij", |l, cut| lines.push((l.to_vec(), cut)));
        s.finish(|l, cut| lines.push((l.to_vec(), cut)));
        assert_eq!(
            lines,
            [
                (b"ab".to_vec(), false),
                (b"cdef".to_vec(), true),
                (b"ij".to_vec(), false)
            ]
        );
    }

    #[test]
    fn a_run_of_invalid_lines_is_counted_and_sampled() {
        let mut o = LineObserver::new(1, Direction::ServerToClient, 1024);
        let mut text = String::new();
        for n in 0..100 {
            text.push_str(&format!("{n}\n"));
        }
        text.push_str("{}\nnope\n");
        let mut events = o.feed(text.as_bytes());
        events.extend(o.finish());
        let invalid = kinds(&events).iter().filter(|k| **k == "invalid").count();
        // 16 in full, the 32nd and 64th, then the line after the message.
        assert_eq!(invalid, 16 + 2 + 1);
        let notes: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                EventKind::Note { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[2].starts_with("100 invalid lines in a row;"),
            "{notes:?}"
        );
        assert_eq!(
            kinds(&events).iter().filter(|k| **k == "message").count(),
            1
        );
    }
}
