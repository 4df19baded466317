//! Cron firing and backfill driving, done by the leader master only.
//!
//! The loop sleeps until the next fire of any enabled schedule, at most [`POLL`], so a
//! created, changed or enabled schedule is seen within a second. Each pass plans every
//! schedule against its stored cursor (misfire policy included) and writes the fires with
//! the store's compare-and-set on that cursor: a master that lost the lead without
//! knowing it, or two passes racing, cannot fire a schedule time twice.

use shoal_common::registry::Leadership;
use shoal_common::types::now_ms;
use shoal_store::Store;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Longest sleep between passes; also how often backfills are advanced.
pub const POLL: Duration = Duration::from_secs(1);
/// Fires written per schedule per pass (`run_all` after a long downtime catches up in
/// batches, without a pause between them).
const FIRE_BATCH: usize = 100;

pub struct Cron {
    pub store: Store,
    pub leadership: Leadership,
}

impl Cron {
    pub async fn run(self, shutdown: CancellationToken) {
        let mut backfills_at = Instant::now();
        loop {
            let wait = if self.leadership.is_leader() {
                if backfills_at <= Instant::now() {
                    backfills_at = Instant::now() + POLL;
                    if let Err(e) = self.store.advance_backfills().await {
                        warn!(error = %e, "cannot advance backfills; trying again");
                    }
                }
                self.fire_due().await.min(backfills_at - Instant::now())
            } else {
                POLL
            };
            // Both arms are cancellation-safe: a token and a sleep.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Fires what is due now; returns how long until the next fire (at most [`POLL`]).
    async fn fire_due(&self) -> Duration {
        let now = now_ms();
        let schedules = match self.store.enabled_schedules().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot read schedules; trying again");
                return POLL;
            }
        };
        let mut next: Option<i64> = None;
        for schedule in schedules {
            let cron = match schedule.spec.check() {
                Ok(cron) => cron,
                Err(e) => {
                    warn!(schedule_id = schedule.id, error = %e, "schedule cannot fire");
                    continue;
                }
            };
            let window = schedule.spec.window();
            let plan = cron.plan(
                window,
                schedule.fired_until,
                now,
                schedule.spec.misfire,
                FIRE_BATCH,
            );
            let mut cursor = schedule.fired_until;
            if plan.cursor != cursor {
                match self
                    .store
                    .fire_schedule(schedule.id, cursor, plan.cursor, &plan.fires)
                    .await
                {
                    Ok(true) => {
                        if !plan.fires.is_empty() {
                            info!(schedule_id = schedule.id, workflow = %schedule.workflow, fires = plan.fires.len(), "schedule fired");
                        }
                        cursor = plan.cursor;
                    }
                    // Changed meanwhile (edited, disabled, or fired elsewhere): the next
                    // pass reads it again.
                    Ok(false) => {}
                    Err(e) => warn!(schedule_id = schedule.id, error = %e, "cannot fire schedule"),
                }
            }
            if let Some(t) = cron.next_due(window, cursor) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        let until = next.map_or(POLL, |t| {
            Duration::from_millis(u64::try_from(t - now_ms()).unwrap_or(0))
        });
        until.min(POLL)
    }
}
