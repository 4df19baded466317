//! A cycle: the writes and follow-ups its messages collect, committed in one batch, and
//! then what follows from them.

use super::commit::Committed;
use super::places::{Place, TaskRef};
use super::timers::Due;
use super::{ControlError, ControlReply, Engine, EngineMsg, callback, child_stop, waits};
use crate::runtime::Node;
use shoal_common::metrics;
use shoal_common::types::WorkflowState;
use shoal_store::{TaskUpdate, WriteBatch};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

pub(super) struct PendingCreate {
    pub instance: i64,
    pub node: Node,
    pub attempt: i32,
    /// Its row's `submitted_at`.
    pub at: i64,
    /// None: a skipped task, recorded only.
    pub start: Option<Option<Duration>>,
}

/// An event's sequence number and the instance it belongs to.
pub(super) type EventOf = (u64, i64);

/// A task row update that only records (see [`RECORD_WAIT`]): its instance, the epoch it
/// was made under, and until when it may wait for the task's next update.
#[derive(Clone, Copy)]
pub(super) struct Record {
    pub instance: i64,
    pub epoch: i64,
    pub until: Instant,
}

/// Writes and follow-ups collected during one cycle.
#[derive(Default)]
pub(super) struct Cycle {
    pub batch: WriteBatch,
    pub updates: HashMap<i64, usize>,
    /// The batch's task updates that only record, by task id.
    pub records: HashMap<i64, Record>,
    pub creates: Vec<PendingCreate>,
    /// Per report: (event seq, its instance), acknowledged after the commit.
    pub acks: Vec<(oneshot::Sender<Vec<u64>>, Vec<EventOf>)>,
    /// Per control request: (its instance, the reply, what the engine answers).
    pub replies: Vec<(i64, ControlReply, Result<WorkflowState, ControlError>)>,
    pub kills: Vec<(i64, Node)>,
    pub withdraws: Vec<(i64, Node)>,
    pub enqueues: Vec<(i64, Node)>,
    pub adoptions: Vec<(i64, Node)>,
    /// Adopted attempts with no worker on record, to look for on the live workers.
    pub probes: Vec<i64>,
    pub finished: Vec<(i64, WorkflowState)>,
    pub ended_tasks: Vec<i64>,
    /// Owner epoch of every instance this cycle writes for (the store fences on it).
    pub epochs: HashMap<i64, i64>,
    /// The lease lapse whose ownership check this cycle's commit is.
    pub check_ownership: Option<u64>,
    /// Tasks that start waiting once the cycle is committed.
    pub waits: Vec<(i64, waits::Wait)>,
    /// Callback tasks whose request goes out once they wait.
    pub callbacks: Vec<(i64, callback::Request)>,
}

impl Cycle {
    /// Ends the cycle's intake: epochs go along with writes, or alone when this master
    /// must check which instances it still owns (after its lease lapsed).
    pub fn seal(&mut self) {
        if !self.batch.is_empty() || self.check_ownership.is_some() {
            self.batch.epochs = self.epochs.iter().map(|(i, e)| (*i, *e)).collect();
        }
    }

    /// Takes out of the batch the records still allowed to wait ([`RECORD_WAIT`]): the
    /// next cycle carries them, and writes them with the task's next update or alone
    /// once their time is up.
    pub fn defer_records(&mut self, now: Instant) -> Vec<(TaskUpdate, Record)> {
        let later: HashMap<i64, Record> = self.records.extract_if(|_, r| r.until > now).collect();
        if later.is_empty() {
            return Vec::new();
        }
        let (deferred, kept): (Vec<TaskUpdate>, Vec<TaskUpdate>) =
            std::mem::take(&mut self.batch.task_updates)
                .into_iter()
                .partition(|u| later.contains_key(&u.id));
        self.updates = kept.iter().enumerate().map(|(i, u)| (u.id, i)).collect();
        self.batch.task_updates = kept;
        deferred
            .into_iter()
            .map(|u| {
                let record = later[&u.id];
                (u, record)
            })
            .collect()
    }

    /// Adds a record to the batch. One that joins an update of the task already in the
    /// cycle is written with it; one that joins an earlier record keeps that one's time.
    pub fn record(&mut self, u: TaskUpdate, record: Record) {
        let first = !self.updates.contains_key(&u.id);
        if first {
            self.records.insert(u.id, record);
        }
        self.epochs.insert(record.instance, record.epoch);
        self.merge(u);
    }

    /// Folds a task update into the batch; a record of the task already there goes with it.
    pub fn update(&mut self, u: TaskUpdate) {
        self.records.remove(&u.id);
        self.merge(u);
    }

