//! Execution types: a serial workflow runs one instance at a time.
//!
//! Every decision about a serial workflow's runs is taken under its lock (`lock_key`,
//! a Postgres advisory transaction lock; SQLite's write transaction is exclusive): when a
//! start is claimed (run, wait or be discarded) and when a run ends (the oldest waiting
//! run starts, driven by the master that ended the previous one). Both happen in the
//! transaction that writes the state they decide, so two masters never start two runs of
//! one serial workflow, and a crash leaves either the old or the new state.

use super::db::Tx;
use super::definitions::load_definition;
use super::instance_rows::insert_instances;
use super::instance_rows::{INSTANCE_COLUMNS, InstanceRecord, select_instance};
use super::schema::WorkflowInstance as Inst;
use super::{ClaimedInstance, InstanceRow, Store};
use sea_query::{Alias, Expr, ExprTrait, Order, Query};
use shoal_common::definition::WorkflowDef;
use shoal_common::error::{Error, Result};
use shoal_common::types::{CommandKind, ExecutionType, WorkflowState, now_ms};

/// States of a run that holds its serial workflow: driven, or waiting its turn.
const ACTIVE: [WorkflowState; 4] = [
    WorkflowState::Running,
    WorkflowState::ReadyPause,
    WorkflowState::ReadyStop,
    WorkflowState::SerialWait,
];

async fn lock_workflow(tx: &mut Tx, project: &str, workflow: &str) -> Result<()> {
    tx.lock_key(&format!("serial/{project}/{workflow}")).await
}

/// Active runs of a workflow, oldest first: (id, state).
async fn active_runs(tx: &mut Tx, project: &str, workflow: &str) -> Result<Vec<(i64, String)>> {
    tx.fetch_all(
        Query::select()
            .columns([Inst::Id, Inst::State])
            .from(Inst::Table)
            .and_where(Expr::col(Inst::Project).eq(project))
            .and_where(Expr::col(Inst::Workflow).eq(workflow))
            .and_where(Expr::col(Inst::State).is_in(ACTIVE.iter().map(|s| s.as_str())))
            .order_by(Inst::Id, Order::Asc),
    )
    .await
}

fn waiting(state: &str) -> bool {
    state == WorkflowState::SerialWait.as_str()
}

/// Inserts a claimed start of a serial workflow as running, waiting or discarded, as its
/// execution type says; returns it when it runs now.
pub(super) async fn admit(
    tx: &mut Tx,
    mut row: InstanceRow,
    definition: WorkflowDef,
    now: i64,
) -> Result<Option<ClaimedInstance>> {
    lock_workflow(tx, &row.project, &row.workflow).await?;
    let active = active_runs(tx, &row.project, &row.workflow).await?;
    let running = active.iter().find(|(_, s)| !waiting(s)).map(|(id, _)| *id);
    let queued: Vec<i64> = active
        .iter()
        .filter(|(_, s)| waiting(s))
        .map(|(id, _)| *id)
        .collect();
    let kind = definition.execution_type;
    // The run this one would follow: serial_priority discards the waiting ones below.
    let ahead = match kind {
        ExecutionType::SerialPriority => running,
        _ => queued.last().copied().or(running),
    };
    match (kind, ahead) {
        (_, None) => {}
        (ExecutionType::SerialDiscard, Some(other)) => {
            row.state = WorkflowState::Stopped;
            row.owner = None;
            row.started_at = None;
            row.ended_at = Some(now);
            row.message = Some(format!(
                "discarded: instance {other} of this workflow is active (execution type serial_discard)"
            ));
        }
        (_, Some(other)) => {
            row.state = WorkflowState::SerialWait;
            row.owner = None;
            row.started_at = None;
            row.message = Some(format!(
                "waiting for instance {other} of this workflow to end (execution type {kind})"
            ));
        }
    }
    let ids = insert_instances(tx, &[&row]).await?;
    row.id = *ids.get(&row.command_id).ok_or_else(|| {
        Error::Corrupt(format!(
            "no workflow_instance returned for command {}",
            row.command_id
        ))
    })?;
    if kind == ExecutionType::SerialPriority && !queued.is_empty() {
        tx.execute(
            Query::update()
                .table(Inst::Table)
                .value(Inst::State, WorkflowState::Stopped.as_str())
                .value(Inst::EndedAt, now)
                .value(
                    Inst::Message,
                    format!(
                        "discarded: replaced by the newer instance {} (execution type serial_priority)",
                        row.id
                    ),
                )
                .and_where(Expr::col(Inst::Id).is_in(queued))
                .and_where(Expr::col(Inst::State).eq(WorkflowState::SerialWait.as_str())),
        )
        .await?;
    }
    Ok(
        (row.state == WorkflowState::Running).then_some(ClaimedInstance {
            kind: CommandKind::Start,
            instance: row,
            definition,
            tasks: Vec::new(),
        }),
    )
}

