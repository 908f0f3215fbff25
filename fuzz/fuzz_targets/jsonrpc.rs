//! The JSON-RPC classifier on arbitrary bodies: parsing, batches, classification and the
//! canonical form never panic; a text parses as its bytes do; a message takes its text as it
//! is only when that is the text it writes out as.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::model::Body;
use mcpscope_engine::wire::jsonrpc::{
    canonical, classify, id_text, messages, parse_body, parse_text,
};

fuzz_target!(|data: &[u8]| {
    let parsed = parse_body(data);
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(parse_text(text), parsed);
        if let Ok(body) = &parsed {
            assert_eq!(Body::of(body, &text.into()), Body::new(body));
        }
    }
    let Ok(body) = parsed else {
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