    /// Several changes of one task in a cycle become one row update (the batch must not
    /// name a row twice).
    pub fn merge(&mut self, u: TaskUpdate) {
        if let Some(&i) = self.updates.get(&u.id) {
            let cur = &mut self.batch.task_updates[i];
            cur.state = u.state;
            cur.worker = u.worker.or(cur.worker.take());
            cur.started_at = cur.started_at.or(u.started_at);
            cur.ended_at = u.ended_at.or(cur.ended_at);
            cur.exit_code = u.exit_code.or(cur.exit_code);
            cur.output = u.output.or(cur.output.take());
            cur.message = u.message.or(cur.message.take());
        } else {
            self.updates.insert(u.id, self.batch.task_updates.len());
            self.batch.task_updates.push(u);
        }
    }
}

impl Engine {
    pub(super) fn after_commit(&mut self, cycle: Cycle, committed: Committed) {
        // Instances whose writes of this cycle are not (known to be) in the store.
        let excluded = committed.excluded();
        let Committed {
            result,
            refused,
            unsure,
        } = committed;
        self.ownership.fenced(&result.fenced_instances);
        self.ownership.reloading(&unsure);
        // Serial runs that start now that their predecessor ended: ours to drive.
        if !result.woken.is_empty() {
            let _ = self.ctx.me.send(EngineMsg::Claimed(result.woken));
        }
        for (ack, seqs) in cycle.acks {
            let durable = seqs
                .into_iter()
                .filter(|(_, instance)| self.ownership.answers_for(*instance));
            let _ = ack.send(durable.map(|(seq, _)| seq).collect());
        }
        for (instance, reply, outcome) in cycle.replies {
            let outcome = match excluded.contains(&instance) && !self.ownership.is_lost(instance) {
                true => Err(ControlError::NotRecorded(instance)),
                false => outcome,
            };
            let _ = reply.send(outcome);
        }
        for &instance in &result.fenced_instances {
            warn!(
                instance_id = instance,
                "instance was taken over by another master; dropping it"
            );
            self.drop_run(instance);
        }
        for (instance, reason) in refused {
            self.fail(instance, reason);
        }
        for &instance in &unsure {
            self.reload(instance);
        }
        // Their slots went back to the dispatcher as they ended (`Engine::ended`).
        for id in cycle.ended_tasks {
            self.tasks.remove(&id);
        }
        // The store wrote no task of an excluded instance: line up the ids with the rest.
        let creates = cycle
            .creates
            .into_iter()
            .filter(|pc| !excluded.contains(&pc.instance));
        for (pc, id) in creates.zip(result.new_task_ids) {
            let Some(run) = self.runs.get_mut(&pc.instance) else {
                continue;
            };
            let Some(delay) = pc.start else { continue };
            run.task_ids[pc.node] = Some(id);
            let place = match delay {
                Some(_) => Place::Delayed,
                None => Place::New,
            };
            self.tasks.insert(
                id,
                TaskRef {
                    instance: pc.instance,
                    node: pc.node,
                    attempt: pc.attempt,
                    place,
                    since_ms: pc.at,
                },
            );
            match delay {
                Some(delay) => {
                    let due = Due::Ready {
                        instance: pc.instance,
                        node: pc.node,
                        attempt: pc.attempt,
                    };
                    self.timers.at(pc.at + delay.as_millis() as i64, due);
                }
                None => self.enqueue(pc.instance, pc.node),
            }
        }
        for (instance, node) in cycle.enqueues {
            self.enqueue(instance, node);
        }
        for (id, wait) in cycle.waits {
            let Some(t) = self.tasks.get_mut(&id) else {
                continue;
            };
            // Stopped while its wait was written (a child run): the child is stopped too.
            if t.place.killing() {
                if matches!(wait, waits::Wait::Child) {
                    child_stop::stop_child(self.ctx.store.clone(), self.ctx.clients.clone(), id);
                }
                let _ = self.ctx.me.send(EngineMsg::Cancelled { id });
                continue;
            }
            t.place = Place::Waiting(wait);
            self.waits.began();
        }
        for (id, request) in cycle.callbacks {
            if let Some(Place::Waiting(_)) = self.tasks.get(&id).map(|t| &t.place) {
                callback::send(self.ctx.store.clone(), id, request);
            }
        }
        for (instance, node) in cycle.adoptions {
            self.adopt(instance, node);
        }
        if !cycle.probes.is_empty() {
            self.probe(cycle.probes);
        }
        // After the lost runs were dropped (their queued tasks withdrawn) above.
        if let Some(generation) = cycle.check_ownership {
            // An unknown outcome may have hidden a fenced instance: check again.
            if unsure.is_empty() {
                self.dispatch.ownership_checked(generation);
            } else {
                let _ = self.ctx.me.send(EngineMsg::CheckOwnership { generation });
            }
        }
        for (instance, node) in cycle.kills {
            self.kill(instance, node);
        }
        for (instance, node) in cycle.withdraws {
            self.withdraw(instance, node);
        }
        for (instance, state) in cycle.finished {
            // Counted after the commit: a fenced run was dropped above and is not counted.
            if self.runs.contains_key(&instance)
                && let Some(counter) = metrics::instances_finished(state)
            {
                counter.inc();
            }
            self.drop_run(instance);
        }
        self.poll_waits();
    }
}
