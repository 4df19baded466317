//! Admission: which dispatched attempts start here, which are known already (adopted, and
//! rerouted to a newer owner), which are refused; the journal's unacked ends taken over at
//! start; and the probe a master makes before it queues an attempt again.

use super::Executor;
use super::kill::KillSwitch;
use super::table::{Finished, Route, RunningTask, SharedRoute, TaskKey};
use crate::journal::Unacked;
use shoal_common::proto::{DispatchResponse, ProbeResponse, TaskAttempt, TaskSpec};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tracing::{Instrument, debug, info, info_span, warn};

impl Executor {
    /// Takes the tasks that fit in the free slots and starts them; the rest come back in
    /// `rejected`. A task already running or finished here is accepted and not run again;
    /// if the dispatch names a newer owner, its events go there from now on. A dispatch
    /// from an owner older than one seen for the instance is refused ([`super::fence`]). With
    /// `adopt_only`, an attempt not known here is refused instead of started.
    pub(crate) fn dispatch(
        self: &Arc<Self>,
        tasks: Vec<TaskSpec>,
        adopt_only: bool,
    ) -> DispatchResponse {
        let mut response = DispatchResponse::default();
        let mut reasons = BTreeSet::new();
        let mut start = Vec::new();
        let mut reroutes = Vec::new();
        // Checked once per call, and only when a new attempt would start.
        let mut disk: Option<Option<String>> = None;
        {
            let mut table = self.table.lock().expect("task table lock");
            // Read under the table lock, which abandoning takes too: a task accepted before
            // the count moved is either seen by the abandon that follows, or tagged newer.
            let generation = self.lease.get().map_or(0, |(lost, _)| *lost.borrow());
            let stale = self.lease.get().is_some_and(|(_, gate)| !gate.fresh());
            for spec in tasks {
                let key = TaskKey::of(&spec);
                let id = spec.task_instance_id;
                let instance = spec.workflow_instance_id;
                if !table.fences.admit(instance, spec.owner_epoch) {
                    let newest = table.fences.newest(instance).unwrap_or_default();
                    warn!(
                        task_instance_id = id,
                        workflow_instance_id = instance,
                        epoch = spec.owner_epoch,
                        newest,
                        "dispatch from a superseded owner refused"
                    );
                    reasons.insert(format!(
                        "instance {instance} has a newer owner (epoch {newest} > {})",
                        spec.owner_epoch
                    ));
                    response.rejected.push(id);
                    continue;
                }
                let known = table.known(&key);
                if let Some((_, true)) = known {
                    debug!(
                        task_instance_id = id,
                        attempt = spec.attempt,
                        "dispatch of an abandoned attempt refused"
                    );
                    reasons.insert("this worker abandoned that attempt".to_string());
                    response.rejected.push(id);
                    continue;
                }
                if let Some((route, _)) = known {
                    debug!(
                        task_instance_id = id,
                        attempt = spec.attempt,
                        "duplicate dispatch accepted"
                    );
                    reroutes.push((key, route, spec.master_addr, spec.owner_epoch));
                    response.accepted.push(id);
                    continue;
                }
                if adopt_only {
                    reasons.insert(format!(
                        "attempt {} of task {id} is not on this worker",
                        spec.attempt
                    ));
                    response.rejected.push(id);
                    continue;
                }
                if !table.accepting {
                    reasons.insert("worker is shutting down".to_string());
                    response.rejected.push(id);
                    continue;
                }
                if stale {
                    reasons.insert("this worker cannot renew its registry lease".to_string());
                    response.rejected.push(id);
                    continue;
                }
                let disk = disk.get_or_insert_with(|| self.disk.refusal());
                if let Some(why) = disk {
                    reasons.insert(why.clone());
                    response.rejected.push(id);
                    continue;
                }
                if table.running.len() >= self.slots as usize {
                    reasons.insert(format!(
                        "no free slot ({} of {} in use)",
                        table.running.len(),
                        self.slots
                    ));
                    response.rejected.push(id);
                    continue;
                }
                if let Err(e) = self.outbox.ensure(&spec.master_addr) {
                    reasons.insert(e.to_string());
                    response.rejected.push(id);
                    continue;
                }
                let task = Arc::new(RunningTask {
                    kill: KillSwitch::default(),
                    route: Arc::new(Mutex::new(Route {
                        master_addr: spec.master_addr.clone(),
                        epoch: spec.owner_epoch,
                    })),
                    generation,
                });
                table.running.insert(key, task.clone());
                response.accepted.push(id);
                start.push((spec, task));
            }
            if !start.is_empty() {
                self.running_count.send_replace(table.running.len() as u32);
                self.active.send_modify(|n| *n += start.len());
            }
        }
        for (key, route, master_addr, epoch) in reroutes {
            self.reroute(key, &route, master_addr, epoch);
        }
        for (spec, task) in start {
            let span = info_span!(
                "task",
                task_instance_id = spec.task_instance_id,
                workflow_instance_id = spec.workflow_instance_id,
                attempt = spec.attempt,
            );
            tokio::spawn(self.clone().run(spec, task).instrument(span));
        }
        response.reason = reasons.into_iter().collect::<Vec<_>>().join("; ");
        response
    }

