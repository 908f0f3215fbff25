//! Label values a peer cannot grow without limit: the first values of a label are kept as they
//! are (cut to a length), every later new one is folded into `other`.

use std::collections::HashSet;

/// What a label value past the cap becomes.
pub(crate) const OTHER: &str = "other";

/// The distinct values of one label, up to a cap.
#[derive(Debug)]
pub(crate) struct Capped {
    seen: HashSet<String>,
    cap: usize,
    max_len: usize,
}

impl Capped {
    /// At most `cap` distinct values, each cut to `max_len` bytes (at a character boundary).
    pub(crate) fn new(cap: usize, max_len: usize) -> Self {
        Self {
            seen: HashSet::new(),
            cap,
            max_len,
        }
    }

    /// The label value for `value`: itself (cut) while it is one of the first `cap` distinct
    /// values, else [`OTHER`].
    pub(crate) fn value(&mut self, value: &str) -> String {
        let mut end = value.len().min(self.max_len);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        let value = &value[..end];
        if self.seen.contains(value) {
            return value.to_owned();
        }
        if self.seen.len() >= self.cap {
            return OTHER.to_owned();
        }
        self.seen.insert(value.to_owned());
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_the_cap_fold_into_other_and_long_ones_are_cut() {
        let mut tools = Capped::new(2, 4);
        assert_eq!(tools.value("echo"), "echo");
        assert_eq!(tools.value("slowly"), "slow");
        assert_eq!(tools.value("peek"), OTHER);
        assert_eq!(tools.value("echo"), "echo");
        assert_eq!(tools.value("slow"), "slow");
        let mut cut = Capped::new(8, 3);
        assert_eq!(cut.value("héllo"), "hé");
    }
}
