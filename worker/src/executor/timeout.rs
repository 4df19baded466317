//! Task timeouts: a timer beside the run that stops the task (`fail`) or writes a warning
//! (`warn`) when the task's `timeout` passes.

use super::Outcome;
use super::kill::StopReason;
use super::table::RunningTask;
use super::task_log::TaskLog;
use shoal_common::definition::TimeoutStrategy;
use shoal_common::proto::TaskSpec;
use std::time::Duration;
use tracing::{info, warn};

/// Runs `run` under the task's timeout; at the deadline `passed` is told (it reports it).
/// `fail`: the task is stopped (the runner then returns as if killed, and the caller turns
/// that into a timeout failure). `warn`: one warning line in the log, and the task runs on.
pub(super) async fn with_timeout(
    run: impl Future<Output = Outcome>,
    limit: Duration,
    strategy: TimeoutStrategy,
    task: &RunningTask,
    log: &TaskLog,
    spec: &TaskSpec,
    passed: impl FnOnce(String),
) -> Outcome {
    let mut passed = Some(passed);
    tokio::pin!(run);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    let mut expired = false;
    let limit_text = shoal_common::duration::format(limit);
    loop {
        // Both arms are cancellation-safe: the run future and the timer are pinned here and
        // polled again on the next turn, never dropped mid-way.
        tokio::select! {
            outcome = &mut run => return outcome,
            _ = &mut deadline, if !expired => {
                expired = true;
                if let Some(passed) = passed.take() {
                    passed(format!("passed its timeout of {limit_text}"));
                }
                match strategy {
                    TimeoutStrategy::Warn => {
                        log.note(&format!("warning: task exceeded its timeout of {limit_text}"));
                        warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, timeout = %limit_text, "task exceeded its timeout");
                    }
                    TimeoutStrategy::Fail => {
                        log.note(&format!("timed out after {limit_text}, stopping the task"));
                        info!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, timeout = %limit_text, "task timed out, stopping it");
                        task.kill.stop(StopReason::TimedOut);
                    }
                }
            }
        }
    }
}
