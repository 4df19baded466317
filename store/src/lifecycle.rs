//! A workflow's lifecycle beyond its versions, as DolphinScheduler users know it: taking
//! it offline (no start, no scheduled fire) and online again, rolling back to an old
//! version, deleting it, and deleting ended instances.

use super::Store;
use super::definitions::audit_workflow;
use super::offline::clear_offline;
use super::schema::{
    Command, WorkflowDefinition as Def, WorkflowInstance as Inst, WorkflowOffline,
};
use sea_query::{Expr, ExprTrait, OnConflict, Query};
use shoal_common::error::{Error, Result};
use shoal_common::types::{WorkflowState, now_ms};

/// States of an instance that nothing drives any more.
pub(super) const ENDED: [WorkflowState; 4] = [
    WorkflowState::Success,
    WorkflowState::Failure,
    WorkflowState::Stopped,
    WorkflowState::Paused,
];

impl Store {
    /// Takes a workflow offline (its schedule is disabled too, as DolphinScheduler does)
    /// or brings it online (its schedule stays as it is: enable it again if wanted).
    pub async fn set_online(&self, project: &str, workflow: &str, online: bool) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let version = super::schedules::latest_version(&mut tx, project, workflow).await?;
        audit_workflow(workflow, version);
        if online {
            clear_offline(&mut tx, project, workflow).await?;
        } else {
            let mut insert = Query::insert();
            insert
                .into_table(WorkflowOffline::Table)
                .columns([
                    WorkflowOffline::Project,
                    WorkflowOffline::Workflow,
                    WorkflowOffline::Since,
                ])
                .values_panic([project.into(), workflow.into(), now_ms().into()])
                .on_conflict(
                    OnConflict::columns([WorkflowOffline::Project, WorkflowOffline::Workflow])
                        .do_nothing_on([WorkflowOffline::Since])
                        .to_owned(),
                );
            tx.execute(&insert).await?;
            super::schedules::disable_for(&mut tx, project, workflow).await?;
        }
        tx.commit().await
    }

    /// Stores version `version` again as the newest version (a rollback); returns the new
    /// version, or the latest unchanged when it is that version's definition already.
    pub async fn roll_back(&self, project: &str, workflow: &str, version: i32) -> Result<i32> {
        let old = self
            .get_definition(project, workflow, Some(version))
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "version {version} of workflow '{project}/{workflow}'"
                ))
            })?;
        let (version, _) = self.put_definition(&old.definition).await?;
        Ok(version)
    }

    /// Deletes every version of a workflow, its (disabled) schedule and its offline mark.
    /// Refused while one of its runs is active or pending, or its schedule is enabled. Its
    /// ended instances stay readable.
    pub async fn delete_workflow(&self, project: &str, workflow: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let version = super::schedules::latest_version(&mut tx, project, workflow).await?;
        audit_workflow(workflow, version);
        let active: Option<(i64,)> = tx
            .fetch_optional(
                Query::select()
                    .column(Inst::Id)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Project).eq(project))
                    .and_where(Expr::col(Inst::Workflow).eq(workflow))
                    .and_where(Expr::col(Inst::State).is_not_in(ENDED.map(|s| s.as_str())))
                    .limit(1),
            )
            .await?;
        if let Some((id,)) = active {
            return Err(Error::Conflict(format!(
                "workflow '{project}/{workflow}' has an active run (instance {id}); stop it or \
                 wait for it to end"
            )));
        }
        let pending: Option<(i64,)> = tx
            .fetch_optional(
                Query::select()
                    .column(Command::Id)
                    .from(Command::Table)
                    .and_where(Expr::col(Command::Project).eq(project))
                    .and_where(Expr::col(Command::Workflow).eq(workflow))
                    .limit(1),
            )
            .await?;
        if let Some((id,)) = pending {
            return Err(Error::Conflict(format!(
                "workflow '{project}/{workflow}' has a run about to start (command {id}); \
                 wait for it and stop it"
            )));
        }
        super::schedules::delete_disabled_for(&mut tx, project, workflow).await?;
        super::broker_triggers::delete_of_workflow(&mut tx, project, workflow).await?;
        clear_offline(&mut tx, project, workflow).await?;
        tx.execute(
            Query::delete()
                .from_table(Def::Table)
                .and_where(Expr::col(Def::Project).eq(project))
                .and_where(Expr::col(Def::Name).eq(workflow)),
        )
        .await?;
        tx.commit().await
    }

    /// Deletes an ended instance with its task rows, kept logs, callbacks and alerts.
    /// Refused while it runs or an action on it is pending.
    pub async fn delete_instance(&self, id: i64) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let row: Option<(String,)> = tx
            .fetch_optional(
                Query::select()
                    .column(Inst::State)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Id).eq(id)),
            )
            .await?;
        let Some((state,)) = row else {
            return Err(Error::NotFound(format!("workflow instance {id}")));
        };
        if !ENDED.iter().any(|s| s.as_str() == state) {
            return Err(Error::Conflict(format!(
                "workflow instance {id} is {state}; only an ended instance can be deleted \
                 (stop it first)"
            )));
        }
        let pending: Option<(i64,)> = tx
            .fetch_optional(
                Query::select()
                    .column(Command::Id)
                    .from(Command::Table)
                    .and_where(Expr::col(Command::WorkflowInstanceId).eq(id)),
            )
            .await?;
        if let Some((command,)) = pending {
            return Err(Error::Conflict(format!(
                "an action on workflow instance {id} is pending (command {command}); wait for \
                 it to be picked up"
            )));
        }
        super::retention::delete_instances(&mut tx, super::retention::with_ids(&[id])).await?;
        tx.commit().await
    }
}
