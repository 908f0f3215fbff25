//! What became of a stream: the one answer the call table, the tree, the waterfall, the detail
//! pane and the replay cursor's death list all show.

use super::{End, Model, Stream, Verdict};
use crate::event::EndHow;

/// The fate of one exchange's response stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate<'a> {
    /// The response is still flowing (or has not started).
    Open,
    /// The upstream could not be reached: the error.
    Unreachable(&'a str),
    /// It ended, and nothing was lost with it: a clean end that orphaned no call.
    Closed(&'a End),
    /// It died: it ended abnormally (reset, error, cancelled), or it ended while a call it owned
    /// was still waiting for its response (orphaned, or left waiting for a resumption).
    Died(&'a End),
}

impl Fate<'_> {
    /// Whether the stream died or was never reached.
    pub fn is_death(&self) -> bool {
        matches!(self, Self::Died(_) | Self::Unreachable(_))
    }

    /// The word screens show: `open`, `unreachable`, `closed` or `died`.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Unreachable(_) => "unreachable",
            Self::Closed(_) => "closed",
            Self::Died(_) => "died",
        }
    }

    /// How it ended, if it did.
    pub fn end(&self) -> Option<&End> {
        match self {
            Self::Closed(end) | Self::Died(end) => Some(end),
            Self::Open | Self::Unreachable(_) => None,
        }
    }
}

impl Model {
    /// What became of `stream`.
    pub fn fate<'a>(&self, stream: &'a Stream) -> Fate<'a> {
        if let Some(err) = &stream.unreachable {
            return Fate::Unreachable(err);
        }
        let Some(end) = &stream.ended else {
            return Fate::Open;
        };
        let lost_a_call = stream.calls.iter().any(|&c| {
            self.calls.get(c).is_some_and(|call| {
                matches!(
                    call.verdict,
                    Verdict::Orphaned { death, .. } | Verdict::Resumable { death, .. }
                        if death.stream == stream.id
                )
            })
        });
        if end.how != EndHow::Eof || lost_a_call {
            Fate::Died(end)
        } else {
            Fate::Closed(end)
        }
    }
}
