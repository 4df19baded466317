//! The runs a run starts: a sub_workflow (or foreach) task's child, and the exception
//! workflow of a failed run.

use super::task_values;
use crate::engine::Run;
use crate::runtime::Node;
use shoal_common::params::{Context, Source, expand};
use shoal_common::schedule::local_time;
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{CommandKind, WorkflowState};
use shoal_store::{ChildStart, NewCommand};

/// The child run a sub_workflow task starts: the named workflow (in the parent's project
/// unless given) with the task's `params` expanded, and for a foreach's child its element,
/// under the options a child inherits (`StartOptions::inherited`); nothing else of the
/// parent's (its start parameters reach a child only when passed).
pub(in crate::engine) fn child_start(run: &Run, node: Node, id: i64) -> Result<ChildStart, String> {
    let def = &run.rt.definition().tasks[node];
    let Some(sub) = &def.sub_workflow else {
        return Err(format!("task '{}' has no sub_workflow", def.name));
    };
    let (seen, outside, schedule_time) = task_values(run, node, id);
    let ctx = Context {
        params: &seen,
        schedule_time,
    };
    let element = outside.iter().filter(|(_, s)| **s == Source::Item);
    let mut params: Params = element
        .filter_map(|(k, _)| Some((k.clone(), seen.get(k)?.clone())))
        .collect();
    for (k, v) in &sub.params {
        let v = expand(v, &ctx).map_err(|e| format!("task '{}': {e}", def.name))?;
        params.insert(k.clone(), v);
    }
    let project = sub.project.clone().unwrap_or_else(|| run.project.clone());
    Ok(ChildStart {
        parent_instance_id: run.instance_id,
        parent_task_id: id,
        options: run.options.inherited(project == run.project),
        project,
        workflow: sub.workflow.clone(),
        params,
        priority: run.priority,
        schedule_time: run.schedule_time,
    })
}

/// The run of the workflow's exception workflow (`on_failure`) when the run ended in
/// `state`: only a failed run has one, and not a run that handles a failure itself (a
/// failing handler would start handlers without end).
pub(in crate::engine) fn exception_run(run: &Run, state: WorkflowState) -> Option<NewCommand> {
    let def = run.rt.definition();
    let handler = def.on_failure.as_ref()?;
    if state != WorkflowState::Failure || run.options.handles_failure_of.is_some() {
        return None;
    }
    // The handler gets its `params`, expanded with the failed run's parameters; not
    // those themselves (it may run in another project).
    let mut seen = def.params.clone();
    seen.extend(run.start_params.clone());
    let ctx = Context {
        params: &seen,
        schedule_time: local_time(run.stands_for(), run.options.timezone.as_deref()),
    };
    let mut params = Params::new();
    for (k, v) in &handler.params {
        params.insert(k.clone(), expand(v, &ctx).unwrap_or_else(|_| v.clone()));
    }
    let failed = [
        ("failed.instance_id", run.instance_id.to_string()),
        ("failed.project", run.project.clone()),
        ("failed.workflow", def.name.clone()),
        ("failed.tasks", run.rt.failed_tasks().join(",")),
        (
            "failed.message",
            run.rt.end_message().unwrap_or_default().to_string(),
        ),
    ];
    params.extend(failed.map(|(k, v)| (k.to_string(), v)));
    let project = handler
        .project
        .clone()
        .unwrap_or_else(|| run.project.clone());
    Some(NewCommand {
        kind: CommandKind::Start,
        options: StartOptions {
            handles_failure_of: Some(run.instance_id),
            ..run.options.inherited(project == run.project)
        },
        project,
        workflow: handler.workflow.clone(),
        version: 0, // the latest, looked up as it is written
        params,
        priority: Some(run.priority),
        workflow_instance_id: None,
        parent_task_id: None,
        schedule_time: run.schedule_time,
        due_at: None,
    })
}
