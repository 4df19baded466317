//! Backfills: one run per schedule time, driven from the store by the leader master.
//!
//! A backfill and its runs are rows; [`Store::advance_backfills`] (called by the leader
//! about once a second) records which runs ended and starts the next ones, each step one
//! transaction. Nothing lives in the CLI or in a master's memory, so a backfill goes on
//! after the CLI disconnects and across a leader change.

use super::Store;
use super::codec::{parse, to_json};
use super::db::Tx;
use super::sql::insert_rows;
use sea_query::{Expr, ExprTrait, Iden, LockType, Order, Query, SelectStatement};
use shoal_common::error::{Error, Result};
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{BackfillRunState, BackfillState, Priority, now_ms};

#[derive(Iden, Clone, Copy)]
pub(super) enum Backfill {
    Table,
    Id,
    Project,
    Workflow,
    Version,
    Params,
    Priority,
    Options,
    Parallel,
    StopOnFailure,
    State,
    CreatedAt,
    UpdatedAt,
    Follows,
    Stage,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum BackfillRun {
    Table,
    BackfillId,
    Position,
    ScheduleTime,
    State,
    CommandId,
    WorkflowInstanceId,
    Error,
}

pub(super) const COLUMNS: [Backfill; 14] = [
    Backfill::Id,
    Backfill::Project,
    Backfill::Workflow,
    Backfill::Version,
    Backfill::Params,
    Backfill::Priority,
    Backfill::Options,
    Backfill::Parallel,
    Backfill::StopOnFailure,
    Backfill::State,
    Backfill::CreatedAt,
    Backfill::UpdatedAt,
    Backfill::Follows,
    Backfill::Stage,
];

const RUN_COLUMNS: [BackfillRun; 6] = [
    BackfillRun::Position,
    BackfillRun::ScheduleTime,
    BackfillRun::State,
    BackfillRun::CommandId,
    BackfillRun::WorkflowInstanceId,
    BackfillRun::Error,
];

#[derive(Debug, Clone, PartialEq)]
pub struct NewBackfill {
    pub project: String,
    pub workflow: String,
    /// The definition version every run pins.
    pub version: i32,
    pub params: Params,
    pub priority: Option<Priority>,
    pub options: StartOptions,
    /// Runs at once; 1 is serial.
    pub parallel: u32,
    /// A failed run stops the runs not yet started.
    pub stop_on_failure: bool,
    /// Schedule times in the order they start.
    pub times: Vec<i64>,
    /// The first backfill of the chain this one belongs to, and its stage in it (see
    /// [`Chained`]); None for a backfill of its own. [`Store::create_backfills`] sets
    /// `follows` of the backfills it stores after the first.
    pub chained: Option<Chained>,
}

/// A backfill made for a workflow that depends on a backfilled one: it starts when every
/// backfill of `follows`'s chain (that one included) with a lower stage has ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chained {
    pub follows: i64,
    pub stage: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackfillRow {
    pub id: i64,
    pub project: String,
    pub workflow: String,
    pub version: i32,
    pub parallel: u32,
    pub stop_on_failure: bool,
    pub state: BackfillState,
    pub created_at: i64,
    pub updated_at: i64,
    pub chained: Option<Chained>,
    /// In start order.
    pub runs: Vec<BackfillRunRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackfillRunRow {
    pub schedule_time: i64,
    pub state: BackfillRunState,
    pub workflow_instance_id: Option<i64>,
    pub error: Option<String>,
}

#[derive(sqlx::FromRow)]
pub(super) struct BackfillRecord {
    pub(super) id: i64,
    pub(super) project: String,
    pub(super) workflow: String,
    pub(super) version: i32,
    pub(super) params: String,
    pub(super) priority: Option<String>,
    pub(super) options: String,
    pub(super) parallel: i32,
    pub(super) stop_on_failure: bool,
    pub(super) state: String,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
    pub(super) follows: Option<i64>,
    pub(super) stage: i32,
}

#[derive(sqlx::FromRow)]
pub(super) struct RunRecord {
    pub(super) position: i32,
    pub(super) schedule_time: i64,
    pub(super) state: String,
    pub(super) command_id: Option<i64>,
    pub(super) workflow_instance_id: Option<i64>,
    pub(super) error: Option<String>,
}

impl RunRecord {
    pub(super) fn decode(&self, backfill: i64) -> Result<BackfillRunRow> {
        Ok(BackfillRunRow {
            schedule_time: self.schedule_time,
            state: parse(
                &format!("backfill_run {backfill}/{}", self.position),
                &self.state,
            )?,
            workflow_instance_id: self.workflow_instance_id,
            error: self.error.clone(),
        })
    }
}

/// What [`Store::cancel_backfill`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancel {
    /// This many runs not started yet were skipped.
    Skipped(usize),
    /// The backfill does not exist or is not running.
    NotRunning,
    /// A later stage of its chain is in a project the caller may not cancel in: nothing
    /// was changed.
    Refused { backfill: i64, project: String },
}

impl Store {
    /// Stores a backfill; the leader master starts its runs.
    pub async fn create_backfill(&self, backfill: &NewBackfill) -> Result<i64> {
        Ok(self.create_backfills(backfill, &[]).await?.0)
    }

