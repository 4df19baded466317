//! Attempts that begin to wait on the master (a sub_workflow task for its child run, a
//! wait, callback or external task for its completion), and what a poll of the waits
//! found.

use super::cycle::Cycle;
use super::places::Place;
use super::{Engine, spec, waits};
use crate::runtime::Fact;
use shoal_common::start::Params;
use shoal_common::types::{TaskState, TaskType};
use shoal_store::{ChildState, TaskUpdate};

impl Engine {
    /// A sub_workflow task's child run is written with this cycle; the task waits for it.
    pub(super) fn start_child(&mut self, id: i64, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.to_start(id) else { return };
        let Some(run) = self.runs.get(&t.instance) else {
            return;
        };
        match spec::child_start(run, t.node, id) {
            Ok(child) => {
                cycle.epochs.insert(t.instance, run.epoch);
                cycle.batch.children.push(child);
                cycle.waits.push((id, waits::Wait::Child));
            }
            Err(why) => self.settle(id, Fact::Unrunnable(why), cycle, now),
        }
    }

    /// Records a wait, callback or external task as waiting (with an external task's offer
    /// or what a wait task's event waits for; a callback's request is sent once the record
    /// is committed).
    pub(super) fn start_wait(&mut self, id: i64, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.to_start(id) else { return };
        let Some(run) = self.runs.get(&t.instance) else {
            return;
        };
        let node = t.node;
        let mut message = format!(
            "waiting to be completed: `shoal task complete {id}` or POST /api/v1/task-instances/{id}/complete"
        );
        let def = &run.rt.definition().tasks[node];
        if def.kind() == TaskType::External {
            match spec::external_offer(run, node, id, &self.ctx.secrets) {
                Ok(offer) => {
                    message = format!(
                        "waiting for an external worker to take it from queue '{}'",
                        offer.queue
                    );
                    cycle.batch.external_offers.push(offer);
                }
                Err(why) => return self.settle(id, Fact::Unrunnable(why), cycle, now),
            }
        }
        if def.kind() == TaskType::Callback {
            let api = self.ctx.api_url.as_deref();
            match spec::callback_request(run, node, id, &self.ctx.secrets, api) {
                Ok(request) => {
                    let to = request.shown_url();
                    message = format!("waiting for its callback (request to {to})");
                    cycle.callbacks.push((id, request));
                }
                Err(why) => return self.settle(id, Fact::Unrunnable(why), cycle, now),
            }
        }
        match spec::event_wait(run, node, id) {
            Ok(Some(wait)) => {
                message = format!(
                    "waiting for event '{}' with key '{}': `shoal event send {} {} --key KEY` or POST /api/v1/projects/{}/events/{}",
                    wait.event, wait.key, wait.project, wait.event, wait.project, wait.event
                );
                cycle.batch.event_waits.push(wait);
            }
            Ok(None) => {}
            Err(why) => return self.settle(id, Fact::Unrunnable(why), cycle, now),
        }
        let wait = spec::signal(run, node, now);
        let mut u = TaskUpdate::state(id, TaskState::Waiting);
        u.started_at = Some(now);
        u.message = Some(message);
        self.task_event(id, u, Params::new(), None, cycle, now);
        cycle.waits.push((id, wait));
    }

    /// What the last poll of the waits found: each attempt whose wait ended is settled
    /// from what ended it (or sent out, with its slot).
    pub(super) fn polled(&mut self, polled: waits::Polled, cycle: &mut Cycle, now: i64) {
        self.waits.polled();
        // A slot granted in the store is durable already: queue the task at once.
        for id in polled.grants.granted {
            // Not waiting: cancelled meanwhile; its end frees the slot.
            if self.unwait(id).is_none() {
                continue;
            }
            let Some(t) = self.tasks.get(&id) else {
                continue;
            };
            let (instance, node) = (t.instance, t.node);
            self.send_out(instance, node);
        }
        for (id, group) in polled.grants.no_group {
            self.unwait(id);
            let message = format!(
                "task group '{group}' does not exist; create it with `shoal task-group create {group} --slots N`"
            );
            self.settle(id, Fact::Unrunnable(message), cycle, now);
        }
        for (id, child) in polled.children {
            let (fact, output) = match child {
                ChildState::Waiting => continue,
                ChildState::Ended {
                    instance,
                    state,
                    outputs,
                } => (Fact::ChildEnded { instance, state }, outputs),
                ChildState::Failed(why) => (Fact::Unrunnable(why), Params::new()),
            };
            self.unwait(id);
            self.settle_with(id, fact, output, cycle, now);
        }
        for (id, output) in polled.met {
            self.unwait(id);
            self.settle_with(id, Fact::DependencyMet, output, cycle, now);
        }
        for (id, why) in polled.failed {
            self.unwait(id);
            self.settle(id, Fact::DependencyFailed(why), cycle, now);
        }
        for (id, why) in polled.pending {
            self.dependency_pending(id, why, cycle);
        }
        // Ended by the API, a callback, this master's timeout or a failed callback
        // request: the row says how; the runtime follows it.
        for row in polled.ended {
            if self.unwait(row.id).is_none() {
                continue;
            }
            let mut u = TaskUpdate::state(row.id, row.state);
            u.ended_at = row.ended_at.or(Some(now));
            u.message = row.message;
            u.output = (!row.output.is_empty()).then(|| row.output.clone());
            self.task_event(row.id, u, row.output, None, cycle, now);
        }
        for (id, why) in polled.timed_out {
            self.unwait(id);
            self.settle(id, Fact::DependencyTimedOut(why), cycle, now);
        }
    }

    /// A dependent task still waits: checked again after its interval, and its row says
    /// what it waits for whenever that changes.
    fn dependency_pending(&mut self, id: i64, why: String, cycle: &mut Cycle) {
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        let Place::Waiting(waits::Wait::Dependent {
            on,
            next_check,
            shown,
        }) = &mut t.place
        else {
            return;
        };
        *next_check = tokio::time::Instant::now() + on.every;
        if shown.as_deref() == Some(why.as_str()) {
            return;
        }
        let Some(run) = self.runs.get(&t.instance) else {
            return;
        };
        cycle.epochs.insert(run.instance_id, run.epoch);
        let mut u = TaskUpdate::state(id, TaskState::Submitted);
        u.message = Some(why.clone());
        cycle.update(u);
        *shown = Some(why);
    }
}
