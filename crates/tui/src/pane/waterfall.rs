//! The waterfall's own state.

/// The waterfall's own state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaterfallPane {
    /// The highlighted stream (position in `Model::streams`); the window scrolls with it.
    pub stream: usize,
}
