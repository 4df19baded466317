//! Writing commands, the one way work reaches a master: the row, the NOTIFY that wakes
//! Postgres masters with the commit, and the wake of a standalone one after it.

use super::codec::to_json;
use super::db::{Db, Tx};
use super::schema::Command as Cmd;
use super::signal::COMMAND_CHANNEL;
use super::sql::insert_rows;
use super::{Backend, NewCommand, Store};
use sea_query::{Func, InsertStatement, Query};
use shoal_common::error::{Error, Result};
use shoal_common::types::{Priority, now_ms};

impl Store {
    /// Wakes standalone's master after a commit that wrote commands (Postgres masters are
    /// woken by the NOTIFY of the transaction).
    pub(super) fn commands_written(&self) {
        if let Db::Sqlite { commands, .. } = &self.db {
            commands.wake();
        }
    }
}

/// The insert of one command row, returning its id.
/// Writes a command in `tx` and NOTIFYs the masters at its commit (then call
/// [`Store::commands_written`]). A second pending action on one instance is a conflict.
pub(super) async fn insert_command_in(tx: &mut Tx, cmd: &NewCommand) -> Result<i64> {
    let insert = insert_command_statement(cmd, now_ms())?;
    let (id,): (i64,) = match tx.fetch_one(&insert).await {
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

pub(super) fn insert_command_statement(cmd: &NewCommand, now: i64) -> Result<InsertStatement> {
    let mut insert = insert_rows(
        Cmd::Table,
        [
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
        ],
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
        ]],
    );
    insert.returning_col(Cmd::Id);
    Ok(insert)
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
