//! Stopping tasks from outside their run: an owner's kill, and abandoning (see the module
//! docs of [`super`]) on a lost registry lease or when shutdown's grace period ran out.

use super::Executor;
use super::kill::StopReason;
use super::table::{RunningTask, TaskKey};
use shoal_common::proto::KillRequest;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

impl Executor {
    /// Kills a running task attempt; false if it is not running here.
    /// A kill from an owner older than the newest seen for the instance is refused: a
    /// frozen old owner must not kill what its successor drives.
    pub(crate) fn kill(&self, kill: &KillRequest) -> bool {
        let (task_instance_id, attempt) = (kill.task_instance_id, kill.attempt);
        let task = {
            let table = self.table.lock().expect("task table lock");
            if table
                .fences
                .newest(kill.workflow_instance_id)
                .is_some_and(|newest| kill.owner_epoch < newest)
            {
                warn!(
                    task_instance_id,
                    attempt,
                    epoch = kill.owner_epoch,
                    "kill from a superseded owner refused"
                );
                return false;
            }
            table
                .running
                .get(&TaskKey {
                    task_instance_id,
                    attempt,
                })
                .cloned()
        };
        match task {
            Some(task) => {
                info!(task_instance_id, attempt, "task kill requested");
                task.kill.request();
                true
            }
            None => false,
        }
    }

    /// Abandons every running task (see the module docs). Returns how many.
    pub(crate) fn abandon_all(&self) -> usize {
        self.abandon(|_| true)
    }

    /// Abandons the running tasks accepted while fewer than `generation` leases were lost:
    /// those of the lease that was just lost. Returns how many.
    pub(crate) fn abandon_older(&self, generation: u64) -> usize {
        self.abandon(|t| t.generation < generation)
    }

    fn abandon(&self, which: impl Fn(&RunningTask) -> bool) -> usize {
        let tasks: Vec<(TaskKey, Arc<RunningTask>)> = {
            let table = self.table.lock().expect("task table lock");
            let tasks: Vec<_> = table
                .running
                .iter()
                .filter(|(_, t)| !t.abandoned() && which(t))
                .map(|(k, t)| (*k, t.clone()))
                .collect();
            // Marked under the table lock: a task still in the table has not yet queued its
            // terminal event, and will see the mark when it does (see `report`).
            for (_, task) in &tasks {
                task.kill.stop(StopReason::Abandoned);
            }
            tasks
        };
        for (key, task) in &tasks {
            // Under the route lock, like every push: an event queued before the mark is
            // dropped here, one after it is never queued.
            let _route = task.route.lock().expect("route lock");
            let dropped = self.outbox.discard(key.task_instance_id, key.attempt);
            warn!(
                task_instance_id = key.task_instance_id,
                attempt = key.attempt,
                events_dropped = dropped,
                "task abandoned: killed, and nothing more is reported for it"
            );
        }
        tasks.len()
    }
}

/// Abandons the tasks of a lost registry lease, each time `lost` (the count of lost
/// leases, [`shoal_common::registry::Membership::lost`]) moves, until `stop` is cancelled.
///
/// The masters saw the worker leave when its lease expired and run its attempts again
/// elsewhere; the copies still running here must go, and their events are of no use.
pub(crate) async fn abandon_on_lease_loss(
    executor: Arc<Executor>,
    mut lost: watch::Receiver<u64>,
    stop: CancellationToken,
) {
    loop {
        // Cancellation-safe: `cancelled` and `watch::Receiver::changed` keep no partial
        // state; a change made meanwhile is seen by the next `changed`.
        tokio::select! {
            _ = stop.cancelled() => break,
            changed = lost.changed() => if changed.is_err() { break },
        }
        let generation = *lost.borrow_and_update();
        let running = *executor.running_count.borrow();
        error!(
            lost_leases = generation,
            running,
            "registry lease lost: the masters consider this worker's tasks gone and run them \
             again elsewhere; killing every task it was running"
        );
        let abandoned = executor.abandon_older(generation);
        error!(abandoned, "tasks of the lost lease killed");
    }
}
