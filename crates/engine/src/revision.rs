//! Protocol revisions and the one rule that depends on their order: from 2026-07-28 on, MCP has
//! no sessions, GET streams or resumption. Every crate asks [`is_sessionless`].

/// The first revision without sessions, GET streams or resumption.
pub const FIRST_SESSIONLESS: &str = "2026-07-28";

/// Whether `revision` is session-less: 2026-07-28 or any later revision, including revisions
/// not yet published (see [`at_least`]).
pub fn is_sessionless(revision: &str) -> bool {
    at_least(revision, FIRST_SESSIONLESS)
}

/// Whether `revision` is `first` or a later revision. Revisions are dates (`YYYY-MM-DD`) and
/// compare in order as text, so a revision published after this build still compares right;
/// anything not shaped like a date is not later than any revision.
pub fn at_least(revision: &str, first: &str) -> bool {
    is_dated(revision) && revision >= first
}

/// Whether `revision` has the shape of a revision: `YYYY-MM-DD`.
fn is_dated(revision: &str) -> bool {
    revision.len() == 10
        && revision.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_session_less_revision_and_later_ones_are_session_less() {
        assert!(is_sessionless("2026-07-28"));
        assert!(is_sessionless("2027-01-15"));
        assert!(is_sessionless("2027-03-01"));
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

    #[test]
    fn later_revisions_compare_as_later_and_what_is_not_a_revision_never_does() {
        assert!(at_least("2026-07-28", "2026-07-28"));
        assert!(at_least("2027-03-01", "2026-07-28"));
        assert!(!at_least("2025-11-25", "2026-07-28"));
        // As text "draft" sorts after every date; it is not a later revision.
        assert!(!at_least("draft", "2026-07-28"));
        assert!(!at_least(" 2027-03-01", "2026-07-28"));
    }
}
