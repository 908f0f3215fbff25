//! The recording reader on arbitrary files: a clear error or a recording, never a panic; what
//! it reads folds into the model without panicking either, and writes and reads back in the
//! current format as exactly the same events.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::event::FORMAT_VERSION;
use mcpscope_engine::model::Model;
use mcpscope_engine::record::line::{Decoder, Encoder};
use mcpscope_engine::record::read_from;

fuzz_target!(|data: &[u8]| {
    if let Ok(recording) = read_from(data, Path::new("fuzz.jsonl")) {
        let _ = Model::from_events(&recording.events);
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(FORMAT_VERSION);
        let mut line = Vec::new();
        for event in &recording.events {
            line.clear();
            encoder
                .encode(event, &mut line)
                .expect("every event read can be written");
            let back = decoder
                .decode(&line)
                .expect("every line written can be read");
            assert_eq!(&back, event, "{}", String::from_utf8_lossy(&line));
        }
    }
});
