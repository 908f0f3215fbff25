//! An incremental, byte-exact Server-Sent Events tap.
//!
//! Fed the response body chunk by chunk as it passes through (it never holds the body back),
//! it reports each complete event with its fields and the byte offsets it spans. Lines may end in
//! LF, CR or CRLF, including a CRLF split across two chunks; comment lines (keep-alives) are not
//! events; a block with an `id` and no `data` (a priming event) is reported as an event.

/// One complete SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseFrame {
    /// `id:` field, if present.
    pub id: Option<String>,
    /// `event:` field, if present.
    pub event: Option<String>,
    /// `retry:` field, if present and numeric.
    pub retry: Option<u64>,
    /// The `data:` lines joined by LF.
    pub data: String,
    /// Whether any `data:` line was present.
    pub has_data: bool,
    /// Offset of the event's first byte.
    pub start: u64,
    /// Offset one past its terminating blank line.
    pub end: u64,
}

/// The incremental parser.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    line_start: u64,
    offset: u64,
    after_cr: bool,
    bom_checked: bool,
    block_start: Option<u64>,
    has_field: bool,
    current: SseFrame,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Total bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether bytes of an unfinished event are held (a stream ending now truncates an event).
    pub fn mid_event(&self) -> bool {
        !self.line.is_empty() || self.has_field
    }

    /// Feeds the next chunk; complete events are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseFrame>) {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
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
            if self.after_cr {
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    self.offset += 1;
                    self.line_start = self.offset;
                    chunk = &chunk[1..];
                    continue;
                }
            }
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(pos) => {
                    self.line.extend_from_slice(&chunk[..pos]);
                    let terminator = chunk[pos];
                    self.offset += pos as u64 + 1;
                    chunk = &chunk[pos + 1..];
                    if terminator == b'\r' {
                        self.after_cr = true;
                    }
                    let line = std::mem::take(&mut self.line);
                    let start = self.line_start;
                    self.line_start = self.offset;
                    self.process_line(&line, start, out);
                    self.line = line;
                    self.line.clear();
                    if self.after_cr && chunk.first() == Some(&b'\n') {
                        self.after_cr = false;
                        self.offset += 1;
                        self.line_start = self.offset;
                        chunk = &chunk[1..];
                        self.patch_last_end(out);
                    }
                }
                None => {
                    self.line.extend_from_slice(chunk);
                    self.offset += chunk.len() as u64;
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
                frame.start = self.block_start.unwrap_or(start);
                frame.end = self.offset;
                out.push(frame);
            }
            self.current = SseFrame::default();
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
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => {
                if self.current.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(&value);
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
        assert_eq!(f.data, "{\"a\":1}");
        assert_eq!(f.start, 8);
        assert_eq!(f.end, body.len() as u64);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_line_end() {
        let body: &[u8] = b"data: x\r\n\r\ndata: y\r\n\r\n";
        for split in 0..body.len() {
            let frames = parse_all(&[&body[..split], &body[split..]]);
            let data: Vec<&str> = frames.iter().map(|f| f.data.as_str()).collect();
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
        assert_eq!(whole[0].data, "");
        assert_eq!(whole[1].data, "a\nb");
    }

    #[test]
    fn priming_event_without_data_is_reported() {
        let frames = parse_all(&[b"id: 0\n\n"]);
        assert_eq!(frames.len(), 1);
        assert!(!frames[0].has_data);
    }

    #[test]
    fn unfinished_event_is_held() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.feed(b"data: {\"trunc", &mut out);
        assert!(out.is_empty());
        assert!(parser.mid_event());
    }
}
