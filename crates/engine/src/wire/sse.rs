//! An incremental, byte-exact Server-Sent Events tap.
//!
//! Fed the response body chunk by chunk as it passes through (it never holds the body back),
//! it reports each complete event with its fields and the byte offsets it spans. Lines may end in
//! LF, CR or CRLF, including a CRLF split across two chunks; comment lines (keep-alives) are not
//! events; a block with an `id` and no `data` (a priming event) is reported as an event.

use std::sync::Arc;

/// One complete SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseFrame {
    /// `id:` field, if present.
    pub id: Option<String>,
    /// `event:` field, if present.
    pub event: Option<String>,
    /// `retry:` field, if present and numeric.
    pub retry: Option<u64>,
    /// The `data:` lines joined by LF (shared: the events made of it hold this one text).
    pub data: Arc<str>,
    /// Whether any `data:` line was present.
    pub has_data: bool,
    /// Whether a field held bytes that are not UTF-8 (replaced by U+FFFD in the text above;
    /// the bytes on the wire are untouched).
    pub invalid_utf8: bool,
    /// Offset of the event's first byte.
    pub start: u64,
    /// Offset one past its terminating blank line.
    pub end: u64,
}

/// The most bytes one line, or one event's joined data, may hold before the parser gives up on a
/// stream (16 MiB): past it, nothing more is decoded and nothing more is held.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Bytes of a line held in pieces of at most [`LineBuf::PIECE`] bytes (or one chunk's), so that
/// a long line costs what it holds: a buffer grown by doubling would leave its earlier copies
/// to the allocator, about twice the line at its peak.
#[derive(Debug, Default)]
struct LineBuf {
    pieces: Vec<Vec<u8>>,
    len: usize,
}

impl LineBuf {
    /// The size past which a line goes on in a new piece.
    const PIECE: usize = 64 << 10;

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn extend(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.len += bytes.len();
        match self.pieces.last_mut() {
            Some(last) if last.len() + bytes.len() <= Self::PIECE => last.extend_from_slice(bytes),
            Some(_) => {
                let mut piece = Vec::with_capacity(bytes.len().max(Self::PIECE));
                piece.extend_from_slice(bytes);
                self.pieces.push(piece);
            }
            None => self.pieces.push(bytes.to_vec()),
        }
    }

    /// The whole line, leaving the buffer empty (one piece is handed over as it is).
    fn take(&mut self) -> Vec<u8> {
        let len = std::mem::take(&mut self.len);
        // The list of pieces keeps its room: taking a line allocates nothing.
        if self.pieces.len() <= 1 {
            return self.pieces.pop().unwrap_or_default();
        }
        let mut line = Vec::with_capacity(len);
        for piece in self.pieces.drain(..) {
            line.extend_from_slice(&piece);
        }
        line
    }

    /// Keeps a small line's allocation for the next line.
    fn recycle(&mut self, mut line: Vec<u8>) {
        if self.pieces.is_empty() && line.capacity() <= Self::PIECE {
            line.clear();
            self.pieces.push(line);
        }
    }
}

