//! The tree's own state: the widget's and the server level.

use std::cell::RefCell;

use tui_tree_widget::TreeState;

use crate::grouping::Grouping;
use crate::node::{EARLIER_MESSAGES, EARLIER_STREAMS, LATER_MESSAGES, LATER_STREAMS, Node};
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

    /// When the selection has landed on the count of streams or messages left out of the
    /// tree's window (keys faster than frames, a page moved past its edge), selects the stream
    /// or message just beyond the edge that count names instead, so that the next frame
    /// centres the window there and the walk goes on; whether it did.
    pub(crate) fn step_past_edge(&mut self) -> bool {
        let state = self.state.get_mut();
        let mut path = state.selected().to_vec();
        let beyond = match path.last() {
            Some(&Node::More(id, EARLIER_STREAMS | LATER_STREAMS)) => {
                Node::Stream(id as mcpscope_engine::event::StreamId)
            }
            Some(&Node::More(m, EARLIER_MESSAGES | LATER_MESSAGES)) => Node::Message(m),
            _ => return false,
        };
        path.pop();
        path.push(beyond);
        state.select(path)
    }

    /// After a jump to the last row: a count of later streams or messages there stands for the
    /// last of them, which is selected instead; whether it was.
    pub(crate) fn past_the_last_count(&mut self, model: &Model) -> bool {
        let state = self.state.get_mut();
        let mut path = state.selected().to_vec();
        let parent = path.len().checked_sub(2).and_then(|i| path.get(i)).copied();
        let last = match (path.last(), parent) {
            (Some(Node::More(_, LATER_STREAMS)), Some(Node::Session(si))) => model
                .sessions
                .get(si)
                .and_then(|s| s.streams.last())
                .map(|&id| Node::Stream(id)),
            (Some(Node::More(_, LATER_MESSAGES)), Some(Node::Stream(id))) => model
                .stream(id)
                .and_then(|s| s.messages.last())
                .map(|&m| Node::Message(m)),
            _ => None,
        };
        let Some(last) = last else {
            return false;
        };
        path.pop();
        path.push(last);
        state.select(path)
    }

    /// Brings the open and selected paths in line with the model's server level.
    pub(crate) fn sync(&mut self, model: &Model) {
        self.grouping.settle(model, self.state.get_mut());
    }
}
