//! The end of a cycle: its writes committed in one batch, then what follows from them.

use super::tasks::timer;
use super::*;

impl Engine {
    /// Commits the cycle's writes, retrying while the database is unreachable. Returns
    /// None when shutdown interrupted the retries.
    pub(super) async fn commit(
        &self,
        batch: &WriteBatch,
        shutdown: &CancellationToken,
    ) -> Option<WriteResult> {
        if batch.is_empty() {
            return Some(WriteResult::default());
        }
        let mut delay = Duration::from_millis(100);
        loop {
            match self.store.write_batch(batch).await {
                Ok(r) => return Some(r),
                Err(e) => {
                    error!(error = %e, retry_in_ms = delay.as_millis() as u64, "cannot commit engine writes");
                    tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    pub(super) fn after_commit(&mut self, cycle: Cycle, result: WriteResult) {
        self.lost.extend(result.fenced_instances.iter().copied());
        // Serial runs that start now that their predecessor ended: ours to drive.
        if !result.woken.is_empty() {
            let _ = self.me.send(EngineMsg::Claimed(result.woken));
        }
        for (ack, seqs) in cycle.acks {
            let durable = seqs
                .into_iter()
                .filter(|(_, instance)| !self.lost.contains(instance));
            let _ = ack.send(durable.map(|(seq, _)| seq).collect());
        }
        for (reply, outcome) in cycle.replies {
            let _ = reply.send(outcome);
        }
        for &instance in &result.fenced_instances {
            warn!(
                instance_id = instance,
                "instance was taken over by another master; dropping it"
            );
            self.drop_run(instance);
        }
        for id in cycle.ended_tasks {
            if let Some(t) = self.tasks.remove(&id)
                && let Some(worker) = t.place.worker()
            {
                let worker = worker.to_string();
                let _ = self.dispatcher.send(DispatchMsg::Finished { worker, id });
            }
        }
        // The store wrote no task of a fenced instance: line up the ids with the rest.
        let fenced: HashSet<i64> = result.fenced_instances.iter().copied().collect();
        let creates = cycle
            .creates
            .into_iter()
            .filter(|pc| !fenced.contains(&pc.instance));
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
                },
            );
            match delay {
                Some(delay) => timer(&self.me, pc.instance, pc.node, pc.attempt, delay),
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
            t.place = Place::Waiting;
            self.waits.tasks.insert(id, wait);
        }
        self.waits.tasks.retain(|id, _| self.tasks.contains_key(id));
        self.waits.poll(&self.store, &self.me);
        for (instance, node) in cycle.adoptions {
            self.adopt(instance, node);
        }
        if !cycle.probes.is_empty() {
            self.probe(cycle.probes);
        }
        // After the lost runs were dropped (their queued tasks withdrawn) above.
        if let Some(generation) = cycle.check_ownership {
            let _ = self
                .dispatcher
                .send(DispatchMsg::OwnershipChecked(generation));
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
    }
}
