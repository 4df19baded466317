//! Retention: instances that ended before a cutoff are deleted with what belongs to them
//! (task rows, kept logs, callbacks, alerts), oldest first, a batch per transaction, so
//! that the deletes never hold many rows or a long lock while masters schedule. Webhook
//! idempotency keys, broker triggers' message records and ignored messages, and external
//! workers last seen, older than the cutoff expire with them.
//!
//! Only `success`, `failure` and `stopped` instances go: a paused one may still be resumed,
//! one with a command pending (a rerun asked for) is about to run again, and a child is
//! kept while its parent's task row is there (the parent goes first).

use super::Store;
use super::db::Tx;
use super::schema::{
    Alert, Command, ExternalTask, ExternalWorker, TaskCallback, TaskInstance as Task, TaskLog,
    TriggerCall, WorkflowInstance as Inst,
};
use sea_query::{Expr, ExprTrait, Order, Query, SelectStatement};
use shoal_common::error::Result;
use shoal_common::types::WorkflowState;

/// What one pass of [`Store::prune_ended`] deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub instances: u64,
    pub tasks: u64,
    pub trigger_calls: u64,
    /// Records of broker messages (a message redelivered after it went would start
    /// another run).
    pub trigger_messages: u64,
}

impl Store {
    /// Deletes up to `batch` instances that ended before `cutoff_ms` (ms since the epoch),
    /// and everything of theirs, in one transaction; and the trigger calls recorded before
    /// the cutoff. Call again while it deletes a full batch.
    pub async fn prune_ended(&self, cutoff_ms: i64, batch: u64) -> Result<Pruned> {
        let mut tx = self.db.begin().await?;
        let ids: Vec<(i64,)> = tx.fetch_all(&prunable(cutoff_ms, batch)).await?;
        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
        let mut pruned = Pruned::default();
        if !ids.is_empty() {
            (pruned.instances, pruned.tasks) = delete_instances(&mut tx, with_ids(&ids)).await?;
        }
        pruned.trigger_calls = tx
            .execute_counted(
                Query::delete()
                    .from_table(TriggerCall::Table)
                    .and_where(Expr::col(TriggerCall::CreatedAt).lt(cutoff_ms)),
            )
            .await?;
        pruned.trigger_messages = super::broker_triggers::prune(&mut tx, cutoff_ms).await?;
        tx.execute(
            Query::delete()
                .from_table(ExternalWorker::Table)
                .and_where(Expr::col(ExternalWorker::LastSeenAt).lt(cutoff_ms)),
        )
        .await?;
        tx.commit().await?;
        Ok(pruned)
    }
}

/// The oldest `batch` instances that may go (see the module doc).
fn prunable(cutoff_ms: i64, batch: u64) -> SelectStatement {
    let ended = [
        WorkflowState::Success,
        WorkflowState::Failure,
        WorkflowState::Stopped,
    ]
    .map(|s| s.as_str());
    Query::select()
        .column(Inst::Id)
        .from(Inst::Table)
        .and_where(Expr::col(Inst::EndedAt).lt(cutoff_ms))
        .and_where(Expr::col(Inst::State).is_in(ended))
        .and_where(
            Expr::exists(
                Query::select()
                    .expr(Expr::val(1))
                    .from(Command::Table)
                    .and_where(
                        Expr::col((Command::Table, Command::WorkflowInstanceId))
                            .equals((Inst::Table, Inst::Id)),
                    )
                    .to_owned(),
            )
            .not(),
        )
        .and_where(
            Expr::col(Inst::ParentTaskId).is_null().or(Expr::exists(
                Query::select()
                    .expr(Expr::val(1))
                    .from(Task::Table)
                    .and_where(
                        Expr::col((Task::Table, Task::Id))
                            .equals((Inst::Table, Inst::ParentTaskId)),
                    )
                    .to_owned(),
            )
            .not()),
        )
        .order_by(Inst::EndedAt, Order::Asc)
        .limit(batch)
        .to_owned()
}

/// Selects the instances `ids`.
pub(super) fn with_ids(ids: &[i64]) -> SelectStatement {
    Query::select()
        .column(Inst::Id)
        .from(Inst::Table)
        .and_where(Expr::col(Inst::Id).is_in(ids.iter().copied()))
        .to_owned()
}

/// Deletes the instances `which` selects (their ids) with their task rows, kept logs,
/// callbacks, external offers, event waits and alerts; returns how many instances and task rows went.
pub(super) async fn delete_instances(tx: &mut Tx, which: SelectStatement) -> Result<(u64, u64)> {
    let tasks_of = || {
        Query::select()
            .column(Task::Id)
            .from(Task::Table)
            .and_where(Expr::col(Task::WorkflowInstanceId).in_subquery(which.clone()))
            .to_owned()
    };
    tx.execute(
        Query::delete()
            .from_table(TaskLog::Table)
            .and_where(Expr::col(TaskLog::TaskInstanceId).in_subquery(tasks_of())),
    )
    .await?;
    tx.execute(
        Query::delete()
            .from_table(TaskCallback::Table)
            .and_where(Expr::col(TaskCallback::TaskInstanceId).in_subquery(tasks_of())),
    )
    .await?;
    tx.execute(
        Query::delete()
            .from_table(ExternalTask::Table)
            .and_where(Expr::col(ExternalTask::WorkflowInstanceId).in_subquery(which.clone())),
    )
    .await?;
    super::event_waits::delete_of_instances(tx, which.clone()).await?;
    tx.execute(
        Query::delete()
            .from_table(Alert::Table)
            .and_where(Expr::col(Alert::WorkflowInstanceId).in_subquery(which.clone())),
    )
    .await?;
    let tasks = tx
        .execute_counted(
            Query::delete()
                .from_table(Task::Table)
                .and_where(Expr::col(Task::WorkflowInstanceId).in_subquery(which.clone())),
        )
        .await?;
    let instances = tx
        .execute_counted(
            Query::delete()
                .from_table(Inst::Table)
                .and_where(Expr::col(Inst::Id).in_subquery(which)),
        )
        .await?;
    Ok((instances, tasks))
}
