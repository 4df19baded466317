//! Notices dead nodes and acts for them.
//!
//! A worker that leaves the cluster takes its running tasks with it: the engine re-runs
//! them as new attempts. A worker that registered again under its address as a new
//! process (a quick restart: its entry never went away), or after a lapsed lease, is
//! rechecked by the engine, and so, every `reconcile` interval, is every worker. An
//! instance whose master is gone (no live master owns it) is
//! taken over with an epoch bump and rebuilt from the store; this also picks up what a
//! restarted `shoal standalone` left running, and anything a crashed master left half done.

use crate::engine::EngineMsg;
use crate::take_over::take_over;
use shoal_common::metrics;
use shoal_common::registry::NodeWatch;
use shoal_store::Store;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// Instances taken over per pass; the next pass takes more.
const TAKEOVER_BATCH: u64 = 200;

pub struct Failover {
    pub store: Store,
    /// This master's address, as registered.
    pub me: String,
    pub masters: NodeWatch,
    pub workers: NodeWatch,
    /// Fallback check interval; membership changes trigger a check at once.
    pub poll: Duration,
    /// How often the engine's reconciler sweeps (see `engine::reconcile`).
    pub reconcile: Duration,
}

impl Failover {
    pub async fn run(
        mut self,
        engine: mpsc::UnboundedSender<EngineMsg>,
        shutdown: CancellationToken,
    ) {
        let mut known_workers = incarnations(&self.workers);
        let mut known_masters = HashSet::new();
        let mut tick = tokio::time::interval(self.poll);
        let mut reconcile = tokio::time::interval(self.reconcile);
        reconcile.reset();
        loop {
            // Cancellation-safe: watch changes and ticks only trigger another check.
            // Heartbeats change the membership often; only a changed set of masters (or
            // the fallback tick) is worth a look at the store.
            let ticked = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = self.masters.changed() => if r.is_err() { break } else { false },
                r = self.workers.changed() => if r.is_err() { break } else { false },
                _ = tick.tick() => true,
                _ = reconcile.tick() => {
                    if engine.send(EngineMsg::Reconcile).is_err() { break }
                    continue;
                }
            };
            let workers = incarnations(&self.workers);
            let (mut gone, mut restarted) = (Vec::new(), Vec::new());
            for (addr, started) in &known_workers {
                match workers.get(addr) {
                    None => gone.push(addr.clone()),
                    Some(now) if now != started => restarted.push(addr.clone()),
                    Some(_) => {}
                }
            }
            known_workers = workers;
            if !gone.is_empty() {
                info!(workers = ?gone, "workers left the cluster");
                if engine.send(EngineMsg::WorkersGone(gone)).is_err() {
                    break;
                }
            }
            if !restarted.is_empty() {
                info!(workers = ?restarted, "workers restarted or lost their lease; checking what they have");
                if engine.send(EngineMsg::WorkersRestarted(restarted)).is_err() {
                    break;
                }
            }
            let masters = addrs(&self.masters);
            if !ticked && masters == known_masters {
                continue;
            }
            known_masters = masters;
            // Until this master is registered (or after it lost its lease) it takes nothing.
            if !known_masters.contains(&self.me) {
                continue;
            }
            let live: Vec<String> = known_masters.iter().cloned().collect();
            if let Err(e) = self.take_orphans(&live, &engine).await {
                error!(error = %e, "taking over orphaned instances failed");
            }
        }
    }

    async fn take_orphans(
        &self,
        masters: &[String],
        engine: &mpsc::UnboundedSender<EngineMsg>,
    ) -> shoal_common::Result<()> {
        let orphans = self
            .store
            .orphaned_instances(masters, TAKEOVER_BATCH)
            .await?;
        let (mut taken, mut failed) = (Vec::new(), None);
        for (id, epoch) in orphans {
            match take_over(&self.store, id, epoch, &self.me).await {
                Ok(Some(claimed)) => {
                    metrics::FAILOVERS.inc();
                    info!(
                        instance_id = id,
                        previous_epoch = epoch,
                        "instance taken over from a dead master"
                    );
                    taken.push(claimed);
                }
                Ok(None) => {}
                // The others are still taken; this one is again at the next pass.
                Err(e) => {
                    if e.failure() == shoal_common::Failure::Unknown {
                        crate::engine::sweep_soon(engine);
                    }
                    failed = Some(e);
                }
            }
        }
        if !taken.is_empty() {
            let _ = engine.send(EngineMsg::Claimed(taken));
        }
        failed.map_or(Ok(()), Err)
    }
}

fn addrs(watch: &NodeWatch) -> HashSet<String> {
    watch.current().into_iter().map(|n| n.addr).collect()
}

/// Each live node's address with its start time and lost leases, which tell a restarted
/// process, or one that dropped its work with a lapsed lease, apart.
fn incarnations(watch: &NodeWatch) -> HashMap<String, (i64, u64)> {
    watch
        .current()
        .into_iter()
        .map(|n| (n.addr, (n.started_at, n.lapses)))
        .collect()
}
