//! A model checkpoint: what the index pass keeps, the saved index stores and a cursor starts
//! folding from.

use std::sync::Arc;

use mcpscope_engine::model::Model;

/// The model after the first `seq` events.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Events folded into it (a multiple of the index spacing).
    pub seq: u64,
    /// The model; shared, a cursor clones it to fold on.
    pub model: Arc<Model>,
}
