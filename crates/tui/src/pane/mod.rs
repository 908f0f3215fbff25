//! Each pane's own state, apart from its drawing (`view/`): what it shows, where it is
//! scrolled, and what settles in the layout pass.

pub(crate) mod calls;
pub(crate) mod detail;
pub(crate) mod tree;
pub(crate) mod waterfall;

pub use calls::CallsPane;
pub use detail::DetailPane;
pub use tree::TreePane;
pub use waterfall::WaterfallPane;
