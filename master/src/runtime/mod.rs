//! One workflow instance's run as a pure state machine.
//!
//! `apply(event)` returns the actions the caller must perform; it does no IO and reads no
//! clock (waits are actions; the caller's timers come back as `Ready` events). The caller
//! persists what was accepted, commits, and only then performs the actions (dispatch,
//! kill), so state is durable before it is acted on. Events for an old attempt or that
//! would move a task backwards are ignored, which makes late, duplicate and reordered
//! worker events harmless.

mod branch;
mod contract;
mod control;
mod do_while;
mod errors;
mod facts;
mod fanout;
mod params;
mod restore;
mod scope;

pub use contract::{Action, Event, Outcome};
pub use facts::{Expiry, Fact};
pub use restore::Recorded;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use shoal_common::definition::{ErrorAction, WorkflowDef};

use shoal_common::start::{Params, Scope};
use shoal_common::types::{FailureStrategy, TaskState, WorkflowState};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Index of a task in its definition's `tasks` list (and of its DAG node).
pub type Node = usize;

/// How a stored run is rebuilt; see [`WorkflowRuntime::restore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    Rerun,
    Failover,
}

/// An operator request the runtime refused, with the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    NotStarted,
    /// Not part of this run (start from a task): counts as passed, never runs.
    OutOfScope,
    /// On a branch a conditions or switch task did not choose: never runs, and what
    /// depends only on pruned tasks is pruned too.
    Pruned,
    Active {
        attempt: i32,
        state: TaskState,
    },
    Done {
        attempt: i32,
        state: TaskState,
    },
}

/// Progress order of an active attempt; an event may only move a task forward.
fn rank(state: TaskState) -> u8 {
    match state {
        TaskState::Delayed => 0,
        // Waiting for a task-group slot is being queued, one step earlier.
        TaskState::Submitted | TaskState::WaitingTaskGroup => 1,
        TaskState::Dispatched => 2,
        // A wait or callback task waits where a script task runs.
        TaskState::Running | TaskState::Waiting => 3,
        _ => 4,
    }
}

#[derive(Debug)]
pub struct WorkflowRuntime {
    def: Arc<WorkflowDef>,
    dag: DiGraph<Node, ()>,
    slots: Vec<Slot>,
    /// Output parameters each passed node hands downstream: what its upstream tasks
    /// handed it, overridden by its own outputs (so outputs flow along whole paths).
    outputs: Vec<Params>,
    /// Upstream tasks of each node that have not passed yet; zero means it may start.
    waiting_on: Vec<usize>,
    /// Upstream tasks of each node that were pruned; all of them means it is pruned too.
    pruned_upstream: Vec<usize>,
    /// Nodes pruned, or failed with a conditions task downstream to handle it.
    settled_otherwise: usize,
    /// Attempt number of each node's latest attempt (0: none yet).
    last_attempt: Vec<i32>,
    /// Retries each node may still use in this run.
    retries_left: Vec<u32>,
    /// The catch handler of each node that has one (`on_error: {action: catch, then}`).
    /// A handler waits on one more edge than it has, which only its catch releases.
    /// (This and the other maps by node hold only the few nodes they concern: a run
    /// active for hours costs its master a few vectors of its task count, not more.)
    handlers: HashMap<Node, Node>,
    /// What a fired catch hands its handler (`error.task`, `error.message`, ...).
    injected: HashMap<Node, Params>,
    /// A task's error handler threw: the run fails at once, whatever the strategy.
    thrown: bool,
    state: WorkflowState,
    /// A task failed for good: under strategy `end` nothing new starts.
    failed: bool,
    stop_requested: bool,
    /// The run exceeded the workflow's timeout under strategy `fail`.
    timed_out: bool,
    /// A terminate task ended the run in this state (once what ran has settled).
    terminated: Option<WorkflowState>,
    /// Why the run ended as it did, when a task said so (a terminate task's message).
    end_message: Option<String>,
    pause_requested: bool,
    /// Attempts in flight (delayed, queued, on a worker).
    active: usize,
    /// The foreach or do_while task of each node that is a child of one (children and
    /// iterations are appended as they come).
    parent: HashMap<Node, Node>,
    /// Each expanded foreach task's children.
    groups: HashMap<Node, fanout::Group>,
    /// Each running do_while task's latest iteration.
    loops: HashMap<Node, do_while::Loop>,
    /// A rerun's recorded child attempts, until their foreach or do_while task runs again.
    stash: HashMap<String, fanout::Stashed>,
    /// Nodes done in a state that lets downstream run, or out of scope.
    passed: usize,
}

