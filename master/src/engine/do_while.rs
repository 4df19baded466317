//! A do_while task on the master: its first iteration starts when it does, and after each
//! iteration that passed its condition is evaluated here, against that iteration's
//! outputs, to decide whether another one runs.

use super::cycle::Cycle;
use super::{Engine, spec};
use crate::runtime::Event;
use shoal_common::types::TaskState;
use shoal_store::TaskUpdate;

impl Engine {
    /// The do_while task starts: its first iteration runs whatever the condition says.
    pub(super) fn start_loop(&mut self, id: i64, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.to_start(id) else { return };
        let (instance, node, attempt) = (t.instance, t.node, t.attempt);
        let mut u = TaskUpdate::state(id, TaskState::Running);
        u.started_at = Some(now);
        cycle.update(u);
        let first = Event::LoopChecked {
            node,
            attempt,
            iteration: 0,
            holds: Ok(true),
        };
        self.apply(instance, first, cycle, now);
    }

    /// Iteration `iteration` passed: whether its condition holds decides what follows.
    pub(super) fn check_loop(&mut self, id: i64, iteration: u32, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.tasks.get(&id) else { return };
        let (instance, node, attempt) = (t.instance, t.node, t.attempt);
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let holds = spec::loop_condition(run, node, id, iteration);
        let checked = Event::LoopChecked {
            node,
            attempt,
            iteration,
            holds,
        };
        self.apply(instance, checked, cycle, now);
    }
}
