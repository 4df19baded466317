//! The end of a cycle: its writes committed in one batch, then what follows from them.

use super::callback;
use super::commit::Committed;
use super::timers::Due;
use super::*;

impl Engine {
    pub(super) fn after_commit(&mut self, cycle: Cycle, committed: Committed) {
        // Instances whose writes of this cycle are not (known to be) in the store.
        let excluded = committed.excluded();
        let Committed {
            result,
            refused,
            unsure,
        } = committed;
        self.lost.extend(result.fenced_instances.iter().copied());
        self.reloading.extend(unsure.iter().copied());
        // Serial runs that start now that their predecessor ended: ours to drive.
        if !result.woken.is_empty() {
            let _ = self.me.send(EngineMsg::Claimed(result.woken));
        }
        for (ack, seqs) in cycle.acks {
            let durable = seqs.into_iter().filter(|(_, instance)| {
                !self.lost.contains(instance) && !self.reloading.contains(instance)
            });
            let _ = ack.send(durable.map(|(seq, _)| seq).collect());
        }
        for (instance, reply, outcome) in cycle.replies {
            let outcome = match excluded.contains(&instance) && !self.lost.contains(&instance) {
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
                    child_stop::stop_child(self.store.clone(), self.clients.clone(), id);
                }
                let _ = self.me.send(EngineMsg::Cancelled { id });
                continue;
            }
            t.place = Place::Waiting(wait);
            self.waits.began();
        }
        for (id, request) in cycle.callbacks {
            if let Some(Place::Waiting(_)) = self.tasks.get(&id).map(|t| &t.place) {
                callback::send(self.store.clone(), id, request);
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
                let _ = self
                    .dispatcher
                    .send(DispatchMsg::OwnershipChecked(generation));
            } else {
                let _ = self.me.send(EngineMsg::CheckOwnership { generation });
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
