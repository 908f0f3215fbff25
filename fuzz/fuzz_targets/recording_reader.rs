//! The recording reader on arbitrary files: a clear error or a recording, never a panic; what
//! it reads folds into the model without panicking either.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::model::Model;
use mcpscope_engine::record::read_from;

fuzz_target!(|data: &[u8]| {
    if let Ok(recording) = read_from(data, Path::new("fuzz.jsonl")) {
        let _ = Model::from_events(&recording.events);
    }
});
