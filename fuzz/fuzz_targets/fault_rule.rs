//! The fault-rule grammar on arbitrary text: a rule or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::fault::spec::{parse_live, parse_rule};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_rule(text);
    let _ = parse_live(text);
});