    /// Stores a backfill and the backfills that follow it (`with_dependents`: each one's
    /// `chained.follows` is set to the first one's id) in one transaction: all or none.
    /// Returns the first one's id and the followers' ids.
    pub async fn create_backfills(
        &self,
        first: &NewBackfill,
        followers: &[NewBackfill],
    ) -> Result<(i64, Vec<i64>)> {
        let now = now_ms();
        let mut tx = self.db.begin().await?;
        let id = insert_backfill(&mut tx, first, first.chained, now).await?;
        let mut ids = Vec::with_capacity(followers.len());
        for f in followers {
            let stage = f.chained.map_or(1, |c| c.stage);
            ids.push(insert_backfill(&mut tx, f, Some(Chained { follows: id, stage }), now).await?);
        }
        let followers: Vec<String> = ids.iter().map(i64::to_string).collect();
        super::audit_object(&if followers.is_empty() {
            format!("backfill {id}")
        } else {
            format!("backfill {id}, its dependents' {}", followers.join(", "))
        });
        tx.commit().await?;
        Ok((id, ids))
    }

    pub async fn get_backfill(&self, id: i64) -> Result<Option<BackfillRow>> {
        let record: Option<BackfillRecord> = self
            .db
            .fetch_optional(
                Query::select()
                    .columns(COLUMNS)
                    .from(Backfill::Table)
                    .and_where(Expr::col(Backfill::Id).eq(id)),
            )
            .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        let runs: Vec<RunRecord> = self.db.fetch_all(&select_runs(id)).await?;
        let row = format!("backfill {id}");
        Ok(Some(BackfillRow {
            runs: runs
                .iter()
                .map(|r| r.decode(id))
                .collect::<Result<Vec<_>>>()?,
            state: parse(&row, &record.state)?,
            parallel: u32::try_from(record.parallel).unwrap_or(1),
            id: record.id,
            project: record.project,
            workflow: record.workflow,
            version: record.version,
            stop_on_failure: record.stop_on_failure,
            created_at: record.created_at,
            updated_at: record.updated_at,
            chained: record.follows.map(|follows| Chained {
                follows,
                stage: record.stage,
            }),
        }))
    }

    /// Backfills newest first, of one workflow if `workflow` is set, of `projects` only
    /// if that is set, at most `limit`.
    pub async fn list_backfills(
        &self,
        workflow: Option<(&str, &str)>,
        projects: Option<&[String]>,
        limit: u64,
    ) -> Result<Vec<BackfillRow>> {
        let mut select = Query::select();
        select
            .column(Backfill::Id)
            .from(Backfill::Table)
            .order_by(Backfill::Id, Order::Desc)
            .limit(limit)
            .and_where_option(
                projects
                    .map(|ps| Expr::col(Backfill::Project).is_in(ps.iter().map(String::as_str))),
            );
        if let Some((project, name)) = workflow {
            select
                .and_where(Expr::col(Backfill::Project).eq(project))
                .and_where(Expr::col(Backfill::Workflow).eq(name));
        }
        let ids: Vec<(i64,)> = self.db.fetch_all(&select).await?;
        let mut rows = Vec::with_capacity(ids.len());
        for (id,) in ids {
            // Gone meanwhile only if deleted with its workflow: skip it.
            rows.extend(self.get_backfill(id).await?);
        }
        Ok(rows)
    }

