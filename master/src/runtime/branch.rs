//! The DAG's shape as a run sees it: downstream tasks, conditions and switch branches,
//! and the pruning of the branches not taken.

use super::{Node, Slot, WorkflowRuntime};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use shoal_common::definition::{OnTimeout, TIMED_OUT};
use shoal_common::start::Params;

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

    /// The branch a conditions task without `when` takes: `success` when every upstream
    /// task passed (with `when`, the caller decides and says so by `Event::Branched`).
    pub(super) fn conditions_branch(&self, node: Node) -> Option<Vec<String>> {
        let spec = self.def.tasks[node].conditions.as_ref()?;
        if spec.when.is_some() {
            return None;
        }
        Some(if self.upstream_passed(node) {
            spec.success.clone()
        } else {
            spec.failure.clone()
        })
    }

    /// Whether every upstream task of `node` passed (or is out of the run's scope).
    pub fn upstream_passed(&self, node: Node) -> bool {
        self.dag.neighbors_directed(NodeIndex::new(node), Direction::Incoming).all(|u| {
            matches!(self.slots[u.index()], Slot::OutOfScope)
                || matches!(self.slots[u.index()], Slot::Done { state, .. } if state.lets_downstream_run())
        })
    }

    /// The branch a wait or callback task with `on_timeout: <task>` takes: that task
    /// alone when it timed out (its output says so), every other downstream task when
    /// it completed in time.
    pub(super) fn timeout_branch(&self, node: Node, output: &Params) -> Option<Vec<String>> {
        let OnTimeout::Run(target) = self.def.tasks[node].on_timeout() else {
            return None;
        };
        if output.get(TIMED_OUT).is_some_and(|v| v == "true") {
            return Some(vec![target.to_string()]);
        }
        let others = self.downstream(node).into_iter();
        let names = others.map(|d| self.def.tasks[d].name.clone());
        Some(names.filter(|n| n != target).collect())
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
            // A task that never runs never fails: its catch handler is pruned too.
            stack.extend(self.handlers.get(&n).copied());
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
