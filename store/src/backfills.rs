//! Backfills: one run per schedule time, driven from the store by the leader master.
//!
//! A backfill and its runs are rows; [`Store::advance_backfills`] (called by the leader
//! about once a second) records which runs ended and starts the next ones, each step one
//! transaction. Nothing lives in the CLI or in a master's memory, so a backfill goes on
//! after the CLI disconnects and across a leader change.

use super::codec::{from_json, parse, to_json};
use super::command_rows::{insert_command_statement, notify_masters};
use super::db::Tx;
use super::schema::{ErrorCommand as ErrCmd, WorkflowInstance as Inst};
use super::sql::insert_rows;
use super::users::may_start;
use super::{NewCommand, Store};
use sea_query::{Expr, ExprTrait, Iden, LockType, Order, Query, SelectStatement};
use shoal_common::error::{Error, Result};
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{
    BackfillRunState, BackfillState, CommandKind, Priority, WorkflowState, now_ms,
};

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
enum BackfillRun {
    Table,
    BackfillId,
    Position,
    ScheduleTime,
    State,
    CommandId,
    WorkflowInstanceId,
    Error,
}

const COLUMNS: [Backfill; 14] = [
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
struct BackfillRecord {
    id: i64,
    project: String,
    workflow: String,
    version: i32,
    params: String,
    priority: Option<String>,
    options: String,
    parallel: i32,
    stop_on_failure: bool,
    state: String,
    created_at: i64,
    updated_at: i64,
    follows: Option<i64>,
    stage: i32,
}

#[derive(sqlx::FromRow)]
struct RunRecord {
    position: i32,
    schedule_time: i64,
    state: String,
    command_id: Option<i64>,
    workflow_instance_id: Option<i64>,
    error: Option<String>,
}

impl RunRecord {
    fn decode(&self, backfill: i64) -> Result<BackfillRunRow> {
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
        let skipped: Vec<(i32,)> = tx
            .fetch_all(
                Query::update()
                    .table(BackfillRun::Table)
                    .value(BackfillRun::State, BackfillRunState::Skipped.as_str())
                    .and_where(Expr::col(BackfillRun::BackfillId).is_in(ids))
                    .and_where(Expr::col(BackfillRun::State).eq(BackfillRunState::Pending.as_str()))
                    .returning_col(BackfillRun::Position),
            )
            .await?;
        tx.commit().await?;
        Ok(Cancel::Skipped(skipped.len()))
    }

    /// Records which runs of every running backfill ended, starts the next ones and ends
    /// backfills with nothing left. Returns how many backfills are still running.
    pub async fn advance_backfills(&self) -> Result<usize> {
        let running: Vec<(i64,)> = self
            .db
            .fetch_all(
                Query::select()
                    .column(Backfill::Id)
                    .from(Backfill::Table)
                    .and_where(Expr::col(Backfill::State).eq(BackfillState::Running.as_str()))
                    .order_by(Backfill::Id, Order::Asc),
            )
            .await?;
        let mut still = 0;
        for (id,) in running {
            let mut tx = self.db.begin().await?;
            let (running, started) = advance(&mut tx, id).await?;
            tx.commit().await?;
            if started {
                self.commands_written();
            }
            still += usize::from(running);
        }
        Ok(still)
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
    let (id,): (i64,) = tx.fetch_one(&insert).await?;
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
fn select_runs(backfill: i64) -> SelectStatement {
    Query::select()
        .columns(RUN_COLUMNS)
        .from(BackfillRun::Table)
        .and_where(Expr::col(BackfillRun::BackfillId).eq(backfill))
        .order_by(BackfillRun::Position, Order::Asc)
        .to_owned()
}

/// One step of one backfill, in `tx`: (still running, commands written).
async fn advance(tx: &mut Tx, id: i64) -> Result<(bool, bool)> {
    // Locked, so two masters that both believe they lead take turns (Postgres; SQLite's
    // write transaction is exclusive anyway).
    let record: Option<BackfillRecord> = tx
        .fetch_optional(
            Query::select()
                .columns(COLUMNS)
                .from(Backfill::Table)
                .and_where(Expr::col(Backfill::Id).eq(id))
                .and_where(Expr::col(Backfill::State).eq(BackfillState::Running.as_str()))
                .lock(LockType::Update),
        )
        .await?;
    let Some(backfill) = record else {
        return Ok((false, false));
    };
    if let Some(chain) = backfill.follows
        && earlier_stage_running(tx, chain, backfill.stage).await?
    {
        return Ok((true, false));
    }
    let runs: Vec<RunRecord> = tx.fetch_all(&select_runs(id)).await?;
    let mut states: Vec<BackfillRunState> = Vec::with_capacity(runs.len());
    for run in &runs {
        let mut state = run.decode(id)?.state;
        if state == BackfillRunState::Running {
            state = settle(tx, id, run).await?;
        }
        states.push(state);
    }
    let failed = states.contains(&BackfillRunState::Failure);
    let mut running = states
        .iter()
        .filter(|s| **s == BackfillRunState::Running)
        .count();
    let mut started = false;
    let parallel = usize::try_from(backfill.parallel).unwrap_or(1);
    // A dependent's runs (`with_dependents`, maybe in another project) start in the name
    // of who made the chain: each needs their role there at the moment it would start.
    let refused = match backfill.follows {
        Some(_) if running < parallel && states.contains(&BackfillRunState::Pending) => {
            let options: StartOptions =
                from_json(&format!("backfill {id}"), "options", &backfill.options)?;
            match options.started_by {
                Some(user) => may_start(tx, user, &backfill.project).await?.err(),
                None => None,
            }
        }
        _ => None,
    };
    for (run, state) in runs.iter().zip(states.iter_mut()) {
        if *state != BackfillRunState::Pending {
            continue;
        }
        if let Some(why) = &refused {
            let why = format!(
                "backfill of '{}/{}' was not started: {why}",
                backfill.project, backfill.workflow
            );
            fail_run(tx, id, run.position, &why).await?;
            *state = BackfillRunState::Failure;
        } else if failed && backfill.stop_on_failure {
            set_run_state(tx, id, run.position, BackfillRunState::Skipped).await?;
            *state = BackfillRunState::Skipped;
        } else if running < parallel {
            start_run(tx, &backfill, run).await?;
            *state = BackfillRunState::Running;
            running += 1;
            started = true;
        }
    }
    let open = states
        .iter()
        .any(|s| matches!(s, BackfillRunState::Pending | BackfillRunState::Running));
    let mut update = Query::update();
    update
        .table(Backfill::Table)
        .value(Backfill::UpdatedAt, now_ms())
        .and_where(Expr::col(Backfill::Id).eq(id));
    if !open {
        let all_passed = states.iter().all(|s| *s == BackfillRunState::Success);
        // Runs are skipped without a failure only by a cancel.
        let cancelled = !failed && states.contains(&BackfillRunState::Skipped);
        let end = match (all_passed, cancelled) {
            (true, _) => BackfillState::Success,
            (false, true) => BackfillState::Cancelled,
            (false, false) => BackfillState::Failure,
        };
        update.value(Backfill::State, end.as_str());
    }
    if started || !open {
        tx.execute(&update).await?;
    }
    if started {
        notify_masters(tx).await?;
    }
    Ok((open, started))
}

/// Whether a backfill of chain `chain` (its first one or a follower) with a stage below
/// `stage` is still running.
async fn earlier_stage_running(tx: &mut Tx, chain: i64, stage: i32) -> Result<bool> {
    let found: Option<(i64,)> = tx
        .fetch_optional(
            Query::select()
                .column(Backfill::Id)
                .from(Backfill::Table)
                .and_where(
                    Expr::col(Backfill::Id)
                        .eq(chain)
                        .or(Expr::col(Backfill::Follows).eq(chain)),
                )
                .and_where(Expr::col(Backfill::Stage).lt(stage))
                .and_where(Expr::col(Backfill::State).eq(BackfillState::Running.as_str()))
                .limit(1),
        )
        .await?;
    Ok(found.is_some())
}

/// Where a started run is now: its instance's outcome, or a failure if its command could
/// not become an instance.
async fn settle(tx: &mut Tx, backfill: i64, run: &RunRecord) -> Result<BackfillRunState> {
    let instance: Option<(i64, String)> = match (run.workflow_instance_id, run.command_id) {
        (Some(instance), _) => {
            tx.fetch_optional(
                Query::select()
                    .columns([Inst::Id, Inst::State])
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Id).eq(instance)),
            )
            .await?
        }
        (None, Some(command)) => {
            tx.fetch_optional(
                Query::select()
                    .columns([Inst::Id, Inst::State])
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::CommandId).eq(command)),
            )
            .await?
        }
        (None, None) => None,
    };
    let (state, error) = match &instance {
        Some((instance, state)) => {
            let state: WorkflowState = parse(&format!("workflow_instance {instance}"), state)?;
            match state {
                WorkflowState::Success => (BackfillRunState::Success, None),
                WorkflowState::Failure | WorkflowState::Stopped => {
                    (BackfillRunState::Failure, Some(format!("instance {state}")))
                }
                _ => (BackfillRunState::Running, None),
            }
        }
        None => {
            let error: Option<(String,)> = match run.command_id {
                Some(command) => {
                    tx.fetch_optional(
                        Query::select()
                            .column(ErrCmd::Error)
                            .from(ErrCmd::Table)
                            .and_where(Expr::col(ErrCmd::Id).eq(command)),
                    )
                    .await?
                }
                None => None,
            };
            match error {
                Some((error,)) => (BackfillRunState::Failure, Some(error)),
                None => (BackfillRunState::Running, None),
            }
        }
    };
    let newly_known = run.workflow_instance_id.is_none() && instance.is_some();
    if state != BackfillRunState::Running || newly_known {
        tx.execute(
            Query::update()
                .table(BackfillRun::Table)
                .value(BackfillRun::State, state.as_str())
                .value(
                    BackfillRun::WorkflowInstanceId,
                    instance.map(|(id, _)| id).or(run.workflow_instance_id),
                )
                .value(BackfillRun::Error, error)
                .and_where(Expr::col(BackfillRun::BackfillId).eq(backfill))
                .and_where(Expr::col(BackfillRun::Position).eq(run.position)),
        )
        .await?;
    }
    Ok(state)
}