    /// Cancels a running backfill: its runs not started yet are skipped (runs already
    /// started go on), and it ends `cancelled` once those have ended; so do the later
    /// stages of its chain (`with_dependents`), if `may_cancel` says the caller may cancel
    /// backfills of each of their projects, else nothing changes.
    pub async fn cancel_backfill(
        &self,
        id: i64,
        may_cancel: impl Fn(&str) -> bool,
    ) -> Result<Cancel> {
        let mut tx = self.db.begin().await?;
        // The same row lock as a step of the leader, so a run is either started or skipped.
        let running: Option<(Option<i64>, i32)> = tx
            .fetch_optional(
                Query::select()
                    .columns([Backfill::Follows, Backfill::Stage])
                    .from(Backfill::Table)
                    .and_where(Expr::col(Backfill::Id).eq(id))
                    .and_where(Expr::col(Backfill::State).eq(BackfillState::Running.as_str()))
                    .lock(LockType::Update),
            )
            .await?;
        let Some((follows, stage)) = running else {
            return Ok(Cancel::NotRunning);
        };
        // The later stages of its chain would only wait for what no longer comes: they are
        // cancelled with it.
        let chain = follows.unwrap_or(id);
        let later: Vec<(i64, String)> = tx
            .fetch_all(
                Query::select()
                    .columns([Backfill::Id, Backfill::Project])
                    .from(Backfill::Table)
                    .and_where(Expr::col(Backfill::Follows).eq(chain))
                    .and_where(Expr::col(Backfill::Stage).gt(stage))
                    .and_where(Expr::col(Backfill::State).eq(BackfillState::Running.as_str()))
                    .order_by(Backfill::Id, Order::Asc),
            )
            .await?;
        if let Some((backfill, project)) = later.iter().find(|(_, p)| !may_cancel(p)) {
            return Ok(Cancel::Refused {
                backfill: *backfill,
                project: project.clone(),
            });
        }
        let later = later.into_iter().map(|(id, _)| (id,));
        let mut ids = vec![id];
        ids.extend(later.into_iter().map(|(id,)| id));
        let skipped = tx
            .execute_counted(
                Query::update()
                    .table(BackfillRun::Table)
                    .value(BackfillRun::State, BackfillRunState::Skipped.as_str())
                    .and_where(Expr::col(BackfillRun::BackfillId).is_in(ids))
                    .and_where(
                        Expr::col(BackfillRun::State).eq(BackfillRunState::Pending.as_str()),
                    ),
            )
            .await?;
        tx.commit().await?;
        Ok(Cancel::Skipped(skipped as usize))
    }
}

/// Inserts one backfill and its runs in `tx`; `chained` as stored. Returns its id.
async fn insert_backfill(
    tx: &mut Tx,
    backfill: &NewBackfill,
    chained: Option<Chained>,
    now: i64,
) -> Result<i64> {
    if backfill.times.is_empty() {
        return Err(Error::Invalid("the backfill has no schedule times".into()));
    }
    let parallel = i32::try_from(Ord::max(backfill.parallel, 1)).unwrap_or(i32::MAX);
    // Every column but the id, in `COLUMNS` order.
    let mut insert = Query::insert();
    insert
        .into_table(Backfill::Table)
        .columns(COLUMNS[1..].iter().copied())
        .values_panic([
            backfill.project.as_str().into(),
            backfill.workflow.as_str().into(),
            backfill.version.into(),
            to_json(&backfill.params)?.into(),
            backfill.priority.map(Priority::as_str).into(),
            to_json(&backfill.options)?.into(),
            parallel.into(),
            backfill.stop_on_failure.into(),
            BackfillState::Running.as_str().into(),
            now.into(),
            now.into(),
            chained.map(|c| c.follows).into(),
            chained.map_or(0, |c| c.stage).into(),
        ])
        .returning_col(Backfill::Id);
    let id = tx.insert_id(&insert).await?;
    let runs: Vec<(i32, i64)> = (0..).zip(backfill.times.iter().copied()).collect();
    for chunk in runs.chunks(tx.rows_per_statement(4)) {
        tx.execute(&insert_rows(
            BackfillRun::Table,
            [
                BackfillRun::BackfillId,
                BackfillRun::Position,
                BackfillRun::ScheduleTime,
                BackfillRun::State,
            ],
            chunk.iter().map(|(position, time)| {
                [
                    id.into(),
                    (*position).into(),
                    (*time).into(),
                    BackfillRunState::Pending.as_str().into(),
                ]
            }),
        ))
        .await?;
    }
    Ok(id)
}

/// Deletes the backfills of `project` with their runs (a deleted project's). Err(Conflict)
/// while one is running: it would start more runs.
pub(super) async fn delete_of_project(tx: &mut Tx, project: &str) -> Result<()> {
    let of_project = Query::select()
        .column(Backfill::Id)
        .from(Backfill::Table)
        .and_where(Expr::col(Backfill::Project).eq(project))
        .to_owned();
    let running: Option<(i64,)> = tx
        .fetch_optional(
            of_project
                .clone()
                .and_where(Expr::col(Backfill::State).eq(BackfillState::Running.as_str()))
                .limit(1),
        )
        .await?;
    if let Some((id,)) = running {
        return Err(Error::Conflict(format!(
            "project '{project}' has a running backfill ({id}); cancel it first \
             (`shoal backfill cancel {id}`)"
        )));
    }
    tx.execute(
        Query::delete()
            .from_table(BackfillRun::Table)
            .and_where(Expr::col(BackfillRun::BackfillId).in_subquery(of_project)),
    )
    .await?;
    tx.execute(
        Query::delete()
            .from_table(Backfill::Table)
            .and_where(Expr::col(Backfill::Project).eq(project)),
    )
    .await
}

/// The runs of a backfill in start order.
pub(super) fn select_runs(backfill: i64) -> SelectStatement {
    Query::select()
        .columns(RUN_COLUMNS)
        .from(BackfillRun::Table)
        .and_where(Expr::col(BackfillRun::BackfillId).eq(backfill))
        .order_by(BackfillRun::Position, Order::Asc)
        .to_owned()
}
