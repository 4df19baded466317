//! What an operator does to one task attempt (DolphinScheduler's task instance actions)
//! that the store decides alone: forcing a failed attempt to success.

use super::NewCommand;
use super::Store;
use super::command_rows::insert_command_in;
use super::db::Tx;
use super::instance_rows::{INSTANCE_COLUMNS, InstanceRecord, TaskRecord, select_tasks};
use super::schema::{TaskInstance as Task, WorkflowInstance as Inst};
use sea_query::{Expr, ExprTrait, LockType, Query};
use shoal_common::error::{Error, Result};
use shoal_common::types::{CommandKind, TaskState, WorkflowState};

/// A forced attempt and the resubmit-failed command that takes its instance on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forced {
    pub workflow_instance_id: i64,
    pub command_id: i64,
}

impl Store {
    /// Marks a failed or killed attempt `forced_success` and resubmits its instance, in
    /// one transaction: the run goes on as if the task had passed (its downstream tasks
    /// run; other failed tasks run again, as a resubmit does). Only the latest attempt of
    /// a task of an ended (failed or stopped) instance can be forced: a running instance
    /// still decides its tasks' fate itself.
    pub async fn force_task_success(&self, task_id: i64, by: &str) -> Result<Forced> {
        let mut tx = self.db.begin().await?;
        let task: Option<TaskRecord> = tx
            .fetch_optional(select_tasks().and_where(Expr::col(Task::Id).eq(task_id)))
            .await?;
        let task = task
            .ok_or_else(|| Error::NotFound(format!("task instance {task_id}")))?
            .decode()?;
        let instance: InstanceRecord = tx
            .fetch_one(
                Query::select()
                    .columns(INSTANCE_COLUMNS)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Id).eq(task.workflow_instance_id))
                    .lock(LockType::Update),
            )
            .await?;
        let instance = instance.decode()?;
        let id = instance.id;
        if !matches!(
            instance.state,
            WorkflowState::Failure | WorkflowState::Stopped
        ) {
            return Err(Error::Conflict(format!(
                "workflow instance {id} is {}; a task can be forced to success once its \
                 instance has failed or was stopped (stop it first)",
                instance.state
            )));
        }
        if !matches!(task.state, TaskState::Failure | TaskState::Killed) {
            return Err(Error::Conflict(format!(
                "task instance {task_id} is {}; only a failed or killed attempt can be forced to success",
                task.state
            )));
        }
        if let Some(newer) = newer_attempt(&mut tx, task_id, &task).await? {
            return Err(Error::Conflict(format!(
                "task instance {task_id} is not the latest attempt of '{}' (task instance \
                 {newer} is); force that one",
                task.name
            )));
        }
        tx.execute(
            Query::update()
                .table(Task::Table)
                .value(Task::State, TaskState::ForcedSuccess.as_str())
                .value(Task::Message, format!("forced to success by {by}"))
                .and_where(Expr::col(Task::Id).eq(task_id)),
        )
        .await?;
        let resubmit = NewCommand::recovery(CommandKind::ResubmitFailed, &instance);
        let command_id = insert_command_in(&mut tx, &resubmit).await?;
        tx.commit().await?;
        self.commands_written();
        Ok(Forced {
            workflow_instance_id: id,
            command_id,
        })
    }
}

/// A later attempt of the same task in the same run, if there is one.
async fn newer_attempt(
    tx: &mut Tx,
    task_id: i64,
    task: &super::TaskInstanceRow,
) -> Result<Option<i64>> {
    let newer: Option<(i64,)> = tx
        .fetch_optional(
            Query::select()
                .column(Task::Id)
                .from(Task::Table)
                .and_where(Expr::col(Task::WorkflowInstanceId).eq(task.workflow_instance_id))
                .and_where(Expr::col(Task::Run).eq(task.run))
                .and_where(Expr::col(Task::Name).eq(task.name.as_str()))
                .and_where(Expr::col(Task::Attempt).gt(task.attempt))
                .and_where(Expr::col(Task::Id).ne(task_id))
                .limit(1),
        )
        .await?;
    Ok(newer.map(|(id,)| id))
}
