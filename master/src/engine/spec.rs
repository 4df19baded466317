//! Turns a runtime's task into what a worker receives: parameters resolved, every text
//! field the task runs expanded.

use super::Run;
use crate::queue::QueuedTask;
use crate::runtime::Node;
use shoal_common::params::{Context, builtins, expand};
use shoal_common::proto::TaskSpec;

pub(super) fn build(
    run: &Run,
    node: Node,
    id: i64,
    attempt: i32,
    master_addr: &str,
) -> Result<QueuedTask, String> {
    let def = &run.rt.definition().tasks[node];
    // Manual runs are "scheduled" at their start time; cron runs will carry theirs.
    let schedule_time = chrono::DateTime::from_timestamp_millis(run.started_at)
        .unwrap_or_default()
        .naive_utc();
    let params = run.rt.task_params(
        node,
        &run.start_params,
        &builtins(run.instance_id, id, schedule_time),
    );
    let ctx = Context {
        params: &params,
        schedule_time,
    };
    let expand = |text: &mut String| -> Result<(), String> {
        *text = expand(text, &ctx).map_err(|e| format!("task '{}': {e}", def.name))?;
        Ok(())
    };
    let mut task = def.clone();
    for text in [task.command.as_mut(), task.script.as_mut()]
        .into_iter()
        .flatten()
    {
        expand(text)?;
    }
    if let Some(http) = task.http.as_mut() {
        expand(&mut http.url)?;
        for v in http.headers.values_mut().chain(http.body.as_mut()) {
            expand(v)?;
        }
    }
    if let Some(sql) = task.sql.as_mut() {
        expand(&mut sql.query)?;
    }
    let definition_json = serde_json::to_string(&task).map_err(|e| e.to_string())?;
    Ok(QueuedTask {
        spec: TaskSpec {
            task_instance_id: id,
            workflow_instance_id: run.instance_id,
            attempt,
            name: def.name.clone(),
            task_type: def.task_type.clone(),
            definition_json,
            params: params.into_iter().collect(),
            master_addr: master_addr.to_string(),
            owner_epoch: run.epoch,
        },
        queued_at: std::time::Instant::now(),
        group: def.worker_group.clone(),
        instance_priority: run.priority,
        task_priority: def.priority,
    })
}
