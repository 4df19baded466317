//! Child runs of sub_workflow tasks and the cross-workflow checks of dependent tasks.

use super::codec::{from_json, parse, to_json};
use super::command_rows::{
    ErrorCommandRow, insert_command_statement, insert_error_commands, notify_masters,
};
use super::db::Tx;
use super::offline::refuse_if_offline;
use super::schema::{
    Command as Cmd, ErrorCommand as ErrCmd, TaskInstance as Task, WorkflowDefinition as Def,
    WorkflowInstance as Inst,
};
use super::users::may_start;
use super::{ChildRun, ChildStart, ChildState, NewCommand, Store};
use sea_query::{Expr, ExprTrait, Func, Order, Query};
use shoal_common::definition::DependResult;
use shoal_common::error::Result;
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{CommandKind, TaskState, WorkflowState, now_ms};
use std::collections::{HashMap, HashSet};

/// Writes the command of each child run whose parent task has none yet (a retried or
/// re-adopted parent must not start a second child). A child of a workflow that does not
/// exist goes straight to the error-command table. Returns whether a command was written.
pub(super) async fn start_children(
    tx: &mut Tx,
    children: &[ChildStart],
    fenced: &HashSet<i64>,
) -> Result<bool> {
    let children: Vec<&ChildStart> = children
        .iter()
        .filter(|c| !fenced.contains(&c.parent_instance_id))
        .collect();
    if children.is_empty() {
        return Ok(false);
    }
    let parents: Vec<i64> = children.iter().map(|c| c.parent_task_id).collect();
    let mut started: HashSet<i64> = HashSet::new();
    for table_rows in [
        tx.fetch_all::<(Option<i64>,)>(
            Query::select()
                .column(Cmd::ParentTaskId)
                .from(Cmd::Table)
                .and_where(Expr::col(Cmd::ParentTaskId).is_in(parents.clone())),
        )
        .await?,
        tx.fetch_all::<(Option<i64>,)>(
            Query::select()
                .column(Inst::ParentTaskId)
                .from(Inst::Table)
                .and_where(Expr::col(Inst::ParentTaskId).is_in(parents.clone())),
        )
        .await?,
        tx.fetch_all::<(Option<i64>,)>(
            Query::select()
                .column(ErrCmd::ParentTaskId)
                .from(ErrCmd::Table)
                .and_where(Expr::col(ErrCmd::ParentTaskId).is_in(parents)),
        )
        .await?,
    ] {
        started.extend(table_rows.into_iter().filter_map(|(p,)| p));
    }
    let children: Vec<&ChildStart> = children
        .into_iter()
        .filter(|c| !started.contains(&c.parent_task_id))
        .collect();
    let starters = starters(tx, children.iter().map(|c| c.parent_instance_id)).await?;
    let now = now_ms();
    let mut written = false;
    for child in children {
        let parent = starters.get(&child.parent_instance_id);
        written |= start_for(tx, parent, child.command(0), "sub-workflow", now).await?;
    }
    if written {
        notify_masters(tx).await?;
    }
    Ok(written)
}

/// Writes the exception handler run of each failed instance (its workflow's
/// `on_failure`) that was not fenced. Returns whether a command was written.
pub(super) async fn start_exception_runs(
    tx: &mut Tx,
    runs: &[(i64, NewCommand)],
    fenced: &HashSet<i64>,
) -> Result<bool> {
    let runs: Vec<&(i64, NewCommand)> = runs.iter().filter(|(i, _)| !fenced.contains(i)).collect();
    let starters = starters(tx, runs.iter().map(|(i, _)| *i)).await?;
    let now = now_ms();
    let mut written = false;
    for (failed, command) in runs {
        let parent = starters.get(failed);
        let started = start_for(tx, parent, command.clone(), "exception workflow", now).await?;
        if !started {
            tracing::warn!(instance = failed, workflow = %command.workflow, "exception workflow does not exist or is offline");
        }
        written |= started;
    }
    if written {
        notify_masters(tx).await?;
    }
    Ok(written)
}