/// Ends a run that could not start, with why.
async fn fail_run(tx: &mut Tx, backfill: i64, position: i32, error: &str) -> Result<()> {
    tx.execute(
        Query::update()
            .table(BackfillRun::Table)
            .value(BackfillRun::State, BackfillRunState::Failure.as_str())
            .value(BackfillRun::Error, error)
            .and_where(Expr::col(BackfillRun::BackfillId).eq(backfill))
            .and_where(Expr::col(BackfillRun::Position).eq(position)),
    )
    .await
}

async fn set_run_state(
    tx: &mut Tx,
    backfill: i64,
    position: i32,
    state: BackfillRunState,
) -> Result<()> {
    tx.execute(
        Query::update()
            .table(BackfillRun::Table)
            .value(BackfillRun::State, state.as_str())
            .and_where(Expr::col(BackfillRun::BackfillId).eq(backfill))
            .and_where(Expr::col(BackfillRun::Position).eq(position)),
    )
    .await
}

/// Writes the command of one run and marks the run started.
async fn start_run(tx: &mut Tx, backfill: &BackfillRecord, run: &RunRecord) -> Result<()> {
    let row = format!("backfill {}", backfill.id);
    let command = NewCommand {
        kind: CommandKind::Backfill,
        project: backfill.project.clone(),
        workflow: backfill.workflow.clone(),
        version: backfill.version,
        params: from_json(&row, "params", &backfill.params)?,
        priority: backfill
            .priority
            .as_deref()
            .map(|p| parse(&row, p))
            .transpose()?,
        workflow_instance_id: None,
        options: from_json(&row, "options", &backfill.options)?,
        parent_task_id: None,
        schedule_time: Some(run.schedule_time),
    };
    let (command_id,): (i64,) = tx
        .fetch_one(&insert_command_statement(&command, now_ms())?)
        .await?;
    tx.execute(
        Query::update()
            .table(BackfillRun::Table)
            .value(BackfillRun::State, BackfillRunState::Running.as_str())
            .value(BackfillRun::CommandId, command_id)
            .and_where(Expr::col(BackfillRun::BackfillId).eq(backfill.id))
            .and_where(Expr::col(BackfillRun::Position).eq(run.position)),
    )
    .await
}
