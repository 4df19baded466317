//! A foreach task's fan-out. When the task starts, the engine reads its list and the run
//! grows one node per element, appended after the definition's tasks so every other index
//! stays put. A child waits on one edge nothing releases, so only its group starts it, at
//! most `max_parallel` at once and in order. Once every child has settled (or nothing
//! more may start) the foreach task ends: `success` when all passed, `failure` when one
//! failed for good (its error handler decides what follows), and it hands on the
//! children's outputs joined in order (`results`).

use super::{Action, Node, Outcome, Recorded, Slot, WorkflowRuntime};
use shoal_common::definition::{ForeachSpec, ITEMS, RESULTS, TaskDef, child_name};
use shoal_common::start::Params;
use shoal_common::types::TaskState;
use std::collections::HashMap;
use std::sync::Arc;

/// The children of one foreach task: nodes `first..first + len`.
#[derive(Debug)]
pub(super) struct Group {
    first: Node,
    len: usize,
    /// Children taken in order so far (started, or found passed by a restore).
    next: usize,
    running: usize,
    max_parallel: usize,
    passed: usize,
    failed: Vec<Node>,
    /// Each passed child's own outputs, by element.
    results: Vec<Option<Params>>,
}

/// A child's recorded attempt, kept by a rerun until its foreach task expands again.
#[derive(Debug)]
pub(super) struct Stashed {
    pub(super) attempt: i32,
    state: TaskState,
    output: Params,
}

impl WorkflowRuntime {
    /// Whether the foreach task's current attempt may expand now (it has not yet).
    pub fn expandable(&self, node: Node, attempt: i32) -> bool {
        matches!(self.slots.get(node), Some(Slot::Active { attempt: a, state })
            if *a == attempt && !state.is_terminal())
            && !self.groups.contains_key(&node)
    }

    /// `Event::Expanded`: the list was read; the children start.
    pub(super) fn expand(
        &mut self,
        node: Node,
        attempt: i32,
        items: &[serde_json::Value],
    ) -> Outcome {
        if !self.expandable(node, attempt) {
            return Outcome::default();
        }
        self.append_children(node, items);
        self.slots[node] = Slot::Active {
            attempt,
            state: TaskState::Running,
        };
        self.take_stashed(node);
        let mut out = Outcome {
            accepted: true,
            ..Outcome::default()
        };
        self.fill(node, &mut out.actions);
        self.settle_group(node, &mut out.actions);
        out
    }

    /// Adds the children of foreach `node`, one per element, not yet started.
    fn append_children(&mut self, node: Node, items: &[serde_json::Value]) {
        let parent = self.def.tasks[node].clone();
        let Some(spec) = &parent.foreach else { return };
        let first = self.slots.len();
        let children: Vec<TaskDef> = items
            .iter()
            .enumerate()
            .map(|(i, item)| spec.child(&parent, i, item))
            .collect();
        for child in &children {
            let c = self.slots.len();
            self.dag.add_node(c);
            self.slots.push(Slot::NotStarted);
            self.outputs.push(Params::new());
            self.waiting_on.push(1);
            self.pruned_upstream.push(0);
            self.last_attempt.push(0);
            self.retries_left.push(child.retry_count());
            self.parent.insert(c, node);
        }
        Arc::make_mut(&mut self.def).tasks.extend(children);
        self.groups.insert(
            node,
            Group {
                first,
                len: items.len(),
                next: 0,
                running: 0,
                max_parallel: max_parallel(spec),
                passed: 0,
                failed: Vec::new(),
                results: vec![None; items.len()],
            },
        );
    }

