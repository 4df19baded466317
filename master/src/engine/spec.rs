//! Turns a runtime's task into what a worker receives: parameters resolved, the command
//! expanded.

use super::Run;
use crate::queue::QueuedTask;
use crate::runtime::Node;
use shoal_common::params::expand;
use shoal_common::proto::TaskSpec;
use shoal_common::store::Params;

pub(super) fn build(
    run: &Run,
    node: Node,
    id: i64,
    attempt: i32,
    master_addr: &str,
) -> Result<QueuedTask, String> {
    let def = &run.rt.definition().tasks[node];
    let params = run
        .rt
        .task_params(node, &run.start_params, &builtins(run, id));
    let mut task = def.clone();
    if let Some(cmd) = &def.command {
        task.command = Some(expand(cmd, &params).map_err(|e| format!("task '{}': {e}", def.name))?);
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
        group: def.worker_group.clone(),
        instance_priority: run.priority,
        task_priority: def.priority,
    })
}

/// Built-in parameters, DolphinScheduler's names; dates from the instance's start time.
fn builtins(run: &Run, task_instance_id: i64) -> Params {
    let start = chrono::DateTime::from_timestamp_millis(run.started_at)
        .unwrap_or_default()
        .naive_utc();
    let biz = start - chrono::Duration::days(1);
    Params::from([
        (
            "system.workflow.instance.id".to_string(),
            run.instance_id.to_string(),
        ),
        (
            "system.task.instance.id".to_string(),
            task_instance_id.to_string(),
        ),
        (
            "system.datetime".to_string(),
            start.format("%Y%m%d%H%M%S").to_string(),
        ),
        (
            "system.biz.date".to_string(),
            biz.format("%Y%m%d").to_string(),
        ),
        (
            "system.biz.curdate".to_string(),
            start.format("%Y%m%d").to_string(),
        ),
    ])
}