    /// Takes over what a previous run of this worker finished and its masters never acked
    /// (from the journal): each attempt is known here as finished, and its event is sent
    /// again to the master it was for (or to whoever adopts the attempt since).
    pub(crate) fn resume_finished(&self, unacked: Vec<Unacked>) {
        if unacked.is_empty() {
            return;
        }
        info!(
            events = unacked.len(),
            "resending the ends of tasks a previous run of this worker finished"
        );
        for Unacked {
            master,
            epoch,
            event,
        } in unacked
        {
            let key = TaskKey {
                task_instance_id: event.task_instance_id,
                attempt: event.attempt,
            };
            {
                let mut table = self.table.lock().expect("task table lock");
                table.fences.admit(event.workflow_instance_id, epoch);
                let route = Arc::new(Mutex::new(Route {
                    master_addr: master.clone(),
                    epoch,
                }));
                let finished = Finished {
                    route,
                    abandoned: false,
                };
                if table.finished.insert(key, finished).is_none() {
                    table.finished_order.push_back(key);
                }
            }
            if let Err(e) = self.outbox.push(&master, event) {
                warn!(task_instance_id = key.task_instance_id, error = %e, "cannot resend a task's end");
            }
        }
    }

    /// Points a known task at a new owning master when the dispatch carries an epoch at
    /// least as new as the one it had, and moves its unacked events there.
    fn reroute(&self, key: TaskKey, route: &SharedRoute, master_addr: String, epoch: i64) {
        // The route lock is held while the events move so that an event pushed concurrently
        // either goes to the new master or is moved along with the others.
        let mut route = route.lock().expect("route lock");
        if route.master_addr == master_addr || epoch < route.epoch {
            return;
        }
        match self
            .outbox
            .reroute(key.task_instance_id, key.attempt, &master_addr)
        {
            Ok(()) => {
                info!(
                    task_instance_id = key.task_instance_id,
                    attempt = key.attempt,
                    from = %route.master_addr,
                    to = %master_addr,
                    epoch,
                    "task owner changed, events rerouted"
                );
                route.master_addr = master_addr;
                route.epoch = epoch;
            }
            Err(e) => {
                warn!(task_instance_id = key.task_instance_id, error = %e, "cannot reroute task events")
            }
        }
    }

    /// Which of these attempts are running here or finished here (and remembered), after
    /// raising each instance's fence to the prober's epoch: under one lock, so a dispatch
    /// from an older owner either arrived before (and the attempt is known) or is refused.
    ///
    /// Abandoned attempts are reported apart: the master runs them again as a new attempt.
    /// Were they unknown, it would queue the same attempt again, which this worker keeps
    /// refusing (with no other worker in the group, for ever).
    pub(crate) fn probe(&self, attempts: &[TaskAttempt]) -> ProbeResponse {
        let mut table = self.table.lock().expect("task table lock");
        let mut response = ProbeResponse::default();
        for a in attempts {
            table.fences.admit(a.workflow_instance_id, a.owner_epoch);
            let key = TaskKey {
                task_instance_id: a.task_instance_id,
                attempt: a.attempt,
            };
            let Some((_, abandoned)) = table.known(&key) else {
                continue;
            };
            if abandoned {
                response.abandoned.push(a.task_instance_id);
            } else {
                response.known.push(a.task_instance_id);
            }
        }
        response
    }
}
