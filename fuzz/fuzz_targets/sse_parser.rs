//! The SSE parser on arbitrary bytes: never panics, and is byte-exact whatever the chunking:
//! the same frames, with the same fields and offsets, for one chunk and for the same bytes split
//! in two. The one permitted difference is deliberate: a CR that ends a chunk ends its event at
//! once (the event is reported without waiting for the next byte), so an event whose blank line
//! is a CRLF split across the chunks ends before the LF.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::wire::sse::SseParser;

fuzz_target!(|input: &[u8]| {
    let Some((&split, data)) = input.split_first() else {
        return;
    };
    let mut whole = SseParser::new();
    let mut expected = Vec::new();
    whole.feed(data, &mut expected);
    let at = usize::from(split).min(data.len());
    let mut parts = SseParser::new();
    let mut got = Vec::new();
    parts.feed(&data[..at], &mut got);
    parts.feed(&data[at..], &mut got);
    assert_eq!(expected.len(), got.len());
    for (whole, split) in expected.iter().zip(&got) {
        let same = |f: &mcpscope_engine::wire::sse::SseFrame| {
            (
                f.id.clone(),
                f.event.clone(),
                f.retry,
                f.data.clone(),
                f.has_data,
                f.start,
            )
        };
        assert_eq!(same(whole), same(split));
        let crlf_at_split = split.end == at as u64
            && data.get(at.wrapping_sub(1)) == Some(&b'\r')
            && data.get(at) == Some(&b'\n');
        if crlf_at_split {
            assert_eq!(whole.end, split.end + 1);
        } else {
            assert_eq!(whole.end, split.end);
        }
    }
    assert_eq!(whole.offset(), parts.offset());
    assert_eq!(whole.offset(), data.len() as u64);
    assert_eq!(whole.mid_event(), parts.mid_event());
});
