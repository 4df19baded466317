//! A workflow's offline mark: what an offline workflow may not do, and the reads of it.

use super::Store;
use super::db::Tx;
use super::schema::WorkflowOffline;
use sea_query::{Expr, ExprTrait, Query};
use shoal_common::error::{Error, Result};

impl Store {
    /// Since when (ms) a workflow is offline; None while it is online.
    pub async fn offline_since(&self, project: &str, workflow: &str) -> Result<Option<i64>> {
        let row: Option<(i64,)> = self.db.fetch_optional(&offline(project, workflow)).await?;
        Ok(row.map(|(since,)| since))
    }

    /// Refuses to start an offline workflow, saying how to bring it online.
    pub async fn check_online(&self, project: &str, workflow: &str) -> Result<()> {
        match self.offline_since(project, workflow).await? {
            None => Ok(()),
            Some(_) => Err(offline_error(project, workflow)),
        }
    }
}

/// The offline mark of one workflow.
fn offline(project: &str, workflow: &str) -> sea_query::SelectStatement {
    Query::select()
        .column(WorkflowOffline::Since)
        .from(WorkflowOffline::Table)
        .and_where(Expr::col(WorkflowOffline::Project).eq(project))
        .and_where(Expr::col(WorkflowOffline::Workflow).eq(workflow))
        .to_owned()
}

fn offline_error(project: &str, workflow: &str) -> Error {
    Error::Conflict(format!(
        "workflow '{project}/{workflow}' is offline: bring it online first (`shoal workflow \
         online {workflow} --project {project}`)"
    ))
}

/// Refuses, inside `tx`, what an offline workflow may not do (enable its schedule).
pub(super) async fn refuse_if_offline(tx: &mut Tx, project: &str, workflow: &str) -> Result<()> {
    match is_offline(tx, project, workflow).await? {
        false => Ok(()),
        true => Err(offline_error(project, workflow)),
    }
}

/// Whether the workflow is offline, read inside `tx`.
pub(super) async fn is_offline(tx: &mut Tx, project: &str, workflow: &str) -> Result<bool> {
    let row: Option<(i64,)> = tx.fetch_optional(&offline(project, workflow)).await?;
    Ok(row.is_some())
}

/// The offline workflows of `project`.
pub(super) async fn offline_in(store: &Store, project: &str) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = store
        .db
        .fetch_all(
            Query::select()
                .column(WorkflowOffline::Workflow)
                .from(WorkflowOffline::Table)
                .and_where(Expr::col(WorkflowOffline::Project).eq(project)),
        )
        .await?;
    Ok(rows.into_iter().map(|(w,)| w).collect())
}

/// Excludes, from a select of schedules, those of offline workflows (`project` and
/// `workflow` name the schedule's columns).
pub(super) fn online_only(
    project: impl sea_query::IntoColumnRef,
    workflow: impl sea_query::IntoColumnRef,
) -> sea_query::SimpleExpr {
    Expr::exists(
        Query::select()
            .expr(Expr::val(1))
            .from(WorkflowOffline::Table)
            .and_where(
                Expr::col((WorkflowOffline::Table, WorkflowOffline::Project)).equals(project),
            )
            .and_where(
                Expr::col((WorkflowOffline::Table, WorkflowOffline::Workflow)).equals(workflow),
            )
            .to_owned(),
    )
    .not()
}

/// Removes a workflow's offline mark.
pub(super) async fn clear_offline(tx: &mut Tx, project: &str, workflow: &str) -> Result<()> {
    tx.execute(
        Query::delete()
            .from_table(WorkflowOffline::Table)
            .and_where(Expr::col(WorkflowOffline::Project).eq(project))
            .and_where(Expr::col(WorkflowOffline::Workflow).eq(workflow)),
    )
    .await
}
