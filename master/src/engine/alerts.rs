//! The alerts a run's end or timeout writes to the outbox, per the workflow's `alerts`,
//! and those of a task that failed for good or passed its timeout, per the workflow's and
//! the task's.

use super::Run;
use serde_json::Value;
use serde_json::json;
use shoal_common::definition::AlertSpec;
use shoal_common::types::{AlertOn, WorkflowState, ms_to_rfc3339};
use shoal_store::NewAlert;

/// Alerts for the run's end in `state`; a pause is no end.
pub(super) fn on_end(run: &Run, state: WorkflowState, now: i64) -> Vec<NewAlert> {
    let on = match state {
        WorkflowState::Success => Some(AlertOn::Success),
        WorkflowState::Failure => Some(AlertOn::Failure),
        WorkflowState::Stopped => None,
        _ => return Vec::new(),
    };
    alerts(run, on, state.as_str(), state, Some(now))
}

/// Alerts for the run passing the workflow's timeout (it may run on: strategy `warn`).
pub(super) fn on_timeout(run: &Run) -> Vec<NewAlert> {
    alerts(run, Some(AlertOn::Timeout), "timeout", run.rt.state(), None)
}

/// Alerts of the channels that subscribed to `on` (or to any end of a run).
fn alerts(
    run: &Run,
    on: Option<AlertOn>,
    event: &str,
    state: WorkflowState,
    ended_at: Option<i64>,
) -> Vec<NewAlert> {
    let def = run.rt.definition();
    let payload = || {
        json!({
            "event": event,
            "workflow_instance_id": run.instance_id,
            "project": run.project,
            "workflow": def.name,
            "state": state,
            "run": run.run_no,
            "started_at": ms_to_rfc3339(run.started_at),
            "ended_at": ended_at.map(ms_to_rfc3339),
            "failed_tasks": run.rt.failed_tasks(),
            "message": run.rt.end_message(),
        })
    };
    let subscribed = |a: &AlertSpec| a.on == AlertOn::Any || Some(a.on) == on;
    outbox(
        run,
        event,
        def.alerts.iter().filter(|a| subscribed(a)),
        payload,
    )
}

/// Alerts for task `node`'s attempt failing for good or passing its timeout (`on`), to the
/// channels the workflow or the task subscribed to it.
pub(super) fn on_task(
    run: &Run,
    node: usize,
    attempt: i32,
    on: AlertOn,
    message: Option<&str>,
) -> Vec<NewAlert> {
    let def = run.rt.definition();
    let task = &def.tasks[node];
    let payload = || {
        json!({
            "event": on,
            "workflow_instance_id": run.instance_id,
            "project": run.project,
            "workflow": def.name,
            "run": run.run_no,
            "task": task.name,
            "task_instance_id": run.task_ids[node],
            "attempt": attempt,
            "message": message,
        })
    };
    let subscribed = def.alerts.iter().chain(&task.alerts).filter(|a| a.on == on);
    outbox(run, on.as_str(), subscribed, payload)
}

/// One alert per channel of `subscribed` (each once), all carrying `payload`.
fn outbox<'a>(
    run: &Run,
    event: &str,
    subscribed: impl Iterator<Item = &'a AlertSpec>,
    payload: impl FnOnce() -> Value,
) -> Vec<NewAlert> {
    let mut channels: Vec<&str> = subscribed.map(|a| a.channel.as_str()).collect();
    channels.sort_unstable();
    channels.dedup();
    if channels.is_empty() {
        return Vec::new();
    }
    let payload = payload();
    channels
        .into_iter()
        .map(|channel| NewAlert {
            workflow_instance_id: run.instance_id,
            channel: channel.to_string(),
            event: event.to_string(),
            payload: payload.clone(),
        })
        .collect()
}
