//! Workflow and task instance rows as the store reads and writes them.

use super::codec::{from_json, parse, to_json};
use super::db::Tx;
use super::schema::{TaskInstance as Task, WorkflowInstance as Inst};
use super::sql::{insert_rows, with_id};
use super::{Backend, InstanceRow, TaskInstanceRow};
use sea_query::{Expr, ExprTrait, Query, SelectStatement};
use shoal_common::error::Result;
use std::collections::HashMap;

/// The instance table's columns but the id, in the order [`insert_instances`] writes
/// them.
const INSTANCE_FIELDS: [Inst; 17] = [
    Inst::CommandId,
    Inst::Project,
    Inst::Workflow,
    Inst::Version,
    Inst::State,
    Inst::Priority,
    Inst::Params,
    Inst::Owner,
    Inst::OwnerEpoch,
    Inst::Run,
    Inst::CreatedAt,
    Inst::StartedAt,
    Inst::EndedAt,
    Inst::Options,
    Inst::ParentTaskId,
    Inst::ScheduleTime,
    Inst::Message,
];

/// The columns an [`InstanceRecord`] is read from.
pub(super) const INSTANCE_COLUMNS: [Inst; 18] = with_id(Inst::Id, INSTANCE_FIELDS);

const TASK_COLUMNS: [Task; 17] = [
    Task::Id,
    Task::WorkflowInstanceId,
    Task::Name,
    Task::TaskType,
    Task::State,
    Task::Attempt,
    Task::Priority,
    Task::WorkerGroup,
    Task::Worker,
    Task::SubmittedAt,
    Task::StartedAt,
    Task::EndedAt,
    Task::ExitCode,
    Task::Output,
    Task::Message,
    Task::Run,
    Task::TaskGroup,
];

#[derive(sqlx::FromRow)]
pub(super) struct InstanceRecord {
    id: i64,
    command_id: i64,
    project: String,
    workflow: String,
    version: i32,
    state: String,
    priority: String,
    params: String,
    owner: Option<String>,
    owner_epoch: i64,
    run: i32,
    created_at: i64,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    options: String,
    parent_task_id: Option<i64>,
    schedule_time: Option<i64>,
    message: Option<String>,
}

impl InstanceRecord {
    pub(super) fn decode(self) -> Result<InstanceRow> {
        let row = format!("workflow_instance {}", self.id);
        Ok(InstanceRow {
            state: parse(&row, &self.state)?,
            priority: parse(&row, &self.priority)?,
            params: from_json(&row, "params", &self.params)?,
            options: from_json(&row, "options", &self.options)?,
            parent_task_id: self.parent_task_id,
            schedule_time: self.schedule_time,
            message: self.message,
            id: self.id,
            command_id: self.command_id,
            project: self.project,
            workflow: self.workflow,
            version: self.version,
            owner: self.owner,
            owner_epoch: self.owner_epoch,
            run: self.run,
            created_at: self.created_at,
            started_at: self.started_at,
            ended_at: self.ended_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct TaskRecord {
    id: i64,
    workflow_instance_id: i64,
    name: String,
    task_type: String,
    state: String,
    attempt: i32,
    priority: String,
    worker_group: String,
    worker: Option<String>,
    submitted_at: i64,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    exit_code: Option<i32>,
    output: Option<String>,
    message: Option<String>,
    run: i32,
    task_group: Option<String>,
}

impl TaskRecord {
    pub(super) fn decode(self) -> Result<TaskInstanceRow> {
        let row = format!("task_instance {}", self.id);
        Ok(TaskInstanceRow {
            state: parse(&row, &self.state)?,
            priority: parse(&row, &self.priority)?,
            output: match &self.output {
                Some(text) => from_json(&row, "output", text)?,
                None => Default::default(),
            },
            id: self.id,
            workflow_instance_id: self.workflow_instance_id,
            run: self.run,
            name: self.name,
            task_type: self.task_type,
            attempt: self.attempt,
            worker_group: self.worker_group,
            worker: self.worker,
            submitted_at: self.submitted_at,
            started_at: self.started_at,
            ended_at: self.ended_at,
            exit_code: self.exit_code,
            message: self.message,
            task_group: self.task_group,
        })
    }
}

/// Instance `id`'s row, as [`InstanceRecord`] reads it.
pub(super) fn select_instance(id: i64) -> SelectStatement {
    Query::select()
        .columns(INSTANCE_COLUMNS)
        .from(Inst::Table)
        .and_where(Expr::col(Inst::Id).eq(id))
        .to_owned()
}

pub(super) fn select_tasks() -> SelectStatement {
    Query::select()
        .columns(TASK_COLUMNS)
        .from(Task::Table)
        .to_owned()
}

/// Inserts instance rows; returns each one's id by its command id.
pub(super) async fn insert_instances(
    tx: &mut Tx,
    rows: &[&InstanceRow],
) -> Result<HashMap<i64, i64>> {
    let mut ids: HashMap<i64, i64> = HashMap::with_capacity(rows.len());
    for chunk in rows.chunks(tx.rows_per_statement(INSTANCE_FIELDS.len())) {
        let mut insert = insert_rows(
            Inst::Table,
            INSTANCE_FIELDS,
            chunk
                .iter()
                .map(|row| -> Result<_> {
                    Ok([
                        row.command_id.into(),
                        row.project.as_str().into(),
                        row.workflow.as_str().into(),
                        row.version.into(),
                        row.state.as_str().into(),
                        row.priority.as_str().into(),
                        to_json(&row.params)?.into(),
                        row.owner.as_deref().into(),
                        row.owner_epoch.into(),
                        row.run.into(),
                        row.created_at.into(),
                        row.started_at.into(),
                        row.ended_at.into(),
                        to_json(&row.options)?.into(),
                        row.parent_task_id.into(),
                        row.schedule_time.into(),
                        row.message.as_deref().into(),
                    ])
                })
                .collect::<Result<Vec<_>>>()?,
        );
        // Matched by command_id (unique) rather than by the order RETURNING happens
        // to produce. MySQL returns nothing: the rows are read back by command id.
        insert.returning(Query::returning().columns([Inst::Id, Inst::CommandId]));
        let returned: Vec<(i64, i64)> = if tx.backend() == Backend::Mysql {
            tx.execute(&insert).await?;
            tx.fetch_all(
                Query::select()
                    .columns([Inst::Id, Inst::CommandId])
                    .from(Inst::Table)
                    .and_where(
                        Expr::col(Inst::CommandId).is_in(chunk.iter().map(|r| r.command_id)),
                    ),
            )
            .await?
        } else {
            tx.fetch_all(&insert).await?
        };
        ids.extend(
            returned
                .into_iter()
                .map(|(id, command_id)| (command_id, id)),
        );
    }
    Ok(ids)
}
