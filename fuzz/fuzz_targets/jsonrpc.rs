//! The JSON-RPC classifier on arbitrary bodies: parsing, batches, classification and the
//! canonical form never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::wire::jsonrpc::{canonical, classify, id_text, messages, parse_body};

fuzz_target!(|data: &[u8]| {
    let Ok(body) = parse_body(data) else {
        return;
    };
    for message in messages(&body) {
        let _ = classify(message);
        if let Some(id) = message.get("id") {
            let _ = id_text(id);
        }
        let _ = canonical(message);
    }
});