/// The project of each of `instances` and who started it ([`StartOptions::started_by`]).
async fn starters(
    tx: &mut Tx,
    instances: impl Iterator<Item = i64>,
) -> Result<HashMap<i64, (String, Option<i64>)>> {
    let rows: Vec<(i64, String, String)> = tx
        .fetch_all(
            Query::select()
                .columns([Inst::Id, Inst::Project, Inst::Options])
                .from(Inst::Table)
                .and_where(Expr::col(Inst::Id).is_in(instances)),
        )
        .await?;
    rows.into_iter()
        .map(|(id, project, options)| {
            let options: StartOptions =
                from_json(&format!("workflow_instance {id}"), "options", &options)?;
            Ok((id, (project, options.started_by)))
        })
        .collect()
}

/// Writes `command`, a run that a run of `parent` (its project, who started it) starts,
/// in the name of who started that one: refused with the reason, to the error-command
/// table, when it is in another project where they may not start runs now. Same-project
/// starts need no look-up.
async fn start_for(
    tx: &mut Tx,
    parent: Option<&(String, Option<i64>)>,
    mut command: NewCommand,
    what: &str,
    now: i64,
) -> Result<bool> {
    if let Some((project, by)) = parent {
        command.options.started_by = *by;
        if let Some(user) = *by
            && command.project != *project
            && let Err(why) = may_start(tx, user, &command.project).await?
        {
            let error = format!(
                "{what} '{}/{}' was not started: {why}",
                command.project, command.workflow
            );
            reject(tx, &command, &error, now).await?;
            return Ok(false);
        }
    }
    start_latest(tx, command, what, now).await
}

/// Writes `command` for the latest version of its workflow (a run another run starts). A
/// workflow that does not exist or is offline sends it to the error-command table with the
/// reason,
/// under a fresh command id, so `command_status` and the run that started it see why.
/// Returns whether the command was written.
async fn start_latest(tx: &mut Tx, mut command: NewCommand, what: &str, now: i64) -> Result<bool> {
    let (version,): (Option<i32>,) = tx
        .fetch_one(
            Query::select()
                .expr(Func::max(Expr::col(Def::Version)))
                .from(Def::Table)
                .and_where(Expr::col(Def::Project).eq(command.project.as_str()))
                .and_where(Expr::col(Def::Name).eq(command.workflow.as_str())),
        )
        .await?;
    let Some(version) = version else {
        let error = format!(
            "{what} '{}/{}' does not exist; apply it first with `shoal apply -f FILE`",
            command.project, command.workflow
        );
        reject(tx, &command, &error, now).await?;
        return Ok(false);
    };
    // An offline workflow starts no run, whoever asks (as a start or a schedule would).
    if let Err(offline) = refuse_if_offline(tx, &command.project, &command.workflow).await {
        reject(tx, &command, &format!("{what}: {offline}"), now).await?;
        return Ok(false);
    }
    command.version = version;
    tx.insert_id(&insert_command_statement(&command, now)?)
        .await?;
    Ok(true)
}

async fn reject(tx: &mut Tx, command: &NewCommand, error: &str, now: i64) -> Result<()> {
    let id = tx
        .insert_id(&insert_command_statement(command, now)?)
        .await?;
    tx.execute(
        Query::delete()
            .from_table(Cmd::Table)
            .and_where(Expr::col(Cmd::Id).eq(id)),
    )
    .await?;
    let params = to_json(&command.params)?;
    let row = ErrorCommandRow {
        id,
        kind: command.kind.as_str(),
        project: &command.project,
        workflow: &command.workflow,
        version: 0,
        params: &params,
        created_at: now,
        workflow_instance_id: None,
        parent_task_id: command.parent_task_id,
        error,
    };
    insert_error_commands(tx, &[row], now).await
}

