//! The tree's server level. With more than one server seen (a forward proxy in front of a host
//! that uses several), sessions sit under a node per server; with one, sessions are the top
//! level as before. The paths of opened and selected nodes follow when the tree starts or stops
//! grouping, and a server is shown open the first time it is seen.

use std::collections::HashSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use mcpscope_engine::model::Model;
use tui_tree_widget::TreeState;

use crate::node::Node;

/// Servers remembered as already seen (and so opened once) before the memory starts over.
const SEEN_LIMIT: usize = 4_096;

/// The tree node of the server `origin` (`None`: sessions whose server is unknown). Its key is a
/// hash of the origin, so it stays the same while sessions come and go.
pub fn server_node(origin: Option<&str>) -> Node {
    let mut hasher = DefaultHasher::new();
    origin.hash(&mut hasher);
    Node::Server(hasher.finish())
}

/// Whether the tree groups sessions by server: more than one server is seen.
pub(crate) fn grouped(model: &Model) -> bool {
    model.servers().len() > 1
}

/// The origin a server node stands for (`Some(None)`: the unknown server), if any session of
/// the model belongs to it.
pub(crate) fn server_of(model: &Model, node: Node) -> Option<Option<&str>> {
    model
        .sessions
        .iter()
        .map(|s| s.origin.as_deref())
        .find(|&origin| server_node(origin) == node)
}

/// The tree path of session `session`: under its server's node when the tree groups.
pub(crate) fn session_path(model: &Model, session: usize) -> Vec<Node> {
    prefixed(model, session, grouped(model))
}

fn prefixed(model: &Model, session: usize, grouped: bool) -> Vec<Node> {
    let origin = model
        .sessions
        .get(session)
        .and_then(|s| s.origin.as_deref());
    if grouped {
        vec![server_node(origin), Node::Session(session)]
    } else {
        vec![Node::Session(session)]
    }
}

/// What the tree's state needs to follow the server level.
#[derive(Debug, Default)]
pub struct Grouping {
    grouped: bool,
    seen: HashSet<Node>,
}

impl Grouping {
    /// Brings `tree` in line with `model`: re-roots its opened and selected paths when grouping
    /// starts or stops, and opens each server seen for the first time.
    pub fn settle(&mut self, model: &Model, tree: &mut TreeState<Node>) {
        let grouped = grouped(model);
        if grouped != self.grouped {
            self.grouped = grouped;
            let opened: Vec<Vec<Node>> = tree.opened().iter().cloned().collect();
            let selected = tree.selected().to_vec();
            tree.close_all();
            for path in opened {
                if let Some(path) = reroot(model, &path, grouped) {
                    tree.open(path);
                }
            }
            match reroot(model, &selected, grouped) {
                Some(path) => tree.select(path),
                None => tree.select(Vec::new()),
            };
        }
        if !grouped {
            return;
        }
        if self.seen.len() > SEEN_LIMIT {
            self.seen.clear();
        }
        for session in model.sessions.iter().filter(|s| !s.streams.is_empty()) {
            let node = server_node(session.origin.as_deref());
            if self.seen.insert(node) {
                tree.open(vec![node]);
            }
        }
    }
}

/// `path` without its server node, then under its session's server when `grouped`. A path made
/// of a server alone has no place in an ungrouped tree.
fn reroot(model: &Model, path: &[Node], grouped: bool) -> Option<Vec<Node>> {
    let rest: &[Node] = match path.first() {
        Some(Node::Server(_)) => &path[1..],
        _ => path,
    };
    let Some(&Node::Session(session)) = rest.first() else {
        return None;
    };
    let mut out = prefixed(model, session, grouped);
    out.extend_from_slice(&rest[1..]);
    Some(out)
}
