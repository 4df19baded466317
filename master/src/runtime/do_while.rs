//! A do_while task's loop. Each iteration appends a copy of the body to the run (named
//! `poll[2].check`), after everything else so every other index stays put; the first
//! tasks of an iteration depend on every task of the one before, so outputs flow from
//! one iteration to the next and a restore orders them. When an iteration has passed, the
//! caller evaluates the condition (`Action::CheckLoop`) and answers with
//! `Event::LoopChecked`: another iteration, or the end of the task. A failed iteration
//! fails the task (its own `on_error` decides what follows).

use super::{Action, Node, Outcome, Recorded, Slot, WorkflowRuntime};
use petgraph::graph::NodeIndex;
use shoal_common::definition::{ITERATIONS, iteration_name};
use shoal_common::start::Params;
use shoal_common::types::TaskState;
use std::sync::Arc;

/// The iteration of one do_while task that runs or ran last.
#[derive(Debug)]
pub(super) struct Loop {
    /// From 1.
    iteration: u32,
    /// Its tasks: nodes `first..first + len`.
    first: Node,
    len: usize,
    /// The condition was asked for after this iteration and not answered yet.
    asked: bool,
}

impl WorkflowRuntime {
    /// `Event::LoopChecked`: after `iteration` (0: before the first) the condition held
    /// or not, or could not be evaluated.
    pub(super) fn loop_checked(
        &mut self,
        node: Node,
        attempt: i32,
        iteration: u32,
        holds: Result<bool, String>,
    ) -> Outcome {
        let current = self.loops.get(&node).map_or(0, |l| l.iteration);
        let active = matches!(self.slots.get(node), Some(Slot::Active { attempt: a, state })
            if *a == attempt && !state.is_terminal());
        let Some(max) = self.def.tasks[node]
            .do_while
            .as_ref()
            .map(|s| s.max_iterations)
        else {
            return Outcome::default();
        };
        if !active || current != iteration || (iteration > 0 && !self.iteration_passed(node)) {
            return Outcome::default();
        }
        let mut out = Outcome {
            accepted: true,
            ..Outcome::default()
        };
        let actions = &mut out.actions;
        match holds {
            Err(message) => self.end_loop(node, TaskState::Failure, message, actions),
            Ok(false) => {
                let message = format!("{iteration} iterations; the condition no longer holds");
                self.end_loop(node, TaskState::Success, message, actions);
            }
            Ok(true) if iteration >= max => {
                let message =
                    format!("reached max_iterations ({max}) with the condition still true");
                self.end_loop(node, TaskState::Failure, message, actions);
            }
            Ok(true) if self.starting_blocked() => self.end_blocked(node, actions),
            Ok(true) => {
                self.slots[node] = Slot::Active {
                    attempt,
                    state: TaskState::Running,
                };
                let next = iteration + 1;
                let (first, len) = self.append_iteration(node, next);
                actions.push(Action::Progress {
                    node,
                    message: format!("iteration {next} (at most {max})"),
                });
                self.release((first..first + len).collect(), actions);
            }
        }
        out
    }

    /// Appends the tasks of iteration `k` of do_while `node`; returns their nodes.
    fn append_iteration(&mut self, node: Node, k: u32) -> (Node, usize) {
        let parent = &self.def.tasks[node];
        let Some(spec) = &parent.do_while else {
            return (self.slots.len(), 0);
        };
        let tasks = spec.iteration(&parent.name, k);
        let body: Vec<Vec<usize>> = spec
            .tasks
            .iter()
            .map(|t| {
                (t.depends_on.iter())
                    .filter_map(|d| spec.tasks.iter().position(|b| &b.name == d))
                    .collect()
            })
            .collect();
        let first = self.slots.len();
        let before = self.loops.get(&node).map(|l| l.first..l.first + l.len);
        for (i, task) in tasks.iter().enumerate() {
            let c = self.dag.add_node(first + i).index();
            self.slots.push(Slot::NotStarted);
            self.outputs.push(Params::new());
            self.pruned_upstream.push(0);
            self.retries_left.push(task.retry_count());
            self.parent.insert(first + i, node);
            // A rerun's earlier attempts of this name: number on from them.
            let last = self.stash.remove(&task.name).map_or(0, |s| s.attempt);
            self.last_attempt.push(last);
            let ups: Vec<Node> = match body[i].as_slice() {
                [] => before.clone().map(Iterator::collect).unwrap_or_default(),
                within => within.iter().map(|j| first + j).collect(),
            };
            for u in &ups {
                self.dag.add_edge(NodeIndex::new(*u), NodeIndex::new(c), ());
            }
            let waiting = ups
                .iter()
                .filter(|&&u| !matches!(self.slots[u], Slot::Done { state, .. } if self.passes(u, state)))
                .count();
            self.waiting_on.push(waiting);
        }
        let len = tasks.len();
        Arc::make_mut(&mut self.def).tasks.extend(tasks);
        let looping = Loop {
            iteration: k,
            first,
            len,
            asked: false,
        };
        self.loops.insert(node, looping);
        (first, len)
    }