/// The incremental parser.
#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    gave_up: Option<String>,
    line: LineBuf,
    line_start: u64,
    offset: u64,
    after_cr: bool,
    bom_checked: bool,
    block_start: Option<u64>,
    has_field: bool,
    current: SseFrame,
    /// The event's data joined so far once it has a second `data:` line (the first one alone
    /// is kept as the frame's text, copied once).
    joined: Option<String>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseParser {
    /// A parser at the start of a stream, with the default limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that gives up on a stream once a line or an event's data exceeds
    /// `max_event_bytes` (see [`SseParser::gave_up`]).
    pub fn with_limit(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            gave_up: None,
            line: LineBuf::default(),
            line_start: 0,
            offset: 0,
            after_cr: false,
            bom_checked: false,
            block_start: None,
            has_field: false,
            current: SseFrame::default(),
            joined: None,
        }
    }

    /// Why the parser stopped decoding this stream (a line or an event past the limit), if it
    /// did. From then on it only counts bytes: the stream still flows, unobserved.
    pub fn gave_up(&self) -> Option<&str> {
        self.gave_up.as_deref()
    }

    fn give_up(&mut self, what: &str) {
        self.gave_up = Some(format!(
            "{what} exceeds {} bytes: the rest of the stream is forwarded without being decoded",
            self.max_event_bytes
        ));
        self.line = LineBuf::default();
        self.current = SseFrame::default();
        self.joined = None;
        self.has_field = false;
        self.block_start = None;
    }

    /// Total bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether bytes of an unfinished event are held (a stream ending now truncates an event).
    pub fn mid_event(&self) -> bool {
        self.gave_up.is_none() && (!self.line.is_empty() || self.has_field)
    }

    /// Feeds the next chunk; complete events are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseFrame>) {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        if self.gave_up.is_some() {
            self.offset += chunk.len() as u64;
            return;
        }
        if !self.bom_checked {
            // A byte-order mark may arrive split across chunks: hold its bytes until decided.
            let seen = self.offset as usize;
            let take = chunk.len().min(BOM.len() - seen);
            if chunk[..take] == BOM[seen..seen + take] {
                self.offset += take as u64;
                self.line_start = self.offset;
                chunk = &chunk[take..];
                if (self.offset as usize) < BOM.len() {
                    return;
                }
                self.bom_checked = true;
            } else {
                self.bom_checked = true;
                if seen > 0 {
                    // Not a BOM after all: the held bytes are content.
                    self.offset = 0;
                    self.line_start = 0;
                    let held = BOM[..seen].to_vec();
                    self.feed(&held, out);
                }
            }
        }
        while !chunk.is_empty() {
            if self.gave_up.is_some() {
                self.offset += chunk.len() as u64;
                return;
            }
            if self.after_cr {
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    self.offset += 1;
                    self.line_start = self.offset;
                    chunk = &chunk[1..];
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', chunk) {
                Some(pos) => {
                    if self.line.len() + pos > self.max_event_bytes {
                        self.offset += chunk.len() as u64;
                        self.give_up("an SSE line");
                        return;
                    }
                    self.line.extend(&chunk[..pos]);
                    let terminator = chunk[pos];
                    self.offset += pos as u64 + 1;
                    chunk = &chunk[pos + 1..];
                    if terminator == b'\r' {
                        self.after_cr = true;
                    }
                    let line = self.line.take();
                    let start = self.line_start;
                    self.line_start = self.offset;
                    self.process_line(&line, start, out);
                    self.line.recycle(line);
                    if self.after_cr && chunk.first() == Some(&b'\n') {
                        self.after_cr = false;
                        self.offset += 1;
                        self.line_start = self.offset;
                        chunk = &chunk[1..];
                        self.patch_last_end(out);
                    }
                }
                None => {
                    self.offset += chunk.len() as u64;
                    if self.line.len() + chunk.len() > self.max_event_bytes {
                        self.give_up("an SSE line");
                        return;
                    }
                    self.line.extend(chunk);
                    chunk = &[];
                }
            }
        }
    }

    /// An event that ended on a CR whose LF followed spans the LF too.
    fn patch_last_end(&mut self, out: &mut [SseFrame]) {
        if let Some(last) = out.last_mut()
            && last.end + 1 == self.offset
        {
            last.end = self.offset;
        }
    }

    fn process_line(&mut self, line: &[u8], start: u64, out: &mut Vec<SseFrame>) {
        if line.is_empty() {
            if self.has_field {
                let mut frame = std::mem::take(&mut self.current);
                if let Some(joined) = self.joined.take() {
                    frame.data = joined.into();
                }
                frame.start = self.block_start.unwrap_or(start);
                frame.end = self.offset;
                out.push(frame);
            }
            self.current = SseFrame::default();
            self.joined = None;
            self.has_field = false;
            self.block_start = None;
            return;
        }
        self.block_start.get_or_insert(start);
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = super::lossy_text(value);
        if matches!(value, std::borrow::Cow::Owned(_)) {
            self.current.invalid_utf8 = true;
        }
        match name {
            b"data" => {
                let so_far = self
                    .joined
                    .as_ref()
                    .map_or(self.current.data.len(), String::len);
                if so_far + value.len() + 1 > self.max_event_bytes {
                    self.give_up("an SSE event's data");
                    return;
                }
                if self.current.has_data {
                    let joined = self
                        .joined
                        .get_or_insert_with(|| String::from(&*self.current.data));
                    joined.push('\n');
                    joined.push_str(&value);
                } else {
                    self.current.data = Arc::from(&*value);
                }
                self.current.has_data = true;
                self.has_field = true;
            }
            b"id" if !value.contains('\0') => {
                self.current.id = Some(value.into_owned());
                self.has_field = true;
            }
            b"event" => {
                self.current.event = Some(value.into_owned());
                self.has_field = true;
            }
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.current.retry = value.parse().ok();
                self.has_field = true;
            }
            _ => {}
        }
    }
}

/// Writes one SSE event to `out`: its `id:`, `event:` and `retry:` fields when given, then
/// `data` as one `data:` line per line (a bare `data:` when empty), then the blank line that
/// ends it. The one encoder of SSE events: every stream mcpscope writes goes through it.
pub fn encode_into(
    out: &mut String,
    id: Option<&str>,
    event: Option<&str>,
    retry: Option<u64>,
    data: &str,
) {
    use std::fmt::Write as _;
    if let Some(id) = id {
        let _ = writeln!(out, "id: {id}");
    }
    if let Some(event) = event {
        let _ = writeln!(out, "event: {event}");
    }
    if let Some(retry) = retry {
        let _ = writeln!(out, "retry: {retry}");
    }
    if data.is_empty() {
        out.push_str("data:\n");
    } else {
        for line in data.split('\n') {
            let _ = writeln!(out, "data: {line}");
        }
    }
    out.push('\n');
}

