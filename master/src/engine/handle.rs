//! The engine's dispatch of each message to the function that handles it.

use super::cycle::Cycle;
use super::places::Place;
use super::{Engine, EngineMsg, alerts};
use crate::runtime::{Event, Fact};
use shoal_common::definition::TimeoutStrategy;
use shoal_common::proto::TaskEvent;
use shoal_common::start::Params;
use shoal_common::types::{TaskState, now_ms};
use shoal_store::TaskUpdate;
use std::collections::HashMap;
use tokio::sync::oneshot;
use tracing::warn;

impl Engine {
    pub(super) fn handle(&mut self, msg: EngineMsg, cycle: &mut Cycle) {
        let now = now_ms();
        match msg {
            EngineMsg::Claimed(list) => {
                for c in list {
                    self.take(c, cycle, now);
                }
            }
            EngineMsg::WorkerEvents {
                worker,
                events,
                ack,
            } => self.worker_events(&worker, events, ack, cycle),
            EngineMsg::Dispatched { id, worker } => self.dispatched(id, worker, cycle, now),
            EngineMsg::Cancelled { id } => self.cancelled(id, cycle, now),
            EngineMsg::Settle { id, fact } => self.settle(id, fact, cycle, now),
            EngineMsg::Ready {
                instance,
                node,
                attempt,
            } => {
                self.apply(instance, Event::Ready { node, attempt }, cycle, now);
            }
            EngineMsg::Control {
                instance,
                control,
                reply,
            } => {
                let result = self.control(instance, control, cycle, now);
                cycle.replies.push((instance, reply, result));
            }
            EngineMsg::Probed {
                found,
                abandoned,
                asked,
            } => self.probed(found, abandoned, asked, cycle, now),
            EngineMsg::StartChild { id } => self.start_child(id, cycle, now),
            EngineMsg::StartWait { id } => self.start_wait(id, cycle, now),
            EngineMsg::Expand { id } => self.expand(id, cycle, now),
            EngineMsg::StartLoop { id } => self.start_loop(id, cycle, now),
            EngineMsg::CheckLoop { id, iteration } => self.check_loop(id, iteration, cycle, now),
            EngineMsg::Polled(polled) => self.polled(polled, cycle, now),
            EngineMsg::CheckOwnership { generation } => self.check_ownership(generation, cycle),
            EngineMsg::Branched { id, chosen } => self.branched(id, chosen, cycle, now),
            EngineMsg::Waiting { ids, reason } => self.queued_waiting(ids, reason, cycle),
            EngineMsg::WorkersGone(gone) => self.workers_gone(&gone, cycle, now),
            EngineMsg::Reconcile => {
                self.recheck(None);
                self.sweep_owned();
            }
            EngineMsg::SweepOwned => self.sweep_owned(),
            EngineMsg::WorkersRestarted(workers) => self.recheck(Some(&workers)),
            EngineMsg::Rechecked { worker, unknown } => {
                self.rechecked(&worker, unknown, cycle, now)
            }
            EngineMsg::Unattended(owned) => self.take_up_unattended(owned),
            EngineMsg::NotReloaded(instance) => self.ownership.not_reloaded(instance),
            EngineMsg::Timeout { instance, run_no } => self.timed_out(instance, run_no, cycle, now),
        }
    }

    fn worker_events(
        &mut self,
        worker: &str,
        events: Vec<TaskEvent>,
        ack: oneshot::Sender<Vec<u64>>,
        cycle: &mut Cycle,
    ) {
        let mut seqs = Vec::with_capacity(events.len());
        for ev in events {
            // An instance lost to another master: no ack, so the worker keeps the
            // event until the new owner adopts the task and it is rerouted there.
            if !self.ownership.answers_for(ev.workflow_instance_id) {
                continue;
            }
            seqs.push((ev.seq, ev.workflow_instance_id));
            self.on_worker_event(worker, ev, cycle);
        }
        cycle.acks.push((ack, seqs));
    }

    fn dispatched(&mut self, id: i64, worker: String, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.tasks.get_mut(&id) else {
            // Ended or dropped meanwhile: the dispatcher counted a slot for it.
            self.dispatch.free(&worker, id);
            return;
        };
        let no_worker = matches!(t.place, Place::Queued { no_worker: true });
        // A kill that raced the dispatch RPC is carried out on the worker.
        if t.place.killing() {
            cycle.kills.push((t.instance, t.node));
        }
        t.place.reached(&worker);
        let instance = t.instance;
        let mut u = TaskUpdate::state(id, TaskState::Dispatched);
        u.worker = Some(worker);
        if no_worker {
            u.message = Some(String::new());
        }
        // Its row update only records where the task went.
        self.task_record(instance, u, cycle, now);
    }

