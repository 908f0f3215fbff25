//! The redaction policy on arbitrary paths, URLs and bodies: never panics, and redacting twice
//! changes nothing more (a redacted value stays redacted).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpscope_engine::redact::Redactor;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let redactor = Redactor::new();
    let path = redactor.path(text).into_owned();
    assert_eq!(redactor.path(&path), path);
    let url = redactor.url(text);
    assert_eq!(redactor.url(&url), url);
    if let Some(body) = redactor.text(text) {
        assert_eq!(redactor.text(&body), None);
    }
});
