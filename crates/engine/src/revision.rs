//! Protocol revisions and the one rule that depends on their order: from 2026-07-28 on, MCP has
//! no sessions, GET streams or resumption. Every crate asks [`is_sessionless`].

/// The first revision without sessions, GET streams or resumption.
pub const FIRST_SESSIONLESS: &str = "2026-07-28";

/// Whether `revision` is session-less: 2026-07-28 or any later revision. Revisions are dates
/// (`YYYY-MM-DD`) and compare in order as text; anything not shaped like one is not session-less.
pub fn is_sessionless(revision: &str) -> bool {
    let dated = revision.len() == 10
        && revision.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    dated && revision >= FIRST_SESSIONLESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_session_less_revision_and_later_ones_are_session_less() {
        assert!(is_sessionless("2026-07-28"));
        assert!(is_sessionless("2027-01-15"));
        for older in [
            "2025-11-25",
            "2025-06-18",
            "2024-11-05",
            "draft",
            "",
            "2026-7-28",
        ] {
            assert!(!is_sessionless(older), "{older}");
        }
    }
}
