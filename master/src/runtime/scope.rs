//! Which tasks a start from a task runs.

use super::Node;
use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use shoal_common::start::Scope;
use std::collections::HashSet;

/// The task itself plus, for `upstream`/`downstream`, everything reachable that way.
pub(super) fn nodes(dag: &DiGraph<Node, ()>, start: Node, scope: Scope) -> HashSet<Node> {
    let direction = match scope {
        Scope::Only => return HashSet::from([start]),
        Scope::Upstream => Direction::Incoming,
        Scope::Downstream => Direction::Outgoing,
    };
    let mut seen = HashSet::from([start]);
    let mut stack = vec![start];
    while let Some(n) = stack.pop() {
        for next in dag.neighbors_directed(NodeIndex::new(n), direction) {
            if seen.insert(next.index()) {
                stack.push(next.index());
            }
        }
    }
    seen
}
