//! One workflow instance's run as a pure state machine.
//!
//! `apply(event)` returns the actions the caller must perform; it does no IO and reads no
//! clock (times arrive inside events). The caller persists what was accepted, commits,
//! and only then performs the actions (dispatch, kill), so state is durable before it is
//! acted on. Events for an old attempt or that would move a task backwards are ignored,
//! which makes late, duplicate and reordered worker events harmless.

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use shoal_common::definition::WorkflowDef;
use shoal_common::store::Params;
use shoal_common::types::{FailureStrategy, TaskState, WorkflowState};
use std::sync::Arc;

/// Index of a task in its definition's `tasks` list (and of its DAG node).
pub type Node = usize;

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The instance was claimed: release the root tasks.
    Start,
    /// A task attempt moved to `state` (dispatched, running or a terminal state).
    Task {
        node: Node,
        attempt: i32,
        state: TaskState,
        output: Params,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Record a new attempt of the task, then queue it for dispatch.
    CreateTask { node: Node, attempt: i32 },
    /// Kill (or cancel, if still queued) the active attempt of the task.
    KillTask { node: Node, attempt: i32 },
    /// The instance is over.
    Finish { state: WorkflowState },
}

/// Whether `apply` changed anything; ignored events are still acknowledged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    pub accepted: bool,
    /// Whether the task's attempt was seen running before this event (for timestamps).
    pub was_running: bool,
    pub actions: Vec<Action>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    NotStarted,
    Active { attempt: i32, state: TaskState },
    Done { attempt: i32, state: TaskState },
}

/// Progress order of an active attempt; an event may only move a task forward.
fn rank(state: TaskState) -> u8 {
    match state {
        TaskState::Submitted | TaskState::Delayed => 0,
        TaskState::Dispatched => 1,
        TaskState::Running => 2,
        _ => 3,
    }
}

pub struct WorkflowRuntime {
    def: Arc<WorkflowDef>,
    dag: DiGraph<Node, ()>,
    slots: Vec<Slot>,
    outputs: Vec<Params>,
    /// Upstream tasks of each node that have not passed yet; zero means it may start.
    waiting_on: Vec<usize>,
    state: WorkflowState,
    /// Set once a task failed under failure strategy `end`: nothing new starts.
    stopping: bool,
    /// Attempts in flight; the instance finishes when this drops to zero.
    active: usize,
    /// Tasks done in a state that lets downstream run; all of them means success.
    passed: usize,
}

impl WorkflowRuntime {
    /// Builds the DAG of a validated definition.
    pub fn new(def: Arc<WorkflowDef>) -> Self {
        let n = def.tasks.len();
        let mut dag = DiGraph::with_capacity(n, n);
        for i in 0..n {
            dag.add_node(i);
        }
        for (i, ups) in def.upstream_indices().into_iter().enumerate() {
            for u in ups {
                dag.add_edge(NodeIndex::new(u), NodeIndex::new(i), ());
            }
        }
        let waiting_on = (0..n)
            .map(|i| {
                dag.neighbors_directed(NodeIndex::new(i), Direction::Incoming)
                    .count()
            })
            .collect();
        WorkflowRuntime {
            def,
            waiting_on,
            dag,
            slots: vec![Slot::NotStarted; n],
            outputs: vec![Params::new(); n],
            state: WorkflowState::Running,
            stopping: false,
            active: 0,
            passed: 0,
        }
    }

    pub fn definition(&self) -> &Arc<WorkflowDef> {
        &self.def
    }

    pub fn state(&self) -> WorkflowState {
        self.state
    }

    pub fn apply(&mut self, event: Event) -> Outcome {
        if self.state.is_terminal() {
            return Outcome::default();
        }
        match event {
            Event::Start => {
                let mut out = Outcome {
                    accepted: true,
                    ..Outcome::default()
                };
                let roots: Vec<Node> = (0..self.slots.len()).collect();
                self.release(roots, &mut out.actions);
                out
            }
            Event::Task {
                node,
                attempt,
                state,
                output,
            } => self.on_task(node, attempt, state, output),
        }
    }

    fn on_task(&mut self, node: Node, attempt: i32, state: TaskState, output: Params) -> Outcome {
        let Some(Slot::Active {
            attempt: current,
            state: was,
        }) = self.slots.get(node).copied()
        else {
            return Outcome::default();
        };
        if attempt != current || rank(state) <= rank(was) {
            return Outcome::default();
        }
        let mut out = Outcome {
            accepted: true,
            was_running: was == TaskState::Running,
            actions: vec![],
        };
        if !state.is_terminal() {
            self.slots[node] = Slot::Active { attempt, state };
            return out;
        }
        self.slots[node] = Slot::Done { attempt, state };
        self.active -= 1;
        let mut candidates = Vec::new();
        if state.lets_downstream_run() {
            self.passed += 1;
            self.outputs[node] = output;
            for d in self
                .dag
                .neighbors_directed(NodeIndex::new(node), Direction::Outgoing)
            {
                self.waiting_on[d.index()] -= 1;
                candidates.push(d.index());
            }
            // Definition order, so equal-priority tasks are submitted as written.
            candidates.sort_unstable();
        } else if self.def.failure_strategy == FailureStrategy::End && !self.stopping {
            self.stopping = true;
            for (other, slot) in self.slots.iter().enumerate() {
                if let Slot::Active { attempt, .. } = slot {
                    out.actions.push(Action::KillTask {
                        node: other,
                        attempt: *attempt,
                    });
                }
            }
        }
        self.release(candidates, &mut out.actions);
        out
    }

    /// Starts those of `candidates` whose upstream tasks all let them run, then finishes
    /// the instance when nothing is active (so nothing more can start).
    fn release(&mut self, candidates: Vec<Node>, actions: &mut Vec<Action>) {
        if !self.stopping {
            for node in candidates {
                if self.slots[node] == Slot::NotStarted && self.waiting_on[node] == 0 {
                    self.slots[node] = Slot::Active {
                        attempt: 1,
                        state: TaskState::Submitted,
                    };
                    self.active += 1;
                    actions.push(Action::CreateTask { node, attempt: 1 });
                }
            }
        }
        if self.active > 0 {
            return;
        }
        let all_passed = self.passed == self.slots.len();
        self.state = if all_passed {
            WorkflowState::Success
        } else {
            WorkflowState::Failure
        };
        actions.push(Action::Finish { state: self.state });
    }

    /// Parameters a task sees, by precedence: start parameters > task local > upstream
    /// outputs > workflow global, plus built-ins.
    pub fn task_params(&self, node: Node, start: &Params, builtins: &Params) -> Params {
        let mut p = self.def.params.clone();
        for u in self
            .dag
            .neighbors_directed(NodeIndex::new(node), Direction::Incoming)
        {
            p.extend(
                self.outputs[u.index()]
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        p.extend(
            self.def.tasks[node]
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        p.extend(start.iter().map(|(k, v)| (k.clone(), v.clone())));
        p.extend(builtins.iter().map(|(k, v)| (k.clone(), v.clone())));
        p
    }
}

#[cfg(test)]
mod tests;
