//! Asking workers what they really have, and catching work nobody drives.
//!
//! Three uses. After a failover, attempts the old owner never recorded on a worker are
//! looked for on every live worker before they are queued again ([`Engine::probe`]).
//! A worker that restarted under the same address (its registry entry never went away)
//! lost its attempts; and, as a periodic safety net, every attempt this master believes
//! is out on a worker is checked against that worker ([`Engine::recheck`]): the ones it
//! does not know are lost and run again. The sweep also looks in the store for
//! instances this master owns but does not drive, and takes them up again.

use super::{Engine, EngineMsg};
use shoal_common::proto::TaskAttempt;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tracing::{info, warn};

/// How often a probe asks again a live worker that did not answer.
const PROBE_RETRY: Duration = Duration::from_millis(500);

impl Engine {
    fn attempts(&self, ids: impl IntoIterator<Item = i64>) -> Vec<TaskAttempt> {
        ids.into_iter()
            .filter_map(|id| {
                let t = self.tasks.get(&id)?;
                Some(TaskAttempt {
                    task_instance_id: id,
                    attempt: t.attempt,
                    workflow_instance_id: t.instance,
                    owner_epoch: self.runs.get(&t.instance)?.epoch,
                })
            })
            .collect()
    }

    /// Asks every live worker which of these attempts it has, fencing the old owner out
    /// on each (see the `Probe` RPC); the answer comes back as `Probed`. Until every live
    /// worker has answered the attempts stay unqueued: one that could not be asked may
    /// have them, or receive them late from the old owner. A worker that leaves the
    /// cluster meanwhile no longer counts (its attempts are lost with it).
    pub(super) fn probe(&self, ids: Vec<i64>) {
        let tasks = self.attempts(ids.iter().copied());
        let (clients, me, workers) = (
            self.ctx.clients.clone(),
            self.ctx.me.clone(),
            self.ctx.workers.clone(),
        );
        tokio::spawn(async move {
            let (mut found, mut abandoned) = (Vec::new(), Vec::new());
            let mut answered = HashSet::new();
            loop {
                let pending: Vec<String> = workers
                    .current()
                    .into_iter()
                    .map(|w| w.addr)
                    .filter(|w| !answered.contains(w))
                    .collect();
                if pending.is_empty() {
                    break;
                }
                if me.is_closed() {
                    return;
                }
                let mut unanswered = false;
                for worker in pending {
                    match clients.probe(&worker, tasks.clone()).await {
                        Ok(answer) => {
                            found.extend(answer.known.into_iter().map(|id| (id, worker.clone())));
                            abandoned.extend(answer.abandoned);
                            answered.insert(worker);
                        }
                        Err(error) => {
                            unanswered = true;
                            warn!(
                                %worker,
                                %error,
                                "cannot ask a worker about adopted tasks; they wait until it answers or leaves"
                            )
                        }
                    }
                }
                if unanswered {
                    tokio::time::sleep(PROBE_RETRY).await;
                }
            }
            let _ = me.send(EngineMsg::Probed {
                found,
                abandoned,
                asked: ids,
            });
        });
    }

    /// Checks the attempts recorded on `workers` (all of them: `None`) against what each
    /// worker has; each answer comes back as `Rechecked`. A worker that cannot be asked is
    /// left alone (if it is gone, the membership watch says so).
    pub(super) fn recheck(&self, workers: Option<&[String]>) {
        let mut by_worker: HashMap<String, Vec<i64>> = HashMap::new();
        for (id, t) in &self.tasks {
            if let Some(w) = t.place.worker()
                && workers.is_none_or(|ws| ws.iter().any(|x| x == w))
            {
                by_worker.entry(w.to_string()).or_default().push(*id);
            }
        }
        for (worker, ids) in by_worker {
            let tasks = self.attempts(ids);
            let (clients, me) = (self.ctx.clients.clone(), self.ctx.me.clone());
            tokio::spawn(async move {
                let asked: Vec<i64> = tasks.iter().map(|t| t.task_instance_id).collect();
                match clients.probe(&worker, tasks).await {
                    Ok(answer) => {
                        // Abandoned attempts are lost too: they will not finish there.
                        let known: HashSet<i64> = answer.known.into_iter().collect();
                        let unknown = asked.into_iter().filter(|id| !known.contains(id));
                        let _ = me.send(EngineMsg::Rechecked {
                            worker,
                            unknown: unknown.collect(),
                        });
                    }
                    Err(error) => warn!(%worker, %error, "cannot check a worker's attempts"),
                }
            });
        }
    }

