//! Per-task error handlers (`on_error`): a failure whose retries are spent is ignored
//! (the task counts as passed), caught (its handler task runs instead of what follows
//! it), or thrown (the run fails at once).

use super::{Action, Node, WorkflowRuntime};
use shoal_common::definition::{ERROR_TASK, ErrorAction};
use shoal_common::start::Params;
use shoal_common::types::TaskState;

impl WorkflowRuntime {
    /// Applies the error handler of `node`, which failed for good; returns what may start.
    pub(super) fn handle_error(
        &mut self,
        node: Node,
        action: ErrorAction,
        output: Params,
        actions: &mut Vec<Action>,
    ) -> Vec<Node> {
        match action {
            ErrorAction::Retry => vec![],
            ErrorAction::Ignore => {
                self.hand_on(node, output);
                self.mark_passed(node);
                let mut freed = self.downstream(node);
                freed.extend(self.drop_handler(node));
                freed
            }
            ErrorAction::Catch => self.catch(node, output),
            ErrorAction::Throw => {
                self.failed = true;
                self.thrown = true;
                actions.extend(self.kill_all());
                vec![]
            }
        }
    }

    /// A caught failure: what follows the task never runs (like a branch not taken), and
    /// its handler may start, seeing the failure as `${error.task}`, `${error.message}`
    /// and `${error.exit_code}` (from `output`).
    pub(super) fn catch(&mut self, node: Node, mut output: Params) -> Vec<Node> {
        self.settled_otherwise += 1;
        for d in self.downstream(node) {
            self.waiting_on[d] -= 1;
        }
        let mut freed = self.prune_unchosen(node, &[]);
        if let Some(&h) = self.handlers.get(&node) {
            self.waiting_on[h] -= 1;
            output.insert(ERROR_TASK.to_string(), self.def.tasks[node].name.clone());
            self.injected.insert(h, output);
            freed.push(h);
        }
        freed
    }

    /// `node` passed (or will never run): its catch handler never runs either.
    pub(super) fn drop_handler(&mut self, node: Node) -> Vec<Node> {
        match self.handlers.get(&node).copied() {
            Some(h) => self.prune(h),
            None => vec![],
        }
    }

    /// Whether an attempt that ended in `state` lets what follows it run: it passed, or
    /// it failed and its error handler ignores that.
    pub(super) fn passes(&self, node: Node, state: TaskState) -> bool {
        state.lets_downstream_run()
            || (state == TaskState::Failure
                && matches!(
                    self.def.tasks[node].error_action(),
                    Some((ErrorAction::Ignore, _))
                ))
    }

    /// Whether a failure of `node` is caught by a handler task.
    pub(super) fn caught(&self, node: Node, state: TaskState) -> bool {
        state == TaskState::Failure && self.handlers.contains_key(&node)
    }
}
