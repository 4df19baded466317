//! Cron schedules (one per workflow) and their fires.
//!
//! The leader master plans fires with `schedule::CronSchedule::plan` and writes them with
//! [`Store::fire_schedule`]: the cursor move (compare-and-set on `fired_until`), one
//! `schedule_fire` row per fire (primary key `(schedule_id, schedule_time)`) and its
//! command commit together, so no schedule time ever gets a second command. Fire rows
//! further than [`FIRE_MEMORY_MS`] behind the cursor are dropped by the same transaction:
//! the cursor, which only moves forward, already keeps those times from firing again.

use super::codec::{from_json, parse, to_json};
use super::command_rows::{insert_command_statement, notify_masters};
use super::db::Tx;
use super::schema::WorkflowDefinition as Def;
use super::sql::insert_rows;
use super::{NewCommand, Store};
use sea_query::{Cond, Expr, ExprTrait, Func, Iden, Order, Query, SelectStatement};
use shoal_common::error::{Error, Result};
use shoal_common::schedule::{CronSchedule, Misfire, Window};
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{CommandKind, FailureStrategy, Priority, now_ms};
use std::time::Duration;

#[derive(Iden, Clone, Copy)]
enum Schedule {
    Table,
    Id,
    Project,
    Workflow,
    Cron,
    Timezone,
    StartTime,
    EndTime,
    Enabled,
    Misfire,
    Params,
    Priority,
    WorkerGroup,
    FailureStrategy,
    AlertChannels,
    TimeoutMs,
    Environment,
    FiredUntil,
    CreatedAt,
    UpdatedAt,
}

/// How far behind a schedule's cursor its fire rows are kept (7 days).
pub const FIRE_MEMORY_MS: i64 = 7 * 86_400_000;

#[derive(Iden, Clone, Copy)]
enum ScheduleFire {
    Table,
    ScheduleId,
    ScheduleTime,
    CommandId,
}

const COLUMNS: [Schedule; 19] = [
    Schedule::Id,
    Schedule::Project,
    Schedule::Workflow,
    Schedule::Cron,
    Schedule::Timezone,
    Schedule::StartTime,
    Schedule::EndTime,
    Schedule::Enabled,
    Schedule::Misfire,
    Schedule::Params,
    Schedule::Priority,
    Schedule::WorkerGroup,
    Schedule::FailureStrategy,
    Schedule::AlertChannels,
    Schedule::TimeoutMs,
    Schedule::Environment,
    Schedule::FiredUntil,
    Schedule::CreatedAt,
    Schedule::UpdatedAt,
];

/// What a user says about a schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    pub cron: String,
    pub timezone: String,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub enabled: bool,
    pub misfire: Misfire,
    /// Start options of every run it fires.
    pub params: Params,
    pub priority: Option<Priority>,
    pub worker_group: Option<String>,
    pub failure_strategy: Option<FailureStrategy>,
    pub alert_channels: Vec<String>,
    pub timeout: Option<Duration>,
    pub environment: Option<String>,
}

impl ScheduleSpec {
    /// The parsed cron; an invalid cron, time zone or window is `Error::Invalid`.
    pub fn check(&self) -> Result<CronSchedule> {
        let cron = CronSchedule::parse(&self.cron, &self.timezone)?;
        self.window().check()?;
        Ok(cron)
    }

    pub fn window(&self) -> Window {
        Window {
            start_ms: self.start_time,
            end_ms: self.end_time,
        }
    }

