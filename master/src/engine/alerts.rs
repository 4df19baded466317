//! The alerts a run's end (or timeout) writes to the outbox, per the workflow's `alerts`.

use super::Run;
use serde_json::json;
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

/// Alerts of the channels that subscribed to `on` (or to any event).
fn alerts(
    run: &Run,
    on: Option<AlertOn>,
    event: &str,
    state: WorkflowState,
    ended_at: Option<i64>,
) -> Vec<NewAlert> {
    let def = run.rt.definition();
    let mut channels: Vec<&str> = def
        .alerts
        .iter()
        .filter(|a| a.on == AlertOn::Any || Some(a.on) == on)
        .map(|a| a.channel.as_str())
        .collect();
    channels.sort_unstable();
    channels.dedup();
    if channels.is_empty() {
        return Vec::new();
    }
    let payload = json!({
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
    });
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