    /// The attempts `worker` did not know or gave up: if they are still recorded there,
    /// they were lost (the worker restarted, or dropped them with a lapsed lease) and run
    /// again as a new attempt.
    pub(super) fn lost_on(&self, worker: &str, unknown: Vec<i64>) -> Vec<i64> {
        unknown
            .into_iter()
            .filter(|id| {
                self.tasks
                    .get(id)
                    .is_some_and(|t| t.place.worker() == Some(worker))
            })
            .inspect(|id| {
                warn!(
                    task_instance_id = id,
                    instance_id = self.tasks[id].instance,
                    %worker,
                    "reconciler: the worker no longer has this attempt; it runs again"
                )
            })
            .collect()
    }

    /// Looks in the store for instances this master owns, in a driven state, that it does
    /// not drive; the answer comes back as `Unattended`. See also [`sweep_soon`].
    pub(super) fn sweep_owned(&self) {
        let (store, me, addr) = (
            self.ctx.store.clone(),
            self.ctx.me.clone(),
            self.ctx.master_addr.clone(),
        );
        tokio::spawn(async move {
            match store.owned_instances(&addr).await {
                Ok(owned) => {
                    let _ = me.send(EngineMsg::Unattended(owned));
                }
                Err(e) => warn!(error = %e, "reconciler: cannot list owned instances"),
            }
        });
    }

    /// Of the owned instances the store listed, those not driven here now and not at the
    /// previous sweep either (a claim may be on its way in between) are taken up again,
    /// through the same epoch-bumping takeover as a dead master's.
    pub(super) fn take_up_unattended(&mut self, owned: Vec<(i64, i64)>) {
        let runs = &self.runs;
        let again = self
            .ownership
            .unattended(owned, |id| runs.contains_key(&id));
        if again.is_empty() {
            return;
        }
        let (store, me, addr) = (
            self.ctx.store.clone(),
            self.ctx.me.clone(),
            self.ctx.master_addr.clone(),
        );
        tokio::spawn(async move {
            let mut taken = Vec::new();
            for (id, epoch) in again {
                warn!(
                    instance_id = id,
                    "reconciler: instance owned by this master but not driven; taking it up again"
                );
                match crate::take_over::take_over(&store, id, epoch, &addr).await {
                    Ok(Some(claimed)) => taken.push(claimed),
                    Ok(None) => info!(instance_id = id, "reconciler: instance moved on meanwhile"),
                    Err(e) => {
                        warn!(instance_id = id, error = %e, "reconciler: cannot take instance up")
                    }
                }
            }
            if !taken.is_empty() {
                let _ = me.send(EngineMsg::Claimed(taken));
            }
        });
    }
}

/// A write that may have made this master an instance's owner had its COMMIT's answer
/// lost (a claim of commands, a take-over): two sweeps a second apart take such an
/// instance up now rather than one to two reconcile intervals later. Two, because a sweep
/// takes up only what the one before found idle too (a claim may be on its way in between).
pub fn sweep_soon(engine: &tokio::sync::mpsc::UnboundedSender<EngineMsg>) {
    let engine = engine.clone();
    tokio::spawn(async move {
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if engine.send(EngineMsg::SweepOwned).is_err() {
                return;
            }
        }
    });
}