    /// The options each fired run starts with.
    pub fn start_options(&self) -> StartOptions {
        StartOptions {
            timezone: Some(self.timezone.clone()),
            worker_group: self.worker_group.clone(),
            failure_strategy: self.failure_strategy,
            alert_channels: self.alert_channels.clone(),
            timeout: self.timeout,
            environment: self.environment.clone(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub id: i64,
    pub project: String,
    pub workflow: String,
    pub spec: ScheduleSpec,
    /// Every fire at or before this instant has been run or dropped.
    pub fired_until: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(sqlx::FromRow)]
struct ScheduleRecord {
    id: i64,
    project: String,
    workflow: String,
    cron: String,
    timezone: String,
    start_time: Option<i64>,
    end_time: Option<i64>,
    enabled: bool,
    misfire: String,
    params: String,
    priority: Option<String>,
    worker_group: Option<String>,
    failure_strategy: Option<String>,
    alert_channels: String,
    timeout_ms: Option<i64>,
    environment: Option<String>,
    fired_until: i64,
    created_at: i64,
    updated_at: i64,
}

impl ScheduleRecord {
    fn decode(self) -> Result<ScheduleRow> {
        let row = format!("schedule {}", self.id);
        Ok(ScheduleRow {
            spec: ScheduleSpec {
                misfire: parse(&row, &self.misfire)?,
                params: from_json(&row, "params", &self.params)?,
                priority: self.priority.map(|p| parse(&row, &p)).transpose()?,
                failure_strategy: self.failure_strategy.map(|f| parse(&row, &f)).transpose()?,
                alert_channels: from_json(&row, "alert_channels", &self.alert_channels)?,
                timeout: self
                    .timeout_ms
                    .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or_default())),
                environment: self.environment,
                cron: self.cron,
                timezone: self.timezone,
                start_time: self.start_time,
                end_time: self.end_time,
                enabled: self.enabled,
                worker_group: self.worker_group,
            },
            id: self.id,
            project: self.project,
            workflow: self.workflow,
            fired_until: self.fired_until,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The spec's columns with their values, for inserts and updates alike.
fn spec_values(spec: &ScheduleSpec) -> Result<[(Schedule, Expr); 13]> {
    Ok([
        (Schedule::Cron, spec.cron.as_str().into()),
        (Schedule::Timezone, spec.timezone.as_str().into()),
        (Schedule::StartTime, spec.start_time.into()),
        (Schedule::EndTime, spec.end_time.into()),
        (Schedule::Enabled, spec.enabled.into()),
        (Schedule::Misfire, spec.misfire.as_str().into()),
        (Schedule::Params, to_json(&spec.params)?.into()),
        (
            Schedule::Priority,
            spec.priority.map(Priority::as_str).into(),
        ),
        (Schedule::WorkerGroup, spec.worker_group.as_deref().into()),
        (
            Schedule::FailureStrategy,
            spec.failure_strategy.map(FailureStrategy::as_str).into(),
        ),
        (
            Schedule::AlertChannels,
            to_json(&spec.alert_channels)?.into(),
        ),
        (
            Schedule::TimeoutMs,
            spec.timeout
                .map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
                .into(),
        ),
        (Schedule::Environment, spec.environment.as_deref().into()),
    ])
}

impl Store {
    /// Creates the schedule of `project/workflow` (one per workflow: a second one is a
    /// conflict). It fires from now on: nothing before its creation.
    pub async fn create_schedule(
        &self,
        project: &str,
        workflow: &str,
        spec: &ScheduleSpec,
    ) -> Result<ScheduleRow> {
        spec.check()?;
        let now = now_ms();
        let mut tx = self.db.begin().await?;
        latest_version(&mut tx, project, workflow).await?;
        if spec.enabled {
            super::offline::refuse_if_offline(&mut tx, project, workflow).await?;
        }
        let taken: Option<(i64,)> = tx
            .fetch_optional(
                Query::select()
                    .column(Schedule::Id)
                    .from(Schedule::Table)
                    .and_where(Expr::col(Schedule::Project).eq(project))
                    .and_where(Expr::col(Schedule::Workflow).eq(workflow)),
            )
            .await?;
        if let Some((id,)) = taken {
            return Err(Error::Conflict(format!(
                "workflow '{project}/{workflow}' already has schedule {id}; update or delete it"
            )));
        }
        let mut columns = vec![
            Schedule::Project,
            Schedule::Workflow,
            Schedule::FiredUntil,
            Schedule::CreatedAt,
            Schedule::UpdatedAt,
        ];
        let mut values: Vec<Expr> = vec![
            project.into(),
            workflow.into(),
            now.into(),
            now.into(),
            now.into(),
        ];
        for (column, value) in spec_values(spec)? {
            columns.push(column);
            values.push(value);
        }
        let mut insert = Query::insert();
        insert
            .into_table(Schedule::Table)
            .columns(columns)
            .values_panic(values)
            .returning_col(Schedule::Id);
        let id = tx.insert_id(&insert).await?;
        let record: ScheduleRecord = tx.fetch_one(&select_schedule(id)).await?;
        super::audit_object(&format!("schedule {}", record.id));
        tx.commit().await?;
        record.decode()
    }

    /// Schedules of a workflow, or of a project when `workflow` is None.
    pub async fn list_schedules(
        &self,
        project: &str,
        workflow: Option<&str>,
    ) -> Result<Vec<ScheduleRow>> {
        self.read_schedules(
            Cond::all()
                .add(Expr::col(Schedule::Project).eq(project))
                .add_option(workflow.map(|w| Expr::col(Schedule::Workflow).eq(w))),
        )
        .await
    }

    pub async fn get_schedule(&self, id: i64) -> Result<Option<ScheduleRow>> {
        let mut rows = self
            .read_schedules(Cond::all().add(Expr::col(Schedule::Id).eq(id)))
            .await?;
        Ok(rows.pop())
    }

    /// Every enabled schedule: what the leader fires.
    /// Enabled schedules of workflows that are online. (Enabling is refused while a
    /// workflow is offline, but an enable racing the switch to offline could commit
    /// unseen by it; this filter is what keeps the cron from firing then.)
    pub async fn enabled_schedules(&self) -> Result<Vec<ScheduleRow>> {
        let online = super::offline::online_only(
            (Schedule::Table, Schedule::Project),
            (Schedule::Table, Schedule::Workflow),
        );
        self.read_schedules(
            Cond::all()
                .add(Expr::col(Schedule::Enabled).eq(true))
                .add(online),
        )
        .await
    }

    /// Schedules matching `filter`, by id.
    async fn read_schedules(&self, filter: Cond) -> Result<Vec<ScheduleRow>> {
        let records: Vec<ScheduleRecord> = self
            .db
            .fetch_all(
                Query::select()
                    .columns(COLUMNS)
                    .from(Schedule::Table)
                    .cond_where(filter)
                    .order_by(Schedule::Id, Order::Asc),
            )
            .await?;
        records.into_iter().map(ScheduleRecord::decode).collect()
    }

    /// Replaces a schedule's spec. Its cursor restarts at now: a changed cron does not
    /// catch up on fires it would have had.
    pub async fn update_schedule(&self, id: i64, spec: &ScheduleSpec) -> Result<ScheduleRow> {
        spec.check()?;
        let now = now_ms();
        let mut update = Query::update();
        update
            .table(Schedule::Table)
            .values(spec_values(spec)?)
            .value(Schedule::FiredUntil, now)
            .value(Schedule::UpdatedAt, now)
            .and_where(Expr::col(Schedule::Id).eq(id));
        self.change_schedule(id, update).await
    }

    /// Enabling restarts the cursor at now: the time a schedule was off is not a misfire.
    pub async fn set_schedule_enabled(&self, id: i64, enabled: bool) -> Result<ScheduleRow> {
        let now = now_ms();
        let mut update = Query::update();
        update.table(Schedule::Table);
        if enabled {
            // Only when it was off, so enabling twice keeps the cursor. Before `enabled`
            // changes: MySQL assigns left to right, each seeing the ones before.
            update.value(
                Schedule::FiredUntil,
                Expr::case(Expr::col(Schedule::Enabled).eq(false), now)
                    .finally(Expr::col(Schedule::FiredUntil)),
            );
        }
        update
            .value(Schedule::Enabled, enabled)
            .value(Schedule::UpdatedAt, now)
            .and_where(Expr::col(Schedule::Id).eq(id));
        self.change_schedule(id, update).await
    }

    /// Applies `update` to schedule `id`; an update that leaves it enabled is refused
    /// while its workflow is offline.
    async fn change_schedule(
        &self,
        id: i64,
        mut update: sea_query::UpdateStatement,
    ) -> Result<ScheduleRow> {
        update.returning(Query::returning().columns(COLUMNS));
        let mut tx = self.db.begin().await?;
        let record: Option<ScheduleRecord> =
            tx.update_returning(&update, &select_schedule(id)).await?;
        let row = record
            .ok_or_else(|| Error::NotFound(format!("schedule {id}")))?
            .decode()?;
        if row.spec.enabled {
            super::offline::refuse_if_offline(&mut tx, &row.project, &row.workflow).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    /// Deletes a schedule and its fire records; false if there was none.
    pub async fn delete_schedule(&self, id: i64) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            Query::delete()
                .from_table(ScheduleFire::Table)
                .and_where(Expr::col(ScheduleFire::ScheduleId).eq(id)),
        )
        .await?;
        let deleted = tx
            .execute_counted(
                Query::delete()
                    .from_table(Schedule::Table)
                    .and_where(Expr::col(Schedule::Id).eq(id)),
            )
            .await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }

    /// Moves the cursor of `schedule` from `cursor` to `new_cursor` and writes one command
    /// per fire time in `fires`, all or nothing. Returns false, writing nothing, when the
    /// cursor was no longer `cursor` (another leader fired, or the schedule changed) or
    /// the schedule is gone or off.
    pub async fn fire_schedule(
        &self,
        schedule: i64,
        cursor: i64,
        new_cursor: i64,
        fires: &[i64],
    ) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let moved: Option<ScheduleRecord> = tx
            .update_returning(
                Query::update()
                    .table(Schedule::Table)
                    .value(Schedule::FiredUntil, new_cursor)
                    .and_where(Expr::col(Schedule::Id).eq(schedule))
                    .and_where(Expr::col(Schedule::FiredUntil).eq(cursor))
                    .and_where(Expr::col(Schedule::Enabled).eq(true))
                    .returning(Query::returning().columns(COLUMNS)),
                &select_schedule(schedule),
            )
            .await?;
        let Some(row) = moved.map(ScheduleRecord::decode).transpose()? else {
            return Ok(false);
        };
        if !fires.is_empty() {
            let version = latest_version(&mut tx, &row.project, &row.workflow).await?;
            let now = now_ms();
            for &time in fires {
                let command = NewCommand {
                    kind: CommandKind::Scheduled,
                    project: row.project.clone(),
                    workflow: row.workflow.clone(),
                    version,
                    params: row.spec.params.clone(),
                    priority: row.spec.priority,
                    workflow_instance_id: None,
                    options: row.spec.start_options(),
                    parent_task_id: None,
                    schedule_time: Some(time),
                    due_at: None,
                };
                let command_id = tx
                    .insert_id(&insert_command_statement(&command, now)?)
                    .await?;
                tx.execute(&insert_rows(
                    ScheduleFire::Table,
                    [
                        ScheduleFire::ScheduleId,
                        ScheduleFire::ScheduleTime,
                        ScheduleFire::CommandId,
                    ],
                    [[schedule.into(), time.into(), command_id.into()]],
                ))
                .await?;
            }
            notify_masters(&mut tx).await?;
            tx.execute(
                Query::delete()
                    .from_table(ScheduleFire::Table)
                    .and_where(Expr::col(ScheduleFire::ScheduleId).eq(schedule))
                    .and_where(
                        Expr::col(ScheduleFire::ScheduleTime).lt(new_cursor - FIRE_MEMORY_MS),
                    ),
            )
            .await?;
        }
        tx.commit().await?;
        if !fires.is_empty() {
            self.commands_written();
        }
        Ok(true)
    }
}

/// The latest version of a workflow; NotFound when it has none.
/// Schedule `id`'s row, as [`ScheduleRecord`] reads it.
fn select_schedule(id: i64) -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Schedule::Table)
        .and_where(Expr::col(Schedule::Id).eq(id))
        .to_owned()
}

pub(super) async fn latest_version(tx: &mut Tx, project: &str, workflow: &str) -> Result<i32> {
    let (version,): (Option<i32>,) = tx
        .fetch_one(
            Query::select()
                .expr(Func::max(Expr::col(Def::Version)))
                .from(Def::Table)
                .and_where(Expr::col(Def::Project).eq(project))
                .and_where(Expr::col(Def::Name).eq(workflow)),
        )
        .await?;
    version.ok_or_else(|| Error::NotFound(format!("workflow '{project}/{workflow}'")))
}

/// Disables the schedule of a workflow (taken offline).
pub(super) async fn disable_for(tx: &mut Tx, project: &str, workflow: &str) -> Result<()> {
    tx.execute(
        Query::update()
            .table(Schedule::Table)
            .value(Schedule::Enabled, false)
            .value(Schedule::UpdatedAt, now_ms())
            .and_where(Expr::col(Schedule::Project).eq(project))
            .and_where(Expr::col(Schedule::Workflow).eq(workflow)),
    )
    .await
}

/// Deletes the schedule of a workflow being deleted, with its fire records; refused
/// while it is enabled.
pub(super) async fn delete_disabled_for(tx: &mut Tx, project: &str, workflow: &str) -> Result<()> {
    let row: Option<(i64, bool)> = tx
        .fetch_optional(
            Query::select()
                .columns([Schedule::Id, Schedule::Enabled])
                .from(Schedule::Table)
                .and_where(Expr::col(Schedule::Project).eq(project))
                .and_where(Expr::col(Schedule::Workflow).eq(workflow)),
        )
        .await?;
    let Some((id, enabled)) = row else {
        return Ok(());
    };
    if enabled {
        return Err(Error::Conflict(format!(
            "workflow '{project}/{workflow}' has an enabled schedule ({id}); disable it first"
        )));
    }
    tx.execute(
        Query::delete()
            .from_table(ScheduleFire::Table)
            .and_where(Expr::col(ScheduleFire::ScheduleId).eq(id)),
    )
    .await?;
    tx.execute(
        Query::delete()
            .from_table(Schedule::Table)
            .and_where(Expr::col(Schedule::Id).eq(id)),
    )
    .await
}