impl WorkflowRuntime {
    /// A fresh run of a validated definition; with `from`, only the tasks of that scope.
    pub fn new(def: Arc<WorkflowDef>, from: Option<(&str, Scope)>) -> Result<Self, Refused> {
        let mut rt = Self::empty(def);
        rt.limit_to(from)?;
        Ok(rt)
    }

    /// For a start from a task: every task outside the scope that has not run is left
    /// out of the run (it counts as passed and never starts).
    pub fn limit_to(&mut self, from: Option<(&str, Scope)>) -> Result<(), Refused> {
        let Some((task, scope)) = from else {
            return Ok(());
        };
        let start = self.node_of(task)?;
        let keep = scope::nodes(&self.dag, start, scope);
        for node in 0..self.slots.len() {
            if !keep.contains(&node) && self.slots[node] == Slot::NotStarted {
                self.slots[node] = Slot::OutOfScope;
                self.mark_passed(node);
            }
        }
        Ok(())
    }

    /// The node of task `name`.
    fn node_of(&self, name: &str) -> Result<Node, Refused> {
        self.def
            .tasks
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                Refused(format!(
                    "task '{name}' is not part of workflow '{}'",
                    self.def.name
                ))
            })
    }

    /// Names of the tasks whose latest attempt failed, in definition order (for alerts).
    pub fn failed_tasks(&self) -> Vec<&str> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Done {
                        state: TaskState::Failure,
                        ..
                    }
                )
            })
            .map(|(node, _)| self.def.tasks[node].name.as_str())
            .collect()
    }

    /// Whether `node` failed with no attempt left to come (for task alerts).
    pub fn failed_for_good(&self, node: Node) -> bool {
        matches!(
            self.slots.get(node),
            Some(Slot::Done {
                state: TaskState::Failure,
                ..
            })
        )
    }

    /// Attempts still in flight (for the caller to adopt after a failover restore).
    pub fn in_flight(&self) -> Vec<(Node, i32, TaskState)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(node, s)| match s {
                Slot::Active { attempt, state } => Some((node, *attempt, *state)),
                _ => None,
            })
            .collect()
    }

    fn empty(def: Arc<WorkflowDef>) -> Self {
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
        let mut waiting_on: Vec<usize> = (0..n)
            .map(|i| {
                dag.neighbors_directed(NodeIndex::new(i), Direction::Incoming)
                    .count()
            })
            .collect();
        let retries_left = def.tasks.iter().map(|t| t.retry_count()).collect();
        let handlers: HashMap<Node, Node> = def
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(node, t)| match t.error_action() {
                Some((ErrorAction::Catch, Some(h))) => {
                    Some((node, def.tasks.iter().position(|d| d.name == h)?))
                }
                _ => None,
            })
            .collect();
        for h in handlers.values() {
            waiting_on[*h] += 1;
        }
        WorkflowRuntime {
            def,
            dag,
            slots: vec![Slot::NotStarted; n],
            outputs: vec![Params::new(); n],
            waiting_on,
            pruned_upstream: vec![0; n],
            settled_otherwise: 0,
            last_attempt: vec![0; n],
            retries_left,
            handlers,
            injected: HashMap::new(),
            thrown: false,
            state: WorkflowState::Running,
            failed: false,
            stop_requested: false,
            timed_out: false,
            terminated: None,
            end_message: None,
            pause_requested: false,
            active: 0,
            passed: 0,
            parent: HashMap::new(),
            groups: HashMap::new(),
            loops: HashMap::new(),
            stash: HashMap::new(),
        }
    }

    pub fn definition(&self) -> &Arc<WorkflowDef> {
        &self.def
    }

    pub fn state(&self) -> WorkflowState {
        self.state
    }

    /// Why the run ended as it did, when a task said so (a terminate task's message).
    pub fn end_message(&self) -> Option<&str> {
        self.end_message.as_deref()
    }

    fn mark_passed(&mut self, node: Node) {
        self.passed += 1;
        for d in self
            .dag
            .neighbors_directed(NodeIndex::new(node), Direction::Outgoing)
        {
            self.waiting_on[d.index()] -= 1;
        }
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
                // Terminated before a failover: what still ran is killed now.
                if self.terminated.is_some() {
                    out.actions.extend(self.kill_all());
                }
                let all: Vec<Node> = (0..self.slots.len()).collect();
                self.release(all, &mut out.actions);
                // Restored fan-outs go on where they were.
                let parents: Vec<Node> = self.groups.keys().copied().collect();
                for p in parents {
                    self.fill(p, &mut out.actions);
                    self.settle_group(p, &mut out.actions);
                }
                let loops: Vec<Node> = self.loops.keys().copied().collect();
                for p in loops {
                    self.loop_progress(p, &mut out.actions);
                }
                out
            }
            Event::LoopChecked {
                node,
                attempt,
                iteration,
                holds,
            } => self.loop_checked(node, attempt, iteration, holds),
            Event::Expanded {
                node,
                attempt,
                items,
            } => self.expand(node, attempt, &items),
            Event::Task {
                node,
                attempt,
                state,
                output,
            } => self.on_task(node, attempt, state, output, None),
            Event::Branched {
                node,
                attempt,
                chosen,
            } => {
                let output = Params::from([("branch".to_string(), chosen.join(","))]);
                self.on_task(node, attempt, TaskState::Success, output, Some(chosen))
            }
            Event::Ready { node, attempt } => {
                let mut out = Outcome::default();
                if self.slots.get(node)
                    == Some(&Slot::Active {
                        attempt,
                        state: TaskState::Delayed,
                    })
                {
                    out.accepted = true;
                    self.slots[node] = Slot::Active {
                        attempt,
                        state: TaskState::Submitted,
                    };
                    out.actions.push(Action::Enqueue { node, attempt });
                }
                out
            }
        }
    }

    fn active_attempts(&self) -> impl Iterator<Item = (Node, i32)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(node, s)| match s {
                Slot::Active { attempt, .. } => Some((node, *attempt)),
                _ => None,
            })
    }

    fn starting_blocked(&self) -> bool {
        self.stop_requested
            || self.pause_requested
            || self.terminated.is_some()
            || self.thrown
            || (self.failed && self.def.failure_strategy == FailureStrategy::End)
    }

    /// `chosen`: the branch a switch task picked (a conditions task picks its own here).
    fn on_task(
        &mut self,
        node: Node,
        attempt: i32,
        state: TaskState,
        output: Params,
        chosen: Option<Vec<String>>,
    ) -> Outcome {
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
        // A waiting attempt reached no worker: it can only be cancelled.
        if was == TaskState::Delayed && !matches!(state, TaskState::Killed | TaskState::Paused) {
            return Outcome::default();
        }
        let mut out = Outcome {
            accepted: true,
            was_running: matches!(was, TaskState::Running | TaskState::Waiting),
            actions: vec![],
        };
        if !state.is_terminal() {
            self.slots[node] = Slot::Active { attempt, state };
            return out;
        }
        self.slots[node] = Slot::Done { attempt, state };
        self.active -= 1;
        let parent = self.parent.get(&node).copied();
        let own = match parent {
            Some(_) => output.clone(),
            None => Params::new(),
        };
        let mut candidates = Vec::new();
        if state.lets_downstream_run() {
            let chosen = chosen
                .or_else(|| self.conditions_branch(node))
                .or_else(|| self.timeout_branch(node, &output));
            self.hand_on(node, output);
            self.mark_passed(node);
            match chosen {
                Some(chosen) => candidates = self.prune_unchosen(node, &chosen),
                None => candidates.extend(self.downstream(node)),
            }
            candidates.extend(self.drop_handler(node));
            if self.def.tasks[node].terminate.is_some() {
                out.actions.extend(self.terminate(node));
            }
            // Definition order, so equal-priority tasks are submitted as written.
            candidates.sort_unstable();
        } else if state == TaskState::Failure
            && self.retries_left[node] == 0
            && self.feeds_conditions(node)
        {
            // A conditions task downstream handles the failure: it is not the instance's.
            self.settled_otherwise += 1;
            for d in self.downstream(node) {
                if self.is_conditions(d) {
                    self.waiting_on[d] -= 1;
                    candidates.push(d);
                }
            }
        } else if state == TaskState::NeedFaultTolerance && !self.stop_requested {
            // Lost with its worker: a new attempt, not a retry (the task did not fail).
            self.begin_attempt(node, None, &mut out.actions);
        } else if state == TaskState::Failure
            && self.retries_left[node] > 0
            && !self.starting_blocked()
        {
            self.retries_left[node] -= 1;
            self.begin_attempt(node, self.def.tasks[node].retry_wait(), &mut out.actions);
        } else if state == TaskState::Failure && parent.is_some() {
            // A child's failure is its foreach task's to judge (see `settle_group`).
            self.settled_otherwise += 1;
        } else if state == TaskState::Failure
            && !self.starting_blocked()
            && let Some((action, _)) = self.def.tasks[node].error_action()
            && action != ErrorAction::Retry
        {
            candidates = self.handle_error(node, action, output, &mut out.actions);
            candidates.sort_unstable();
        } else if state == TaskState::Failure {
            let first_failure = !self.failed;
            self.failed = true;
            if first_failure && self.def.failure_strategy == FailureStrategy::End {
                out.actions.extend(self.kill_all());
            }
        }
        self.release(candidates, &mut out.actions);
        if let (Some(p), Slot::Done { .. }) = (parent, self.slots[node]) {
            match self.loops.contains_key(&p) {
                true => self.loop_progress(p, &mut out.actions),
                false => self.child_done(p, node, state, own, &mut out.actions),
            }
        }
        out
    }

    fn begin_attempt(&mut self, node: Node, delay: Option<Duration>, actions: &mut Vec<Action>) {
        let attempt = self.last_attempt[node] + 1;
        self.last_attempt[node] = attempt;
        let delay = delay.filter(|d| !d.is_zero());
        let state = if delay.is_some() {
            TaskState::Delayed
        } else {
            TaskState::Submitted
        };
        self.slots[node] = Slot::Active { attempt, state };
        self.active += 1;
        actions.push(Action::CreateTask {
            node,
            attempt,
            delay,
        });
    }

    /// Starts those of `candidates` whose upstream tasks all passed (skipping disabled
    /// ones and releasing what follows them), then finishes the instance when nothing is
    /// active any more.
    fn release(&mut self, mut candidates: Vec<Node>, actions: &mut Vec<Action>) {
        if !self.starting_blocked() {
            let mut i = 0;
            while i < candidates.len() {
                let node = candidates[i];
                i += 1;
                if self.slots[node] != Slot::NotStarted {
                    continue;
                }
                if self.waiting_on[node] != 0 {
                    continue;
                }
                if self.def.tasks[node].enabled {
                    self.begin_attempt(node, self.def.tasks[node].delay, actions);
                } else {
                    self.slots[node] = Slot::Done {
                        attempt: 0,
                        state: TaskState::Skipped,
                    };
                    self.hand_on(node, Params::new());
                    self.mark_passed(node);
                    actions.push(Action::Skip { node });
                    let unused = self.drop_handler(node);
                    candidates.extend(unused);
                    candidates.extend(
                        self.dag
                            .neighbors_directed(NodeIndex::new(node), Direction::Outgoing)
                            .map(|d| d.index()),
                    );
                }
            }
        }
        self.finish_if_settled(actions);
    }

    fn finish_if_settled(&mut self, actions: &mut Vec<Action>) {
        if self.active > 0 {
            return;
        }
        self.state = if let Some(state) = self.terminated {
            state
        } else if self.timed_out {
            WorkflowState::Failure
        } else if self.stop_requested {
            WorkflowState::Stopped
        } else if self.failed {
            WorkflowState::Failure
        } else if self.pause_requested {
            WorkflowState::Paused
        } else if self.passed + self.settled_otherwise == self.slots.len() {
            WorkflowState::Success
        } else {
            WorkflowState::Failure
        };
        actions.push(Action::Finish { state: self.state });
    }
}

#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests;
