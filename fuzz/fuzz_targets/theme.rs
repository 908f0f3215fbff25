//! The theme loader on arbitrary files: a theme or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpscope_tui::theme::Theme;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Theme::from_toml("fuzz.toml", text);
});
