//! The DAG's shape as a run sees it: downstream tasks, conditions and switch branches,
//! and the pruning of the branches not taken.

use super::*;

impl WorkflowRuntime {
    /// Marks the edges from a branch task to the downstream tasks it did not choose, and
    /// prunes those whose every upstream edge is now pruned. Returns what may start.
    pub(super) fn prune_unchosen(&mut self, node: Node, chosen: &[String]) -> Vec<Node> {
        let mut freed = Vec::new();
        for d in self.downstream(node) {
            if chosen.contains(&self.def.tasks[d].name) {
                freed.push(d);
                continue;
            }
            self.pruned_upstream[d] += 1;
            if self.pruned_upstream[d] == self.in_degree(d) {
                freed.extend(self.prune(d));
            } else {
                freed.push(d);
            }
        }
        freed
    }

    pub(super) fn downstream(&self, node: Node) -> Vec<Node> {
        self.dag
            .neighbors_directed(NodeIndex::new(node), Direction::Outgoing)
            .map(|d| d.index())
            .collect()
    }

    pub(super) fn is_conditions(&self, node: Node) -> bool {
        self.def.tasks[node].conditions.is_some()
    }

    pub(super) fn feeds_conditions(&self, node: Node) -> bool {
        self.downstream(node)
            .into_iter()
            .any(|d| self.is_conditions(d))
    }

    /// The branch a conditions task takes: `success` when every upstream task passed.
    pub(super) fn conditions_branch(&self, node: Node) -> Option<Vec<String>> {
        let spec = self.def.tasks[node].conditions.as_ref()?;
        let all_passed = self.dag.neighbors_directed(NodeIndex::new(node), Direction::Incoming).all(|u| {
            matches!(self.slots[u.index()], Slot::OutOfScope)
                || matches!(self.slots[u.index()], Slot::Done { state, .. } if state.lets_downstream_run())
        });
        Some(if all_passed {
            spec.success.clone()
        } else {
            spec.failure.clone()
        })
    }

    pub(super) fn in_degree(&self, node: Node) -> usize {
        self.dag
            .neighbors_directed(NodeIndex::new(node), Direction::Incoming)
            .count()
    }

    /// Prunes `node` and, transitively, what depends only on pruned tasks. Returns the
    /// downstream tasks whose wait may be over.
    pub(super) fn prune(&mut self, node: Node) -> Vec<Node> {
        let mut freed = Vec::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if self.slots[n] != Slot::NotStarted {
                continue;
            }
            self.slots[n] = Slot::Pruned;
            self.settled_otherwise += 1;
            for d in self.downstream(n) {
                self.pruned_upstream[d] += 1;
                self.waiting_on[d] -= 1;
                if self.pruned_upstream[d] == self.in_degree(d) {
                    stack.push(d);
                } else {
                    freed.push(d);
                }
            }
        }
        freed
    }
}
