//! The tree's own state: the widget's and the server level.

use std::cell::RefCell;

use tui_tree_widget::TreeState;

use crate::grouping::Grouping;
use crate::node::Node;
use mcpscope_engine::model::Model;

/// The tree's own state: tui-tree-widget's (open nodes, selection, scroll, the rows on screen)
/// and the server level. The widget settles its scroll and records its rows as it draws, so
/// its state sits in a cell that drawing, which otherwise only reads the app, may update.
#[derive(Debug, Default)]
pub struct TreePane {
    pub(crate) state: RefCell<TreeState<Node>>,
    /// The server level: whether it groups, and the servers already opened once.
    pub grouping: Grouping,
}

impl TreePane {
    /// The widget's state, to move the selection or open nodes.
    pub fn state_mut(&mut self) -> &mut TreeState<Node> {
        self.state.get_mut()
    }

    /// The selected node's path (empty when nothing is selected).
    pub fn selected(&self) -> Vec<Node> {
        self.state
            .try_borrow()
            .map(|s| s.selected().to_vec())
            .unwrap_or_default()
    }

    /// Whether the node at `path` is open.
    pub fn is_open(&self, path: &[Node]) -> bool {
        self.state
            .try_borrow()
            .is_ok_and(|s| s.opened().contains(path))
    }

    /// Brings the open and selected paths in line with the model's server level.
    pub(crate) fn sync(&mut self, model: &Model) {
        self.grouping.settle(model, self.state.get_mut());
    }
}
