//! Taking over instances whose master is gone.
//!
//! A master that finds an instance in a live state whose owner is not a live master
//! takes it over in one transaction that bumps the owner epoch, so a presumed-dead master
//! that comes back is fenced out, and two masters racing for it cannot both win. If the
//! taking master dies right after, the instance is orphaned again and the next one takes it.

use super::definitions::pinned_definition;
use super::instance_rows::{
    INSTANCE_COLUMNS, InstanceRecord, TaskRecord, select_instance, select_tasks,
};
use super::schema::{TaskInstance as Task, WorkflowInstance as Inst};
use super::{ClaimedInstance, Store};
use sea_query::{Expr, ExprTrait, Order, Query};
use shoal_common::error::Result;
use shoal_common::types::{CommandKind, WorkflowState};

/// States in which an instance needs a master driving it.
const DRIVEN: [WorkflowState; 3] = [
    WorkflowState::Running,
    WorkflowState::ReadyPause,
    WorkflowState::ReadyStop,
];

impl Store {
    /// Instances in a driven state whose owner is none of `live_masters`: (id, epoch).
    pub async fn orphaned_instances(
        &self,
        live_masters: &[String],
        limit: u64,
    ) -> Result<Vec<(i64, i64)>> {
        let mut select = Query::select();
        select
            .columns([Inst::Id, Inst::OwnerEpoch])
            .from(Inst::Table)
            .and_where(Expr::col(Inst::State).is_in(DRIVEN.iter().map(|s| s.as_str())))
            .and_where(
                Expr::col(Inst::Owner)
                    .is_null()
                    .or(Expr::col(Inst::Owner).is_not_in(live_masters.iter().map(String::as_str))),
            )
            .order_by(Inst::Id, Order::Asc)
            .limit(limit);
        self.db.fetch_all(&select).await
    }

    /// Instances in a driven state owned by `owner`: (id, epoch).
    pub async fn owned_instances(&self, owner: &str) -> Result<Vec<(i64, i64)>> {
        let mut select = Query::select();
        select
            .columns([Inst::Id, Inst::OwnerEpoch])
            .from(Inst::Table)
            .and_where(Expr::col(Inst::State).is_in(DRIVEN.iter().map(|s| s.as_str())))
            .and_where(Expr::col(Inst::Owner).eq(owner));
        self.db.fetch_all(&select).await
    }

    /// Makes `owner` the driver of the instance if its epoch is still `epoch`; returns it
    /// with its definition and the attempts of its current run, or None if another master
    /// got there first or it no longer needs a driver.
    pub async fn take_over(
        &self,
        id: i64,
        epoch: i64,
        owner: &str,
    ) -> Result<Option<ClaimedInstance>> {
        let mut tx = self.db.begin().await?;
        let record: Option<InstanceRecord> = tx
            .update_returning(
                Query::update()
                    .table(Inst::Table)
                    .value(Inst::Owner, owner)
                    .value(Inst::OwnerEpoch, epoch + 1)
                    .and_where(Expr::col(Inst::Id).eq(id))
                    .and_where(Expr::col(Inst::OwnerEpoch).eq(epoch))
                    .and_where(Expr::col(Inst::State).is_in(DRIVEN.iter().map(|s| s.as_str())))
                    .returning(Query::returning().columns(INSTANCE_COLUMNS)),
                &select_instance(id),
            )
            .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        let instance = record.decode()?;
        let definition = pinned_definition(&mut tx, &instance).await?;
        let tasks: Vec<TaskRecord> = tx
            .fetch_all(
                select_tasks()
                    .and_where(Expr::col(Task::WorkflowInstanceId).eq(id))
                    .and_where(Expr::col(Task::Run).eq(instance.run))
                    .order_by(Task::Id, Order::Asc),
            )
            .await?;
        let tasks = tasks
            .into_iter()
            .map(TaskRecord::decode)
            .collect::<Result<Vec<_>>>()?;
        tx.commit().await?;
        Ok(Some(ClaimedInstance {
            kind: CommandKind::RecoverFailover,
            instance,
            definition,
            tasks,
        }))
    }
}