/// [`encode_into`] a new string.
pub fn encode(id: Option<&str>, event: Option<&str>, retry: Option<u64>, data: &str) -> String {
    let mut out = String::new();
    encode_into(&mut out, id, event, retry, data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseFrame> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        out
    }

    #[test]
    fn parses_fields_and_offsets() {
        let body = b": open\n\nid: 7\nevent: message\ndata: {\"a\":1}\n\n";
        let frames = parse_all(&[body]);
        assert_eq!(frames.len(), 1);
        let f = &frames[0];
        assert_eq!(f.id.as_deref(), Some("7"));
        assert_eq!(f.event.as_deref(), Some("message"));
        assert_eq!(&*f.data, "{\"a\":1}");
        assert_eq!(f.start, 8);
        assert_eq!(f.end, body.len() as u64);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_line_end() {
        let body: &[u8] = b"data: x\r\n\r\ndata: y\r\n\r\n";
        for split in 0..body.len() {
            let frames = parse_all(&[&body[..split], &body[split..]]);
            let data: Vec<&str> = frames.iter().map(|f| &*f.data).collect();
            assert_eq!(data, ["x", "y"], "split at {split}");
            // A CR that ends a chunk ends the event at once; its LF then leads the next block.
            let first_end = if split == 10 { 10 } else { 11 };
            assert_eq!(frames[0].end, first_end, "split at {split}");
            assert_eq!(frames[1].start, 11, "split at {split}");
            let last_end = if split == body.len() - 1 {
                body.len() - 1
            } else {
                body.len()
            };
            assert_eq!(frames[1].end, last_end as u64, "split at {split}");
        }
    }

    #[test]
    fn byte_at_a_time_matches_whole() {
        let body: &[u8] = b"\xEF\xBB\xBFretry: 1500\rid: p1\rdata:\r\rdata: a\ndata: b\n\n: ka\n\n";
        let whole = parse_all(&[body]);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(parse_all(&bytes), whole);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].retry, Some(1500));
        assert_eq!(whole[0].id.as_deref(), Some("p1"));
        assert_eq!(&*whole[0].data, "");
        assert_eq!(&*whole[1].data, "a\nb");
    }

    #[test]
    fn priming_event_without_data_is_reported() {
        let frames = parse_all(&[b"id: 0\n\n"]);
        assert_eq!(frames.len(), 1);
        assert!(!frames[0].has_data);
    }

    #[test]
    fn a_long_line_in_many_pieces_is_read_whole() {
        let data = "0123456789".repeat(30_000);
        let text = format!("data: {data}\n\ndata: short\n\n");
        for size in [1, 7, 4096, 70_000, text.len()] {
            let mut parser = SseParser::new();
            let mut out = Vec::new();
            for piece in text.as_bytes().chunks(size) {
                parser.feed(piece, &mut out);
            }
            assert_eq!(out.len(), 2, "chunks of {size}");
            assert_eq!(&*out[0].data, data, "chunks of {size}");
            assert_eq!(&*out[1].data, "short", "chunks of {size}");
            assert_eq!(out[1].end, text.len() as u64);
        }
    }

    #[test]
    fn a_line_or_an_event_past_the_limit_stops_decoding_but_counts_every_byte() {
        let mut parser = SseParser::with_limit(16);
        let mut out = Vec::new();
        parser.feed(b"data: ok\n\n", &mut out);
        assert_eq!(out.len(), 1);
        parser.feed(b"data: 0123456789", &mut out);
        assert!(parser.gave_up().is_none());
        parser.feed(b"abcdef", &mut out);
        assert!(parser.gave_up().is_some_and(|r| r.contains("16 bytes")));
        parser.feed(b"\n\ndata: later\n\n", &mut out);
        assert_eq!(out.len(), 1, "nothing decoded after giving up");
        assert!(!parser.mid_event());
        assert_eq!(parser.offset(), 10 + 16 + 6 + 15);
        // Many short data lines without a blank line: the event's data is bounded too.
        let mut parser = SseParser::with_limit(64);
        for _ in 0..100 {
            parser.feed(b"data: 0123456789\n", &mut out);
        }
        assert!(parser.gave_up().is_some_and(|r| r.contains("event's data")));
    }

    #[test]
    fn invalid_utf8_is_flagged() {
        let frames = parse_all(&[b"data: {\"a\":\"\xff\"}\n\n", b"data: fine\n\n"]);
        assert!(frames[0].invalid_utf8);
        assert!(!frames[1].invalid_utf8);
    }

    #[test]
    fn unfinished_event_is_held() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.feed(b"data: {\"trunc", &mut out);
        assert!(out.is_empty());
        assert!(parser.mid_event());
    }

    #[test]
    fn encoded_events_parse_back_to_what_was_encoded() {
        let text = encode(
            Some("s1/0"),
            Some("message"),
            Some(500),
            "line one\nline two",
        ) + &encode(None, None, None, "");
        assert_eq!(
            text,
            "id: s1/0\nevent: message\nretry: 500\ndata: line one\ndata: line two\n\ndata:\n\n"
        );
        let mut frames = Vec::new();
        SseParser::new().feed(text.as_bytes(), &mut frames);
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[0].id.as_deref(), Some("s1/0"));
        assert_eq!(frames[0].event.as_deref(), Some("message"));
        assert_eq!(&*frames[0].data, "line one\nline two");
        assert_eq!(&*frames[1].data, "");
    }
}
