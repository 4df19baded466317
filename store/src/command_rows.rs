//! Command rows, the one way work reaches a master: writing one, the NOTIFY that wakes
//! Postgres masters with the commit and the wake of a standalone one after it; reading
//! them back; and the error-command rows of those that will not run.

use super::codec::to_json;
use super::db::Tx;
use super::schema::{Command as Cmd, ErrorCommand as ErrCmd};
use super::signal::{COMMAND_CHANNEL, Written};
use super::sql::{insert_rows, with_id};
use super::{Backend, NewCommand, Store};
use sea_query::{Func, InsertStatement, Query, SelectStatement};
use shoal_common::error::{Error, Result};
use shoal_common::types::{Priority, now_ms};

impl Store {
    /// Wakes this process' master after a commit that wrote commands (Postgres masters are
    /// woken by the NOTIFY of the transaction; MySQL masters elsewhere poll).
    pub(super) fn commands_written(&self) {
        self.db.written(Written::Commands);
    }
}

/// The insert of one command row, returning its id.
/// Writes a command in `tx` and NOTIFYs the masters at its commit (then call
/// [`Store::commands_written`]). A second pending action on one instance is a conflict.
pub(super) async fn insert_command_in(tx: &mut Tx, cmd: &NewCommand) -> Result<i64> {
    let insert = insert_command_statement(cmd, now_ms())?;
    let id = match tx.insert_id(&insert).await {
        Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {
            let instance = cmd.workflow_instance_id.unwrap_or_default();
            return Err(Error::Conflict(format!(
                "an action on workflow instance {instance} is already pending; wait for it to be picked up"
            )));
        }
        other => other?,
    };
    notify_masters(tx).await?;
    Ok(id)
}

/// The command table's columns but the id, in the order [`insert_command_statement`]
/// writes them.
const COMMAND_FIELDS: [Cmd; 12] = [
    Cmd::Kind,
    Cmd::Project,
    Cmd::Workflow,
    Cmd::Version,
    Cmd::Params,
    Cmd::Priority,
    Cmd::CreatedAt,
    Cmd::WorkflowInstanceId,
    Cmd::Options,
    Cmd::ParentTaskId,
    Cmd::ScheduleTime,
    Cmd::DueAt,
];

/// The columns a [`CommandRecord`] is read from.
const COMMAND_COLUMNS: [Cmd; 13] = with_id(Cmd::Id, COMMAND_FIELDS);

/// A command row as stored.
#[derive(sqlx::FromRow)]
pub(super) struct CommandRecord {
    pub(super) id: i64,
    pub(super) kind: String,
    pub(super) project: String,
    pub(super) workflow: String,
    pub(super) version: i32,
    pub(super) params: String,
    pub(super) priority: Option<String>,
    pub(super) created_at: i64,
    pub(super) workflow_instance_id: Option<i64>,
    pub(super) options: String,
    pub(super) parent_task_id: Option<i64>,
    pub(super) schedule_time: Option<i64>,
    pub(super) due_at: Option<i64>,
}

/// Selects [`CommandRecord`]s (add the conditions).
pub(super) fn select_commands() -> SelectStatement {
    Query::select()
        .columns(COMMAND_COLUMNS)
        .from(Cmd::Table)
        .to_owned()
}

pub(super) fn insert_command_statement(cmd: &NewCommand, now: i64) -> Result<InsertStatement> {
    let mut insert = insert_rows(
        Cmd::Table,
        COMMAND_FIELDS,
        [[
            cmd.kind.as_str().into(),
            cmd.project.as_str().into(),
            cmd.workflow.as_str().into(),
            cmd.version.into(),
            to_json(&cmd.params)?.into(),
            cmd.priority.map(Priority::as_str).into(),
            now.into(),
            cmd.workflow_instance_id.into(),
            to_json(&cmd.options)?.into(),
            cmd.parent_task_id.into(),
            cmd.schedule_time.into(),
            cmd.due_at.into(),
        ]],
    );
    insert.returning_col(Cmd::Id);
    Ok(insert)
}

/// A command that will not run, with why: a row of the error-command table, which
/// `command_status` and the run that started it read.
pub(super) struct ErrorCommandRow<'a> {
    /// The command's own id.
    pub(super) id: i64,
    pub(super) kind: &'a str,
    pub(super) project: &'a str,
    pub(super) workflow: &'a str,
    pub(super) version: i32,
    /// As stored in the command row (JSON).
    pub(super) params: &'a str,
    pub(super) created_at: i64,
    pub(super) workflow_instance_id: Option<i64>,
    pub(super) parent_task_id: Option<i64>,
    pub(super) error: &'a str,
}

impl<'a> ErrorCommandRow<'a> {
    /// `command`, refused or cancelled for `error`.
    pub(super) fn of(command: &'a CommandRecord, error: &'a str) -> ErrorCommandRow<'a> {
        ErrorCommandRow {
            id: command.id,
            kind: &command.kind,
            project: &command.project,
            workflow: &command.workflow,
            version: command.version,
            params: &command.params,
            created_at: command.created_at,
            workflow_instance_id: command.workflow_instance_id,
            parent_task_id: command.parent_task_id,
            error,
        }
    }
}

/// The error-command table's columns, in the order [`insert_error_commands`] writes them.
const ERROR_COMMAND_COLUMNS: [ErrCmd; 11] = [
    ErrCmd::Id,
    ErrCmd::Kind,
    ErrCmd::Project,
    ErrCmd::Workflow,
    ErrCmd::Version,
    ErrCmd::Params,
    ErrCmd::CreatedAt,
    ErrCmd::WorkflowInstanceId,
    ErrCmd::ParentTaskId,
    ErrCmd::Error,
    ErrCmd::FailedAt,
];

/// Writes the error-command rows of commands that failed at `failed_at`.
pub(super) async fn insert_error_commands(
    tx: &mut Tx,
    rows: &[ErrorCommandRow<'_>],
    failed_at: i64,
) -> Result<()> {
    for chunk in rows.chunks(tx.rows_per_statement(ERROR_COMMAND_COLUMNS.len())) {
        tx.execute(&insert_rows(
            ErrCmd::Table,
            ERROR_COMMAND_COLUMNS,
            chunk.iter().map(|row| {
                [
                    row.id.into(),
                    row.kind.into(),
                    row.project.into(),
                    row.workflow.into(),
                    row.version.into(),
                    row.params.into(),
                    row.created_at.into(),
                    row.workflow_instance_id.into(),
                    row.parent_task_id.into(),
                    row.error.into(),
                    failed_at.into(),
                ]
            }),
        ))
        .await?;
    }
    Ok(())
}

/// NOTIFYs the masters on Postgres: delivered on commit, and only if the transaction
/// commits. (On SQLite the store wakes its in-process signal after the commit.)
pub(super) async fn notify_masters(tx: &mut Tx) -> Result<()> {
    if tx.backend() == Backend::Postgres {
        tx.execute(Query::select().expr(Func::cust("pg_notify").arg(COMMAND_CHANNEL).arg("")))
            .await?;
    }
    Ok(())
}