    /// A restore: the iterations a running do_while task had begun are appended again
    /// (so the attempts recorded for them are found).
    pub(super) fn restore_iterations(&mut self, attempts: &[Recorded<'_>]) {
        let loops: Vec<(Node, String)> = (self.def.tasks.iter().enumerate())
            .filter(|(_, t)| t.do_while.is_some())
            .map(|(i, t)| (i, t.name.clone()))
            .collect();
        for (node, name) in loops {
            let mut latest: Option<&Recorded> = None;
            let mut begun = 0;
            for row in attempts {
                if row.name == name {
                    latest = latest.filter(|l| l.attempt > row.attempt).or(Some(row));
                } else if let Some(k) = iteration_of(&name, row.name) {
                    begun = begun.max(k);
                }
            }
            if latest.is_some_and(|row| !row.state.is_terminal()) {
                for k in 1..=begun {
                    self.append_iteration(node, k);
                }
            }
        }
    }

    /// What the tasks of the loop's latest iteration hand on, by their body names (what
    /// its condition calls `outputs.<task>`).
    pub fn iteration_outputs(&self, node: Node) -> Vec<(&str, &Params)> {
        let Some(l) = self.loops.get(&node) else {
            return vec![];
        };
        let Some(spec) = &self.def.tasks[node].do_while else {
            return vec![];
        };
        (spec.tasks.iter().zip(l.first..l.first + l.len))
            .filter(|(_, c)| matches!(self.slots[*c], Slot::Done { state, .. } if self.passes(*c, state)))
            .map(|(t, c)| (t.name.as_str(), &self.outputs[c]))
            .collect()
    }

    /// After a task of the loop's iteration settled (or a restore): once nothing of the
    /// iteration runs, ask for the condition if it passed, or end the task if it did not.
    pub(super) fn loop_progress(&mut self, node: Node, actions: &mut Vec<Action>) {
        let Some(l) = self.loops.get(&node) else {
            return;
        };
        let (mut failed, mut passed) = (None, true);
        for c in l.first..l.first + l.len {
            match self.slots[c] {
                Slot::Active { .. } => return,
                Slot::Done { state, .. } if self.passes(c, state) => {}
                Slot::Done { state, .. } => {
                    failed.get_or_insert((c, state));
                }
                _ => passed = false,
            }
        }
        let Slot::Active { attempt, .. } = self.slots[node] else {
            return;
        };
        let iteration = l.iteration;
        if let Some((c, state)) = failed {
            let message = format!(
                "iteration {iteration}: task '{}' ended {state}",
                self.def.tasks[c].name
            );
            self.end_loop(node, TaskState::Failure, message, actions);
        } else if passed {
            let l = self.loops.get_mut(&node).expect("looked up above");
            if !l.asked {
                l.asked = true;
                actions.push(Action::CheckLoop {
                    node,
                    attempt,
                    iteration,
                });
            }
        } else if self.starting_blocked() {
            self.end_blocked(node, actions);
        }
    }

    /// Whether every task of the loop's latest iteration has passed.
    fn iteration_passed(&self, node: Node) -> bool {
        self.loops.get(&node).is_some_and(|l| {
            (l.first..l.first + l.len)
                .all(|c| matches!(self.slots[c], Slot::Done { state, .. } if self.passes(c, state)))
        })
    }

    /// A stop or pause came between iterations: the task ends as its tasks did.
    fn end_blocked(&mut self, node: Node, actions: &mut Vec<Action>) {
        let (state, word) = match self.pause_requested {
            true => (TaskState::Paused, "paused"),
            false => (TaskState::Killed, "stopped"),
        };
        let done = self.loops.get(&node).map_or(0, |l| l.iteration);
        let message = format!("{word} after iteration {done}");
        self.end_loop(node, state, message, actions);
    }

    /// Ends the do_while task, handing on its latest iteration's outputs and how many
    /// iterations ran.
    fn end_loop(
        &mut self,
        node: Node,
        state: TaskState,
        message: String,
        actions: &mut Vec<Action>,
    ) {
        let Slot::Active { attempt, .. } = self.slots[node] else {
            return;
        };
        let mut output = Params::new();
        for (_, outs) in self.iteration_outputs(node) {
            output.extend(outs.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let ran = self.loops.get(&node).map_or(0, |l| l.iteration);
        output.insert(ITERATIONS.to_string(), ran.to_string());
        actions.push(Action::Settled {
            node,
            state,
            output: output.clone(),
            message,
        });
        let out = self.on_task(node, attempt, state, output, None);
        actions.extend(out.actions);
    }
}

/// The iteration a recorded task name belongs to in loop `parent` (`poll[2].check` → 2).
fn iteration_of(parent: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix(parent)?.strip_prefix('[')?;
    let (k, task) = rest.split_once("].")?;
    let k = k.parse().ok()?;
    (iteration_name(parent, k, task) == name).then_some(k)
}

#[cfg(test)]
mod tests;
