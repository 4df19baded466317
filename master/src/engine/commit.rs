//! Committing a cycle's writes, by what a failure means (see [`Failure`]):
//! - transient (the database is unreachable, busy, restarting): the same batch again, with
//!   backoff;
//! - refused (a value the schema rejects): the batch again, one instance at a time, so
//!   only the instances whose own writes are refused fail, with the reason recorded;
//! - unknown (the connection broke during COMMIT): nothing is replayed; the instances are
//!   reloaded from the store, as a failover would, so what did land is not written twice.

use super::{Engine, EngineMsg, alerts};
use shoal_common::types::{WorkflowState, now_ms};
use shoal_common::{Failure, metrics};
use shoal_store::{SerialEnd, WriteBatch, WriteResult};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

/// What became of a cycle's writes.
#[derive(Default)]
pub(super) struct Committed {
    pub result: WriteResult,
    /// Instances whose writes the store refused, with the reason: they end as failed.
    pub refused: Vec<(i64, String)>,
    /// Instances whose writes may or may not have landed: they are reloaded.
    pub unsure: Vec<i64>,
}

impl Committed {
    /// Instances whose writes of this cycle are not (known to be) in the store.
    pub fn excluded(&self) -> HashSet<i64> {
        let refused = self.refused.iter().map(|(id, _)| *id);
        let fenced = self.result.fenced_instances.iter().copied();
        fenced
            .chain(refused)
            .chain(self.unsure.iter().copied())
            .collect()
    }
}

/// Backoff between tries of a transient failure.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);

impl Engine {
    /// Commits the cycle's writes. Returns None when shutdown interrupted the retries.
    pub(super) async fn commit(
        &self,
        batch: &WriteBatch,
        shutdown: &CancellationToken,
    ) -> Option<Committed> {
        if batch.is_empty() {
            return Some(Committed::default());
        }
        match self.write(batch, shutdown).await? {
            Ok(result) => Some(Committed {
                result,
                ..Committed::default()
            }),
            Err((Failure::Unknown, _)) => Some(Committed {
                unsure: batch.epochs.iter().map(|(id, _)| *id).collect(),
                ..Committed::default()
            }),
            Err(_) => self.commit_apart(batch, shutdown).await,
        }
    }

    /// Writes `batch`, retrying transient failures; the error is the failure that ended it.
    async fn write(
        &self,
        batch: &WriteBatch,
        shutdown: &CancellationToken,
    ) -> Option<Result<WriteResult, (Failure, String)>> {
        let result = retry_transient(shutdown, || self.ctx.store.write_batch(batch)).await?;
        Some(result.map_err(|e| {
            let failure = e.failure();
            error!(error = %e, ?failure, "engine writes not committed");
            (failure, e.to_string())
        }))
    }

    /// After a refused batch: each instance's writes in a transaction of their own.
    async fn commit_apart(
        &self,
        batch: &WriteBatch,
        shutdown: &CancellationToken,
    ) -> Option<Committed> {
        let mut out = Committed::default();
        let mut new_ids: HashMap<i64, VecDeque<i64>> = HashMap::new();
        for (instance, part) in self.split(batch) {
            match self.write(&part, shutdown).await? {
                Ok(r) => {
                    new_ids.insert(instance, r.new_task_ids.into());
                    out.result.fenced_instances.extend(r.fenced_instances);
                    out.result.woken.extend(r.woken);
                }
                Err((Failure::Unknown, _)) => out.unsure.push(instance),
                Err((_, reason)) => out.refused.push((instance, reason)),
            }
        }
        // In the order of the whole batch, as `after_commit` lines them up with its creates.
        for t in &batch.new_tasks {
            if let Some(id) = new_ids
                .get_mut(&t.workflow_instance_id)
                .and_then(VecDeque::pop_front)
            {
                out.result.new_task_ids.push(id);
            }
        }
        Some(out)
    }

    /// The batch cut into one batch per instance.
    pub(super) fn split(&self, batch: &WriteBatch) -> Vec<(i64, WriteBatch)> {
        let mut parts: HashMap<i64, WriteBatch> = HashMap::new();
        for &(id, epoch) in &batch.epochs {
            parts.entry(id).or_default().epochs.push((id, epoch));
        }
        for t in &batch.new_tasks {
            parts
                .entry(t.workflow_instance_id)
                .or_default()
                .new_tasks
                .push(t.clone());
        }
        for u in &batch.task_updates {
            if let Some(t) = self.tasks.get(&u.id) {
                parts
                    .entry(t.instance)
                    .or_default()
                    .task_updates
                    .push(u.clone());
            }
        }
        for u in &batch.instance_updates {
            parts
                .entry(u.id)
                .or_default()
                .instance_updates
                .push(u.clone());
        }
        for c in &batch.children {
            parts
                .entry(c.parent_instance_id)
                .or_default()
                .children
                .push(c.clone());
        }
        for e in &batch.serial_ended {
            parts
                .entry(e.instance)
                .or_default()
                .serial_ended
                .push(e.clone());
        }
        for a in &batch.alerts {
            parts
                .entry(a.workflow_instance_id)
                .or_default()
                .alerts
                .push(a.clone());
        }
        let mut parts: Vec<_> = parts.into_iter().collect();
        parts.sort_unstable_by_key(|(id, _)| *id);
        parts
    }
}