    /// A restore: the children of a foreach task that was running expand again from the
    /// list it recorded (so the attempts in flight are found); a rerun keeps the other
    /// children's attempts until the task expands anew.
    pub(super) fn restore_children(&mut self, latest_of_parent: &[(Node, &Recorded<'_>)]) {
        for (node, row) in latest_of_parent {
            let items = row
                .output
                .get(ITEMS)
                .and_then(|text| serde_json::from_str::<Vec<serde_json::Value>>(text).ok());
            if let Some(items) = items
                && !row.state.is_terminal()
            {
                self.append_children(*node, &items);
            }
        }
    }

    /// Keeps a child's attempt (by a rerun) for when its foreach task expands again.
    pub(super) fn stash(&mut self, row: &Recorded<'_>) {
        let newer = self
            .stash
            .get(row.name)
            .is_none_or(|s| s.attempt <= row.attempt);
        if newer {
            let kept = Stashed {
                attempt: row.attempt,
                state: row.state,
                output: row.output.clone(),
            };
            self.stash.insert(row.name.to_string(), kept);
        }
    }

    /// The foreach or do_while task whose child a recorded name is (`each[3]` and
    /// `poll[2].check` → `each` and `poll`).
    pub(super) fn fanned_from(&self, name: &str) -> Option<Node> {
        let (parent, _) = name.split_once('[')?;
        self.def
            .tasks
            .iter()
            .position(|t| t.name == parent && (t.foreach.is_some() || t.do_while.is_some()))
    }

    /// After a restore: each group counts what its children's attempts say.
    pub(super) fn recount_groups(&mut self, own: &HashMap<Node, Params>) {
        let parents: Vec<Node> = self.groups.keys().copied().collect();
        for p in parents {
            let g = &self.groups[&p];
            let (first, len) = (g.first, g.len);
            let (mut running, mut passed, mut failed, mut next) = (0, 0, Vec::new(), len);
            let mut results = vec![None; len];
            for (i, c) in (first..first + len).enumerate() {
                match self.slots[c] {
                    Slot::Active { .. } => running += 1,
                    Slot::Done { state, .. } if self.passes(c, state) => {
                        passed += 1;
                        results[i] = own.get(&c).cloned();
                    }
                    Slot::Done {
                        state: TaskState::Failure,
                        ..
                    } => failed.push(c),
                    // Not started, or lost with its worker: `fill` starts it.
                    _ => next = next.min(i),
                }
            }
            let g = self.groups.get_mut(&p).expect("listed above");
            (g.running, g.passed, g.failed, g.next, g.results) =
                (running, passed, failed, next, results);
        }
    }

    /// A rerun's children that passed before stay passed; the others run again, their
    /// attempts numbered on from the last.
    fn take_stashed(&mut self, node: Node) {
        if self.stash.is_empty() {
            return;
        }
        let (first, len) = {
            let g = &self.groups[&node];
            (g.first, g.len)
        };
        let parent = self.def.tasks[node].name.clone();
        for i in 0..len {
            let Some(row) = self.stash.remove(&child_name(&parent, i)) else {
                continue;
            };
            let c = first + i;
            self.last_attempt[c] = row.attempt;
            if self.passes(c, row.state) {
                self.slots[c] = Slot::Done {
                    attempt: row.attempt,
                    state: row.state,
                };
                self.mark_passed(c);
                self.hand_on(c, row.output.clone());
                let g = self.groups.get_mut(&node).expect("expanded above");
                g.passed += 1;
                g.results[i] = Some(row.output);
            }
        }
    }

    /// Starts children in order while the group has room and starting is allowed.
    pub(super) fn fill(&mut self, node: Node, actions: &mut Vec<Action>) {
        while !self.starting_blocked() {
            let Some(g) = self.groups.get_mut(&node) else {
                return;
            };
            if g.running >= g.max_parallel || g.next >= g.len {
                return;
            }
            let c = g.first + g.next;
            g.next += 1;
            if self.slots[c] != Slot::NotStarted {
                continue;
            }
            g.running += 1;
            self.begin_attempt(c, self.def.tasks[c].delay, actions);
        }
    }

    /// A child settled for good (`own`: its own outputs, when it passed).
    pub(super) fn child_done(
        &mut self,
        node: Node,
        child: Node,
        state: TaskState,
        own: Params,
        actions: &mut Vec<Action>,
    ) {
        let passes = self.passes(child, state);
        let Some(g) = self.groups.get_mut(&node) else {
            return;
        };
        g.running -= 1;
        if passes {
            g.passed += 1;
            g.results[child - g.first] = Some(own);
        } else if state == TaskState::Failure {
            g.failed.push(child);
        }
        self.fill(node, actions);
        self.settle_group(node, actions);
    }

    /// Ends the foreach task once none of its children runs and no more may start.
    pub(super) fn settle_group(&mut self, node: Node, actions: &mut Vec<Action>) {
        let Some(g) = self.groups.get(&node) else {
            return;
        };
        if g.running > 0 || (g.next < g.len && !self.starting_blocked()) {
            return;
        }
        let Slot::Active { attempt, .. } = self.slots[node] else {
            return;
        };
        let state = if g.passed == g.len {
            TaskState::Success
        } else if !g.failed.is_empty() {
            TaskState::Failure
        } else if self.pause_requested {
            TaskState::Paused
        } else {
            TaskState::Killed
        };
        let message = self.group_message(g);
        let joined: Vec<serde_json::Value> = g
            .results
            .iter()
            .map(|r| match r {
                Some(outs) => serde_json::json!(outs),
                None => serde_json::Value::Null,
            })
            .collect();
        let output = Params::from([(
            RESULTS.to_string(),
            serde_json::Value::Array(joined).to_string(),
        )]);
        actions.push(Action::Settled {
            node,
            state,
            output: output.clone(),
            message,
        });
        let out = self.on_task(node, attempt, state, output, None);
        actions.extend(out.actions);
    }

    fn group_message(&self, g: &Group) -> String {
        let mut message = format!("{} of {} items passed", g.passed, g.len);
        if !g.failed.is_empty() {
            let names: Vec<&str> = g
                .failed
                .iter()
                .take(5)
                .map(|c| self.def.tasks[*c].name.as_str())
                .collect();
            let more = g.failed.len().saturating_sub(names.len());
            message.push_str(&format!("; failed: {}", names.join(", ")));
            if more > 0 {
                message.push_str(&format!(" and {more} more"));
            }
        }
        message
    }
}

fn max_parallel(spec: &ForeachSpec) -> usize {
    spec.max_parallel.map_or(usize::MAX, |m| m as usize)
}

#[cfg(test)]
mod tests;
