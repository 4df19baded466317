//! Driving backfills: the leader's step that records which runs ended, starts the next
//! ones and ends backfills with nothing left, each backfill in one transaction.

use super::backfills::{Backfill, BackfillRecord, BackfillRun, COLUMNS, RunRecord, select_runs};
use super::codec::{from_json, parse};
use super::command_rows::{insert_command_statement, notify_masters};
use super::db::Tx;
use super::schema::{ErrorCommand as ErrCmd, WorkflowInstance as Inst};
use super::users::may_start;
use super::{NewCommand, Store};
use sea_query::{Expr, ExprTrait, LockType, Order, Query};
use shoal_common::error::Result;
use shoal_common::start::StartOptions;
use shoal_common::types::{BackfillRunState, BackfillState, CommandKind, WorkflowState, now_ms};

impl Store {
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
        due_at: None,
    };
    let command_id = tx
        .insert_id(&insert_command_statement(&command, now_ms())?)
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