impl Store {
    /// For stopping a sub_workflow task's child run with its parent: deletes the child's
    /// command if no master has claimed it yet, else says where the child instance is.
    pub async fn withdraw_child(&self, parent_task_id: i64) -> Result<ChildRun> {
        let mut tx = self.db.begin().await?;
        let withdrawn = tx
            .execute_counted(
                Query::delete()
                    .from_table(Cmd::Table)
                    .and_where(Expr::col(Cmd::ParentTaskId).eq(parent_task_id)),
            )
            .await?
            > 0;
        let instance: Option<(i64, Option<String>, String)> = if !withdrawn {
            tx.fetch_optional(
                Query::select()
                    .columns([Inst::Id, Inst::Owner, Inst::State])
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::ParentTaskId).eq(parent_task_id)),
            )
            .await?
        } else {
            None
        };
        tx.commit().await?;
        Ok(match (withdrawn, instance) {
            (true, _) => ChildRun::Withdrawn,
            (false, Some((id, owner, state))) => ChildRun::Instance {
                id,
                owner,
                state: parse(&format!("workflow_instance {id}"), &state)?,
            },
            (false, None) => ChildRun::None,
        })
    }

    /// The child instance of each of these sub_workflow task instances that has one, by
    /// parent task instance.
    pub async fn child_instances(&self, parent_task_ids: &[i64]) -> Result<HashMap<i64, i64>> {
        if parent_task_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows: Vec<(i64, Option<i64>)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Inst::Id, Inst::ParentTaskId])
                    .from(Inst::Table)
                    .and_where(
                        Expr::col(Inst::ParentTaskId).is_in(parent_task_ids.iter().copied()),
                    ),
            )
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, parent)| Some((parent?, id)))
            .collect())
    }

    /// Where the child run of each of these sub_workflow task instances is.
    pub async fn children(&self, parent_task_ids: &[i64]) -> Result<Vec<(i64, ChildState)>> {
        if parent_task_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = parent_task_ids.iter().copied();
        let instances: Vec<(i64, Option<i64>, String)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Inst::Id, Inst::ParentTaskId, Inst::State])
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::ParentTaskId).is_in(ids.clone())),
            )
            .await?;
        let errors: HashMap<i64, String> = self
            .db
            .fetch_all::<(Option<i64>, String)>(
                Query::select()
                    .columns([ErrCmd::ParentTaskId, ErrCmd::Error])
                    .from(ErrCmd::Table)
                    .and_where(Expr::col(ErrCmd::ParentTaskId).is_in(ids)),
            )
            .await?
            .into_iter()
            .filter_map(|(p, e)| Some((p?, e)))
            .collect();
        let mut found: HashMap<i64, ChildState> = HashMap::new();
        for (id, parent, state) in instances {
            let Some(parent) = parent else { continue };
            let state: WorkflowState = parse(&format!("workflow_instance {id}"), &state)?;
            let child = if matches!(
                state,
                WorkflowState::Success | WorkflowState::Failure | WorkflowState::Stopped
            ) {
                ChildState::Ended {
                    instance: id,
                    state,
                    outputs: self.outputs_of(id).await?,
                }
            } else {
                ChildState::Waiting
            };
            found.insert(parent, child);
        }
        Ok(parent_task_ids
            .iter()
            .map(|p| {
                let state = found
                    .remove(p)
                    .or_else(|| errors.get(p).cloned().map(ChildState::Failed));
                (*p, state.unwrap_or(ChildState::Waiting))
            })
            .collect())
    }

    /// Outputs of an instance's succeeded tasks, later tasks winning (what a parent task
    /// and a sync trigger's caller get).
    pub async fn outputs_of(&self, instance: i64) -> Result<Params> {
        let rows: Vec<(i64, Option<String>)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Task::Id, Task::Output])
                    .from(Task::Table)
                    .and_where(Expr::col(Task::WorkflowInstanceId).eq(instance))
                    .and_where(Expr::col(Task::State).eq(TaskState::Success.as_str()))
                    .order_by(Task::Id, Order::Asc),
            )
            .await?;
        let mut outputs = Params::new();
        for (id, text) in rows {
            if let Some(text) = text {
                outputs.extend(from_json::<Params>(
                    &format!("task_instance {id}"),
                    "output",
                    &text,
                )?);
            }
        }
        Ok(outputs)
    }

    /// Where one interval of a dependent task's item stands: the last run of
    /// `project/workflow` standing for a time within [from_ms, to_ms) (its schedule time,
    /// else its start) — or, with `task`, that task's latest attempt in it — succeeded,
    /// failed, or is not there or not ended yet. The text says which run, for messages;
    /// the id is that run's.
    pub async fn dependency_result(
        &self,
        project: &str,
        workflow: &str,
        task: Option<&str>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<(DependResult, String, Option<i64>)> {
        let last: Option<(i64, String)> = self
            .db
            .fetch_optional(
                Query::select()
                    .columns([Inst::Id, Inst::State])
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Project).eq(project))
                    .and_where(Expr::col(Inst::Workflow).eq(workflow))
                    .and_where(run_time().gte(from_ms))
                    .and_where(run_time().lt(to_ms))
                    .order_by_expr(run_time(), Order::Desc)
                    .order_by(Inst::Id, Order::Desc)
                    .limit(1),
            )
            .await?;
        let Some((id, state)) = last else {
            return Ok((DependResult::Waiting, "no run yet".into(), None));
        };
        let state: WorkflowState = parse(&format!("workflow_instance {id}"), &state)?;
        let ended = matches!(
            state,
            WorkflowState::Success | WorkflowState::Failure | WorkflowState::Stopped
        );
        let Some(task) = task else {
            let result = match state {
                WorkflowState::Success => DependResult::Success,
                _ if ended => DependResult::Failed,
                _ => DependResult::Waiting,
            };
            return Ok((result, format!("instance {id} is {state}"), Some(id)));
        };
        let latest: Option<(i64, String)> = self
            .db
            .fetch_optional(
                Query::select()
                    .columns([Task::Id, Task::State])
                    .from(Task::Table)
                    .and_where(Expr::col(Task::WorkflowInstanceId).eq(id))
                    .and_where(Expr::col(Task::Name).eq(task))
                    .order_by(Task::Id, Order::Desc)
                    .limit(1),
            )
            .await?;
        let (result, text) = match latest {
            None if ended => (
                DependResult::Failed,
                format!("instance {id} ended {state} without running task '{task}'"),
            ),
            None => (
                DependResult::Waiting,
                format!("task '{task}' of instance {id} has not started"),
            ),
            Some((task_id, task_state)) => {
                let task_state: TaskState =
                    parse(&format!("task_instance {task_id}"), &task_state)?;
                // A failed attempt of a running instance may still be retried.
                let result = match task_state {
                    TaskState::Success | TaskState::ForcedSuccess => DependResult::Success,
                    _ if ended => DependResult::Failed,
                    _ => DependResult::Waiting,
                };
                (
                    result,
                    format!("task '{task}' of instance {id} is {task_state}"),
                )
            }
        };
        Ok((result, text, Some(id)))
    }
}

/// The instant a run stands for: its schedule time, else its start.
fn run_time() -> Expr {
    Func::coalesce([Expr::col(Inst::ScheduleTime), Expr::col(Inst::StartedAt)]).into()
}

impl ChildStart {
    fn command(&self, version: i32) -> NewCommand {
        NewCommand {
            kind: CommandKind::Start,
            project: self.project.clone(),
            workflow: self.workflow.clone(),
            version,
            params: self.params.clone(),
            priority: Some(self.priority),
            workflow_instance_id: None,
            options: self.options.clone(),
            parent_task_id: Some(self.parent_task_id),
            schedule_time: self.schedule_time,
            due_at: None,
        }
    }
}