    fn cancelled(&mut self, id: i64, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.tasks.get(&id) else { return };
        let killed = t.place.killing();
        self.settle(id, Fact::Cancelled { killed }, cycle, now);
    }

    fn probed(
        &mut self,
        found: Vec<(i64, String)>,
        abandoned: Vec<i64>,
        asked: Vec<i64>,
        cycle: &mut Cycle,
        now: i64,
    ) {
        let found: HashMap<i64, String> = found.into_iter().collect();
        for id in asked {
            if abandoned.contains(&id) {
                let lost = Fact::Lost("its worker gave it up".into());
                self.settle(id, lost, cycle, now);
                continue;
            }
            let Some(t) = self.tasks.get_mut(&id) else {
                continue;
            };
            match found.get(&id) {
                Some(worker) => {
                    if t.place.killing() {
                        cycle.kills.push((t.instance, t.node));
                    }
                    t.place.reached(worker);
                    cycle.adoptions.push((t.instance, t.node));
                }
                // Killed while the workers were asked: it never goes out.
                None if t.place.killing() => {
                    let _ = self.ctx.me.send(EngineMsg::Cancelled { id });
                }
                None => cycle.enqueues.push((t.instance, t.node)),
            }
        }
    }

    fn check_ownership(&mut self, generation: u64, cycle: &mut Cycle) {
        warn!(
            instances = self.runs.len(),
            "lease lapsed; checking which instances are still ours"
        );
        cycle.check_ownership = Some(generation);
        cycle.epochs.extend(self.runs.epochs());
    }

    fn branched(&mut self, id: i64, chosen: Vec<String>, cycle: &mut Cycle, now: i64) {
        let Some(run) = self.tasks.get(&id).and_then(|t| self.runs.get(&t.instance)) else {
            return;
        };
        let (state, message) = run.rt.decide(Fact::Branched(chosen.clone()));
        let mut u = TaskUpdate::state(id, state);
        u.ended_at = Some(now);
        u.output = Some(Params::from([("branch".to_string(), chosen.join(","))]));
        u.message = message;
        self.task_event(id, u, Params::new(), Some(chosen), cycle, now);
    }

    /// Queued tasks that cannot go out yet: why is a record (see `RECORD_WAIT`).
    fn queued_waiting(&mut self, ids: Vec<i64>, reason: String, cycle: &mut Cycle) {
        for id in ids {
            let record = self.tasks.get(&id).and_then(|t| self.record(t.instance));
            let (Some(record), Some(t)) = (record, self.tasks.get_mut(&id)) else {
                continue;
            };
            let Place::Queued { no_worker } = &mut t.place else {
                continue;
            };
            *no_worker = true;
            let mut u = TaskUpdate::state(id, TaskState::Submitted);
            u.message = Some(reason.clone());
            cycle.record(u, record);
        }
    }

    fn workers_gone(&mut self, gone: &[String], cycle: &mut Cycle, now: i64) {
        let lost: Vec<i64> = self
            .tasks
            .iter()
            .filter(|(_, t)| {
                t.place
                    .worker()
                    .is_some_and(|w| gone.iter().any(|g| g == w))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            warn!(
                task_instance_id = id,
                "task lost with its worker; it runs again"
            );
            let lost = Fact::Lost("its worker left the cluster".into());
            self.settle(id, lost, cycle, now);
        }
    }

    fn rechecked(&mut self, worker: &str, unknown: Vec<i64>, cycle: &mut Cycle, now: i64) {
        for id in self.lost_on(worker, unknown) {
            let lost = Fact::Lost(format!(
                "worker {worker} no longer had this attempt (it restarted or gave it up)"
            ));
            self.settle(id, lost, cycle, now);
        }
    }

    fn timed_out(&mut self, instance: i64, run_no: i32, cycle: &mut Cycle, now: i64) {
        let Some(run) = self.runs.get_mut(&instance).filter(|r| r.run_no == run_no) else {
            return;
        };
        let def = run.rt.definition().clone();
        warn!(instance_id = instance, timeout = ?def.timeout, strategy = ?def.timeout_strategy, "instance exceeded its timeout");
        let timed_out = alerts::on_timeout(run);
        if !timed_out.is_empty() {
            cycle.epochs.insert(instance, run.epoch);
            cycle.batch.alerts.extend(timed_out);
        }
        if def.timeout_strategy == TimeoutStrategy::Fail {
            let actions = run.rt.time_out();
            self.perform(instance, actions, cycle, now);
        }
    }
}
