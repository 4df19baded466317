//! Retention: the leader master deletes the events kept for waits that did not begin in
//! time (each kept until the api-server's `--event-retention` said) and, with
//! `--retention`, instances that ended longer ago, with their task rows and kept logs, a
//! small batch per transaction with a pause between batches, so that the deletes never
//! hold up scheduling (see [`Store::prune_ended`]).

use shoal_common::registry::Leadership;
use shoal_common::types::now_ms;
use shoal_store::{Pruned, Store};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often the leader looks for what has expired (more often for a retention shorter
/// than ten times this).
const EVERY: Duration = Duration::from_secs(60);
/// Instances deleted per transaction (each with all its task rows).
const BATCH: u64 = 200;
/// The pause between two batches of one pass.
const BREATHE: Duration = Duration::from_millis(50);

pub struct Retention {
    pub store: Store,
    pub leadership: Leadership,
    /// How long ended instances are kept (None: for ever).
    pub keep: Option<Duration>,
}

impl Retention {
    pub async fn run(self, shutdown: CancellationToken) {
        let every = self.keep.map_or(EVERY, |keep| {
            (keep / 10).clamp(Duration::from_millis(100), EVERY)
        });
        loop {
            if self.leadership.is_leader() {
                self.sweep_events().await;
                if let Some(keep) = self.keep {
                    self.pass(keep, &shutdown).await;
                }
            }
            // Both arms are cancellation-safe: a token and a sleep.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// Deletes the events kept past their time (they complete nothing any more).
    async fn sweep_events(&self) {
        match self.store.sweep_kept_events(now_ms()).await {
            Ok(0) => {}
            Ok(events) => info!(events, "deleted kept events past their retention"),
            Err(e) => warn!(error = %e, "cannot delete expired kept events; trying again later"),
        }
    }

    /// Deletes batches until one is not full (or the lead or the process goes).
    async fn pass(&self, keep: Duration, shutdown: &CancellationToken) {
        let cutoff = now_ms() - keep.as_millis() as i64;
        let mut total = Pruned::default();
        loop {
            match self.store.prune_ended(cutoff, BATCH).await {
                Ok(p) => {
                    total.instances += p.instances;
                    total.tasks += p.tasks;
                    total.trigger_calls += p.trigger_calls;
                    total.trigger_messages += p.trigger_messages;
                    if p.instances < BATCH {
                        break;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "cannot delete expired instances; trying again later");
                    break;
                }
            }
            if shutdown.is_cancelled() || !self.leadership.is_leader() {
                break;
            }
            tokio::time::sleep(BREATHE).await;
        }
        if total != Pruned::default() {
            info!(
                instances = total.instances,
                tasks = total.tasks,
                trigger_calls = total.trigger_calls,
                trigger_messages = total.trigger_messages,
                "deleted what ended before the retention"
            );
        }
    }
}