impl Engine {
    /// Ends an instance whose own writes the store refused: what it runs is killed, and
    /// it is recorded as failed with the reason (fenced by its epoch, like every write).
    pub(super) fn fail(&mut self, instance: i64, reason: String) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        error!(instance_id = instance, %reason, "the store refused this instance's writes; it fails");
        // What any end of a run brings: its alerts, and the next waiting serial run.
        let now = now_ms();
        let def = run.rt.definition();
        let follow_up = WriteBatch {
            epochs: vec![(instance, run.epoch)],
            alerts: alerts::on_end(run, WorkflowState::Failure, now),
            serial_ended: (!def.execution_type.is_parallel())
                .then(|| SerialEnd {
                    instance,
                    project: run.project.clone(),
                    workflow: def.name.clone(),
                    owner: self.ctx.master_addr.clone(),
                })
                .into_iter()
                .collect(),
            ..WriteBatch::default()
        };
        let (epoch, nodes) = (run.epoch, run.task_ids.len());
        for node in 0..nodes {
            self.kill(instance, node);
        }
        if let Some(counter) = metrics::instances_finished(WorkflowState::Failure) {
            counter.inc();
        }
        self.drop_run(instance);
        let (store, me, stop) = (
            self.ctx.store.clone(),
            self.ctx.me.clone(),
            self.ctx.shutdown.clone(),
        );
        let reason = format!("the master could not record this run's progress: {reason}");
        tokio::spawn(async move {
            let fail = || store.fail_instance(instance, epoch, &reason);
            let Some(failed) = retry_transient(&stop, fail).await else {
                return;
            };
            let written = match failed {
                Ok(true) => match retry_transient(&stop, || store.write_batch(&follow_up)).await {
                    Some(written) => written,
                    None => return,
                },
                Ok(false) => return, // another master has it, or it ended meanwhile
                Err(e) => Err(e),
            };
            match written {
                Ok(r) if !r.woken.is_empty() => {
                    let _ = me.send(EngineMsg::Claimed(r.woken));
                }
                Ok(_) => {}
                Err(e) => error!(instance_id = instance, error = %e, "cannot record the failure"),
            }
        });
    }

    /// Drops a run whose last writes may or may not have landed and takes it over again
    /// from the store, epoch bumped, as a failover would: it is restored from the rows
    /// that are really there and its attempts on workers are adopted.
    pub(super) fn reload(&mut self, instance: i64) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let epoch = run.epoch;
        warn!(
            instance_id = instance,
            "the outcome of this instance's last writes is unknown; reloading it from the store"
        );
        self.drop_run(instance);
        let (store, me, addr) = (
            self.ctx.store.clone(),
            self.ctx.me.clone(),
            self.ctx.master_addr.clone(),
        );
        tokio::spawn(async move {
            let mut delay = FIRST_RETRY;
            loop {
                let msg = match crate::take_over::take_over(&store, instance, epoch, &addr).await {
                    Ok(Some(claimed)) => EngineMsg::Claimed(vec![claimed]),
                    Ok(None) => EngineMsg::NotReloaded(instance),
                    Err(e) => {
                        warn!(instance_id = instance, error = %e, "cannot reload the instance yet");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(LAST_RETRY);
                        continue;
                    }
                };
                let _ = me.send(msg);
                return;
            }
        });
    }
}

/// Runs `op` until it succeeds or fails other than transiently, with backoff; None when
/// `stop` is cancelled while it waits to try again.
async fn retry_transient<T, Fut>(
    stop: &CancellationToken,
    mut op: impl FnMut() -> Fut,
) -> Option<shoal_common::Result<T>>
where
    Fut: std::future::Future<Output = shoal_common::Result<T>>,
{
    let mut delay = FIRST_RETRY;
    loop {
        match op().await {
            Err(e) if e.failure() == Failure::Transient => {
                error!(error = %e, retry_in_ms = delay.as_millis() as u64, "database unavailable");
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(LAST_RETRY);
            }
            result => return Some(result),
        }
    }
}
