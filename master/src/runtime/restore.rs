//! Rebuilding a run from the attempts the store recorded (resume, resubmit, failover).

use super::{Node, Recovery, Refused, Slot, WorkflowRuntime, scope};
use shoal_common::definition::WorkflowDef;
use shoal_common::start::{Params, RerunTask};
use shoal_common::types::TaskState;
use std::collections::HashMap;
use std::sync::Arc;

/// One recorded attempt of a task, as the store holds it.
#[derive(Clone, Copy)]
pub struct Recorded<'a> {
    pub name: &'a str,
    pub attempt: i32,
    pub state: TaskState,
    pub output: &'a Params,
}

impl WorkflowRuntime {
    /// An ended run that reruns `rerun.task` (and with `downstream`, what depends on it)
    /// as new attempts; every other task keeps its recorded state, so the run ends
    /// `success` only if all of them had passed. Foreach and do_while tasks cannot be
    /// rerun alone (their children are rows of their own).
    pub fn rerun_task(
        def: Arc<WorkflowDef>,
        attempts: &[Recorded<'_>],
        rerun: &RerunTask,
    ) -> Result<Self, Refused> {
        let probe = Self::empty(def.clone());
        let start = probe.node_of(&rerun.task)?;
        let scope = scope::nodes(&probe.dag, start, rerun.scope());
        if let Some(n) = scope
            .iter()
            .find(|&&n| def.tasks[n].foreach.is_some() || def.tasks[n].do_while.is_some())
        {
            return Err(Refused(format!(
                "task '{}' is a foreach or do_while task, which cannot be rerun alone yet; \
                 rerun or resubmit the instance",
                def.tasks[*n].name
            )));
        }
        // Lost attempts run again as the next attempt: what the failover restore does.
        let again: Vec<Recorded> = attempts
            .iter()
            .map(|r| {
                let scoped = probe.node_of(r.name).is_ok_and(|n| scope.contains(&n));
                Recorded {
                    state: if scoped {
                        TaskState::NeedFaultTolerance
                    } else {
                        r.state
                    },
                    ..*r
                }
            })
            .collect();
        let mut rt = Self::restore(def, &again, Recovery::Failover);
        rt.keep_to_rerun(rerun)?;
        Ok(rt)
    }

    /// What a rerun of one task leaves alone: tasks outside its scope that have not run
    /// stay out of the run, and the other tasks' failures do not block it (they still
    /// keep the run from ending `success`). Also applied when a master takes such a run
    /// over.
    pub fn keep_to_rerun(&mut self, rerun: &RerunTask) -> Result<(), Refused> {
        self.limit_to(Some((&rerun.task, rerun.scope())))?;
        self.failed = false;
        Ok(())
    }

    /// Rebuilds a run from its stored attempts (the latest attempt of each task counts).
    ///
    /// `Recovery::Rerun` (resume, resubmit-failed): tasks that passed keep their state and
    /// outputs; everything else (failed, killed, paused, never run) runs again as a new
    /// attempt. `Recovery::Failover` (a master took the instance over): every attempt keeps
    /// its state; those still in flight stay active for the caller to adopt, and only
    /// tasks never started (or lost with a dead worker) start now.
    pub fn restore(def: Arc<WorkflowDef>, attempts: &[Recorded<'_>], recovery: Recovery) -> Self {
        let mut rt = Self::empty(def);
        if recovery == Recovery::Failover {
            rt.restore_children(&latest_foreach_rows(&rt, attempts));
            rt.restore_iterations(attempts);
        }
        let index: HashMap<String, Node> = rt
            .def
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let mut latest: Vec<Option<&Recorded>> = vec![None; rt.slots.len()];
        for row in attempts {
            let Some(&node) = index.get(row.name) else {
                if rt.fanned_from(row.name).is_some() {
                    rt.stash(row);
                }
                continue;
            };
            rt.last_attempt[node] = rt.last_attempt[node].max(row.attempt);
            if recovery == Recovery::Failover && row.state == TaskState::Failure {
                rt.retries_left[node] = rt.retries_left[node].saturating_sub(1);
            }
            if latest[node].is_none_or(|l| l.attempt <= row.attempt) {
                latest[node] = Some(row);
            }
        }
        for (node, row) in latest.iter().enumerate() {
            let Some(row) = row else { continue };
            let (attempt, state) = (row.attempt, row.state);
            if rt.passes(node, state) {
                rt.slots[node] = Slot::Done { attempt, state };
                rt.mark_passed(node);
                // What still runs is killed when the run starts again (`Event::Start`).
                rt.terminate(node);
            } else if recovery == Recovery::Rerun || state == TaskState::NeedFaultTolerance {
                // Left NotStarted: it runs again as attempt last + 1.
            } else if state.is_terminal() {
                rt.slots[node] = Slot::Done { attempt, state };
                if rt.parent.contains_key(&node) && state == TaskState::Failure {
                    // Its foreach task's to judge, as in `on_task`.
                    rt.settled_otherwise += 1;
                    continue;
                }
                rt.failed |= state == TaskState::Failure && !rt.caught(node, state);
            } else {
                rt.slots[node] = Slot::Active { attempt, state };
                rt.active += 1;
            }
        }
        // Caught failures first: their handlers see the failure before handing on.
        for (node, row) in latest.iter().enumerate() {
            if let (Some(row), Slot::Done { state, .. }) = (row, rt.slots[node])
                && rt.caught(node, state)
            {
                rt.catch(node, row.output.clone());
            }
        }
        // Upstream first, so each node inherits what its upstream tasks handed on, and
        // the branches conditions and switch tasks did not take stay pruned.
        let order = petgraph::algo::toposort(&rt.dag, None).unwrap_or_default();
        for n in order {
            let node = n.index();
            let Some(row) = latest[node] else { continue };
            let Slot::Done { state, .. } = rt.slots[node] else {
                continue;
            };
            if rt.passes(node, state) {
                rt.drop_handler(node);
                rt.hand_on(node, row.output.clone());
                let task = &rt.def.tasks[node];
                let decided = task.switch.is_some()
                    || task.conditions.as_ref().is_some_and(|c| c.when.is_some());
                let chosen = match decided {
                    true => row.output.get("branch").map(|b| {
                        b.split(',')
                            .filter(|t| !t.is_empty())
                            .map(str::to_string)
                            .collect()
                    }),
                    false => rt
                        .conditions_branch(node)
                        .or_else(|| rt.timeout_branch(node, row.output)),
                };
                if let Some(chosen) = chosen {
                    rt.prune_unchosen(node, &chosen);
                }
            }
        }
        let own: HashMap<Node, Params> = (0..rt.slots.len())
            .filter(|&n| rt.parent.contains_key(&n))
            .filter_map(|n| Some((n, latest[n]?.output.clone())))
            .collect();
        rt.recount_groups(&own);
        rt
    }
}

/// The latest recorded attempt of each foreach task.
fn latest_foreach_rows<'r, 'a>(
    rt: &WorkflowRuntime,
    attempts: &'r [Recorded<'a>],
) -> Vec<(Node, &'r Recorded<'a>)> {
    let foreach: HashMap<&str, Node> = (rt.def.tasks.iter().enumerate())
        .filter(|(_, t)| t.foreach.is_some())
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut latest: HashMap<Node, &Recorded> = HashMap::new();
    for row in attempts {
        let Some(&node) = foreach.get(row.name) else {
            continue;
        };
        if latest.get(&node).is_none_or(|l| l.attempt <= row.attempt) {
            latest.insert(node, row);
        }
    }
    latest.into_iter().collect()
}