/// Another active run of the instance's workflow, if any (a resume, rerun or resubmit of
/// a serial workflow's run must not overlap it).
pub(super) async fn other_active(tx: &mut Tx, instance: &InstanceRow) -> Result<Option<i64>> {
    lock_workflow(tx, &instance.project, &instance.workflow).await?;
    let active = active_runs(tx, &instance.project, &instance.workflow).await?;
    Ok(active
        .into_iter()
        .map(|(id, _)| id)
        .find(|id| *id != instance.id))
}

/// Starts the oldest waiting run of a workflow if none runs, owned by `owner`. A run
/// whose definition version cannot be read fails (with the reason) and the next one is
/// tried, so a bad row never blocks the queue.
pub(super) async fn wake_next(
    tx: &mut Tx,
    project: &str,
    workflow: &str,
    owner: &str,
) -> Result<Option<ClaimedInstance>> {
    lock_workflow(tx, project, workflow).await?;
    loop {
        let active = active_runs(tx, project, workflow).await?;
        if active.iter().any(|(_, s)| !waiting(s)) {
            return Ok(None);
        }
        let Some((next, _)) = active.first() else {
            return Ok(None);
        };
        let now = now_ms();
        let record: Option<InstanceRecord> = tx
            .update_returning(
                Query::update()
                    .table(Inst::Table)
                    .value(Inst::State, WorkflowState::Running.as_str())
                    .value(Inst::Owner, owner)
                    .value(Inst::OwnerEpoch, Expr::col(Inst::OwnerEpoch).add(1))
                    .value(Inst::StartedAt, now)
                    .value(Inst::Message, Option::<String>::None)
                    .and_where(Expr::col(Inst::Id).eq(*next))
                    .and_where(Expr::col(Inst::State).eq(WorkflowState::SerialWait.as_str()))
                    .returning(Query::returning().columns(INSTANCE_COLUMNS)),
                &select_instance(*next),
            )
            .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        let instance = record.decode()?;
        match load_definition(tx, project, workflow, instance.version).await? {
            Ok(definition) => {
                return Ok(Some(ClaimedInstance {
                    kind: CommandKind::Start,
                    instance,
                    definition,
                    tasks: Vec::new(),
                }));
            }
            Err(reason) => {
                tracing::warn!(instance_id = instance.id, %reason, "waiting run cannot start");
                tx.execute(
                    Query::update()
                        .table(Inst::Table)
                        .value(Inst::State, WorkflowState::Failure.as_str())
                        .value(Inst::EndedAt, now)
                        .value(Inst::Message, reason)
                        .and_where(Expr::col(Inst::Id).eq(instance.id)),
                )
                .await?;
            }
        }
    }
}

impl Store {
    /// Starts, driven by `owner`, the oldest waiting run of every serial workflow that has
    /// waiting runs but none running: a safety net for runs whose predecessor ended without
    /// waking them (e.g. its definition version was parallel).
    pub async fn wake_stranded_runs(&self, owner: &str) -> Result<Vec<ClaimedInstance>> {
        let (w, a) = (Alias::new("w"), Alias::new("a"));
        let running = [
            WorkflowState::Running,
            WorkflowState::ReadyPause,
            WorkflowState::ReadyStop,
        ];
        let stranded: Vec<(String, String)> = self
            .db
            .fetch_all(
                Query::select()
                    .distinct()
                    .columns([(w.clone(), Inst::Project), (w.clone(), Inst::Workflow)])
                    .from_as(Inst::Table, w.clone())
                    .and_where(
                        Expr::col((w.clone(), Inst::State)).eq(WorkflowState::SerialWait.as_str()),
                    )
                    .and_where(
                        Expr::exists(
                            Query::select()
                                .expr(Expr::val(1))
                                .from_as(Inst::Table, a.clone())
                                .and_where(
                                    Expr::col((a.clone(), Inst::Project))
                                        .equals((w.clone(), Inst::Project)),
                                )
                                .and_where(
                                    Expr::col((a.clone(), Inst::Workflow))
                                        .equals((w.clone(), Inst::Workflow)),
                                )
                                .and_where(
                                    Expr::col((a.clone(), Inst::State))
                                        .is_in(running.iter().map(|s| s.as_str())),
                                )
                                .take(),
                        )
                        .not(),
                    ),
            )
            .await?;
        let mut woken = Vec::new();
        for (project, workflow) in stranded {
            let mut tx = self.db.begin().await?;
            let claimed = wake_next(&mut tx, &project, &workflow, owner).await?;
            tx.commit().await?;
            woken.extend(claimed);
        }
        Ok(woken)
    }

    /// Discards a run that waits its turn (an operator's stop); false if it no longer waits.
    pub async fn discard_waiting_run(&self, id: i64, message: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let updated = tx
            .execute_counted(
                Query::update()
                    .table(Inst::Table)
                    .value(Inst::State, WorkflowState::Stopped.as_str())
                    .value(Inst::EndedAt, now_ms())
                    .value(Inst::Message, message)
                    .and_where(Expr::col(Inst::Id).eq(id))
                    .and_where(Expr::col(Inst::State).eq(WorkflowState::SerialWait.as_str())),
            )
            .await?;
        tx.commit().await?;
        Ok(updated > 0)
    }
}
