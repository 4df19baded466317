//! Run state: the master's per-cycle write batch and the reads of instances and tasks.

use super::codec::to_json;
use super::db::Tx;
use super::instance_rows::{INSTANCE_COLUMNS, InstanceRecord, TaskRecord, select_tasks};
use super::schema::{TaskInstance as Task, WorkflowDefinition as Def, WorkflowInstance as Inst};
use super::sql::insert_rows;
use super::{
    Backend, InstanceFilter, InstanceRow, InstanceUpdate, NewAlert, NewTaskInstance, Store,
    TaskInstanceRow, TaskUpdate, WriteBatch, WriteResult,
};
use sea_query::{
    Alias, Expr, ExprTrait, Func, Iden, IntoColumnRef, IntoIden, LockType, OnConflict, Order,
    Query, SelectStatement, TableRef, UnionType, ValueTuple,
};
use shoal_common::error::Result;
use shoal_common::types::{WorkflowState, now_ms};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

const DEFAULT_LIST_LIMIT: i64 = 100;
/// The most instances one list call returns (the API refuses a larger `limit`).
pub const MAX_INSTANCE_LIST: i64 = 10_000;

impl Store {
    /// Commits one engine cycle's writes in one transaction. Writes for an instance whose
    /// owner epoch is no longer the one in `batch.epochs` are dropped and the instance is
    /// reported fenced: a master that lost an instance can change nothing of it.
    pub async fn write_batch(&self, batch: &WriteBatch) -> Result<WriteResult> {
        if batch.is_empty() {
            return Ok(WriteResult::default());
        }
        let mut tx = self.db.begin().await?;
        let mut fenced = lost_instances(&mut tx, &batch.epochs).await?;
        let new_tasks: Vec<NewTaskInstance> = batch
            .new_tasks
            .iter()
            .filter(|t| !fenced.contains(&t.workflow_instance_id))
            .cloned()
            .collect();
        let new_task_ids = insert_tasks(&mut tx, &new_tasks).await?;
        update_tasks(&mut tx, &batch.task_updates, &fenced).await?;
        let instance_updates: Vec<InstanceUpdate> = batch
            .instance_updates
            .iter()
            .filter(|u| !fenced.contains(&u.id))
            .cloned()
            .collect();
        fenced.extend(update_instances(&mut tx, &instance_updates).await?);
        for (id, message) in batch.instance_messages.iter() {
            if !fenced.contains(id) {
                tx.execute(
                    Query::update()
                        .table(Inst::Table)
                        .value(Inst::Message, message)
                        .and_where(Expr::col(Inst::Id).eq(*id)),
                )
                .await?;
            }
        }
        let exceptions = &batch.exception_runs;
        let children_written = super::children::start_children(&mut tx, &batch.children, &fenced)
            .await?
            | super::children::start_exception_runs(&mut tx, exceptions, &fenced).await?;
        let mut woken = Vec::new();
        for end in batch
            .serial_ended
            .iter()
            .filter(|e| !fenced.contains(&e.instance))
        {
            woken.extend(
                super::serial::wake_next(&mut tx, &end.project, &end.workflow, &end.owner).await?,
            );
        }
        let alerts: Vec<&NewAlert> = batch
            .alerts
            .iter()
            .filter(|a| !fenced.contains(&a.workflow_instance_id))
            .collect();
        super::alerts::insert_alerts(&mut tx, &alerts).await?;
        let logs: Vec<&super::KeptLog> = (batch.task_logs.iter())
            .filter(|(instance, _)| !fenced.contains(instance))
            .map(|(_, log)| log)
            .collect();
        super::task_logs::insert_logs(&mut tx, &logs).await?;
        let offered = super::external::offer(&mut tx, &batch.external_offers, &fenced).await?;
        super::event_waits::subscribe(&mut tx, &batch.event_waits, &fenced).await?;
        let withdrawn: Vec<i64> = (batch.withdrawn.iter())
            .filter(|(instance, _)| !fenced.contains(instance))
            .map(|(_, id)| *id)
            .collect();
        super::external::withdraw(&mut tx, &withdrawn).await?;
        super::event_waits::ended(&mut tx, &withdrawn).await?;
        tx.commit().await?;
        if children_written {
            self.commands_written();
        }
        if offered {
            self.external_offered();
        }
        let mut fenced_instances: Vec<i64> = fenced.into_iter().collect();
        fenced_instances.sort_unstable();
        Ok(WriteResult {
            new_task_ids,
            fenced_instances,
            woken,
        })
    }

    /// Ends a driven instance as failed with `reason`, when its writes cannot be
    /// committed; fenced like every engine write (false: the epoch moved on, or it ended).
    pub async fn fail_instance(&self, id: i64, owner_epoch: i64, reason: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let failed = tx
            .execute_counted(
                Query::update()
                    .table(Inst::Table)
                    .value(Inst::State, WorkflowState::Failure.as_str())
                    .value(Inst::EndedAt, now_ms())
                    .value(Inst::Message, reason)
                    .and_where(Expr::col(Inst::Id).eq(id))
                    .and_where(Expr::col(Inst::OwnerEpoch).eq(owner_epoch))
                    .and_where(Expr::col(Inst::EndedAt).is_null()),
            )
            .await?;
        tx.commit().await?;
        Ok(failed > 0)
    }

    /// Instances matching `filter`, newest first (created_at, then id), `filter.offset`
    /// rows skipped.
    pub async fn list_instances(&self, filter: &InstanceFilter) -> Result<Vec<InstanceRow>> {
        let limit = filter
            .limit
            .unwrap_or(DEFAULT_LIST_LIMIT)
            .clamp(1, MAX_INSTANCE_LIST);
        let mut select = Query::select();
        select.columns(INSTANCE_COLUMNS).from(Inst::Table);
        filter_instances(&mut select, filter)
            .order_by(Inst::CreatedAt, Order::Desc)
            .order_by(Inst::Id, Order::Desc)
            .limit(limit.unsigned_abs())
            .offset(u64::try_from(filter.offset.unwrap_or(0)).unwrap_or(0));
        let records: Vec<InstanceRecord> = self.db.fetch_all(&select).await?;
        records.into_iter().map(InstanceRecord::decode).collect()
    }

    /// How many instances match `filter` (its limit and offset aside).
    pub async fn count_instances(&self, filter: &InstanceFilter) -> Result<i64> {
        let mut select = Query::select();
        select
            .expr(Func::count(Expr::col(Inst::Id)))
            .from(Inst::Table);
        filter_instances(&mut select, filter);
        let (count,): (i64,) = self.db.fetch_optional(&select).await?.unwrap_or_default();
        Ok(count)
    }

    /// The latest run (by created_at, then id) of each workflow of `project` that has
    /// one; an index seek per workflow, then the rows by id (in two statements: MariaDB
    /// loses the outer reference when the first is an `IN` subquery).
    pub async fn latest_instances(&self, project: &str) -> Result<Vec<InstanceRow>> {
        let (w, d) = (Alias::new("w"), Alias::new("d"));
        let latest = Query::select()
            .column((w.clone(), Inst::Id))
            .from_as(Inst::Table, w.clone())
            .and_where(Expr::col((w.clone(), Inst::Project)).equals((d.clone(), Def::Project)))
            .and_where(Expr::col((w.clone(), Inst::Workflow)).equals((d.clone(), Def::Name)))
            .order_by((w.clone(), Inst::CreatedAt), Order::Desc)
            .order_by((w.clone(), Inst::Id), Order::Desc)
            .limit(1)
            .take();
        let workflows = Query::select()
            .distinct()
            .columns([Def::Project, Def::Name])
            .from(Def::Table)
            .and_where(Expr::col(Def::Project).eq(project))
            .take();
        let ids = Query::select()
            .expr(Expr::SubQuery(None, Box::new(latest.into())))
            .from_subquery(workflows, d)
            .take();
        let ids: Vec<(Option<i64>,)> = self.db.fetch_all(&ids).await?;
        let ids: Vec<i64> = ids.into_iter().filter_map(|(id,)| id).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let records: Vec<InstanceRecord> = self
            .db
            .fetch_all(
                Query::select()
                    .columns(INSTANCE_COLUMNS)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Id).is_in(ids)),
            )
            .await?;
        records.into_iter().map(InstanceRecord::decode).collect()
    }

    pub async fn get_instance(&self, id: i64) -> Result<Option<InstanceRow>> {
        let record: Option<InstanceRecord> = self
            .db
            .fetch_optional(
                Query::select()
                    .columns(INSTANCE_COLUMNS)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Id).eq(id)),
            )
            .await?;
        record.map(InstanceRecord::decode).transpose()
    }

    /// Every attempt of every task of an instance, ordered by id.
    pub async fn list_task_instances(
        &self,
        workflow_instance_id: i64,
    ) -> Result<Vec<TaskInstanceRow>> {
        let records: Vec<TaskRecord> = self
            .db
            .fetch_all(
                select_tasks()
                    .and_where(Expr::col(Task::WorkflowInstanceId).eq(workflow_instance_id))
                    .order_by(Task::Id, Order::Asc),
            )
            .await?;
        records.into_iter().map(TaskRecord::decode).collect()
    }

    pub async fn get_task_instance(&self, id: i64) -> Result<Option<TaskInstanceRow>> {
        let record: Option<TaskRecord> = self
            .db
            .fetch_optional(select_tasks().and_where(Expr::col(Task::Id).eq(id)))
            .await?;
        record.map(TaskRecord::decode).transpose()
    }
}

/// Adds the conditions of `filter` (not its limit and offset) to `select`.
fn filter_instances<'a>(
    select: &'a mut SelectStatement,
    filter: &InstanceFilter,
) -> &'a mut SelectStatement {
    select
        .and_where_option(
            filter
                .project
                .as_deref()
                .map(|p| Expr::col(Inst::Project).eq(p)),
        )
        .and_where_option(
            filter
                .workflow
                .as_deref()
                .map(|w| Expr::col(Inst::Workflow).eq(w)),
        )
        .and_where_option(
            filter
                .projects
                .as_ref()
                .map(|ps| Expr::col(Inst::Project).is_in(ps.iter().map(String::as_str))),
        )
        .and_where_option(filter.state.map(|s| Expr::col(Inst::State).eq(s.as_str())))
        .and_where_option(filter.from.map(|t| Expr::col(Inst::CreatedAt).gte(t)))
        .and_where_option(filter.to.map(|t| Expr::col(Inst::CreatedAt).lt(t)))
}

/// The `VALUES` list that carries a batch of updates into one `UPDATE ... FROM`. Its
/// columns keep their default names, column1.., which Postgres and SQLite share (SQLite
/// cannot rename them in the alias); MySQL's are given those names ([`batch_rows`]).
#[derive(Iden, Clone, Copy)]
enum Batch {
    Table,
    #[iden = "column1"]
    C1,
    #[iden = "column2"]
    C2,
    #[iden = "column3"]
    C3,
    #[iden = "column4"]
    C4,
    #[iden = "column5"]
    C5,
    #[iden = "column6"]
    C6,
    #[iden = "column7"]
    C7,
    #[iden = "column8"]
    C8,
}

/// The rows of a batch update as a table named `batch`: a `VALUES` list, or on MySQL
/// (whose `VALUES ROW(..)` MariaDB lacks, and whose column names differ) a `UNION ALL` of
/// one-row selects, which both MySQL and MariaDB join in `UPDATE ... JOIN`.
fn batch_rows(tx: &Tx, rows: Vec<ValueTuple>) -> TableRef {
    if tx.backend() != Backend::Mysql {
        return TableRef::ValuesList(rows, Batch::Table.into_iden());
    }
    let mut selects = rows.into_iter().map(|row| {
        let mut select = Query::select();
        for (i, value) in row.into_iter().enumerate() {
            select.expr_as(Expr::val(value), Alias::new(format!("column{}", i + 1)));
        }
        select
    });
    let mut union = selects.next().unwrap_or_else(Query::select);
    for select in selects {
        union.union(UnionType::All, select);
    }
    TableRef::SubQuery(Box::new(union), Batch::Table.into_iden())
}

fn batch(column: Batch) -> Expr {
    Expr::col((Batch::Table, column))
}

/// The batch's value, or the column's current value where the batch has NULL (`None`).
fn batch_or_keep(column: Batch, current: impl IntoColumnRef) -> Expr {
    Func::coalesce([batch(column), Expr::col(current)]).into()
}

/// One multi-row `INSERT ... RETURNING id` per chunk; ids come back in input order.
/// Inserts new attempts and returns their ids in input order. An attempt already there
/// (same instance, run, task and attempt: a write retried after its outcome was lost) is
/// not added again; its id is returned. MySQL returns nothing: every id is read back.
async fn insert_tasks(tx: &mut Tx, tasks: &[NewTaskInstance]) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(tasks.len());
    for chunk in tasks.chunks(tx.rows_per_statement(12)) {
        let mut insert = insert_rows(
            Task::Table,
            [
                Task::TaskGroup,
                Task::TaskGroupPriority,
                Task::Message,
                Task::WorkflowInstanceId,
                Task::Run,
                Task::Name,
                Task::TaskType,
                Task::State,
                Task::Attempt,
                Task::Priority,
                Task::WorkerGroup,
                Task::SubmittedAt,
            ],
            chunk.iter().map(|t| {
                [
                    t.task_group.as_deref().into(),
                    t.task_group_priority.into(),
                    t.message.as_deref().into(),
                    t.workflow_instance_id.into(),
                    t.run.into(),
                    t.name.as_str().into(),
                    t.task_type.as_str().into(),
                    t.state.as_str().into(),
                    t.attempt.into(),
                    t.priority.as_str().into(),
                    t.worker_group.as_str().into(),
                    t.submitted_at.into(),
                ]
            }),
        );
        // `_on`: MySQL's "do nothing" is an update of the id to itself (not IGNORE, which
        // would also pass over other errors).
        insert.on_conflict(
            OnConflict::columns(ATTEMPT_KEY)
                .do_nothing_on([Task::Id])
                .to_owned(),
        );
        let mut returning = ATTEMPT_KEY.to_vec();
        returning.push(Task::Id);
        insert.returning(Query::returning().columns(returning));
        let returned: Vec<(i64, i32, String, i32, i64)> = if tx.backend() == Backend::Mysql {
            tx.execute(&insert).await?;
            Vec::new()
        } else {
            tx.fetch_all(&insert).await?
        };
        let mut by_key: HashMap<AttemptKey, i64> = returned
            .into_iter()
            .map(|(instance, run, name, attempt, id)| ((instance, run, name, attempt), id))
            .collect();
        if by_key.len() < chunk.len() {
            by_key.extend(existing_attempts(tx, chunk).await?);
        }
        for t in chunk {
            let key = (t.workflow_instance_id, t.run, t.name.clone(), t.attempt);
            let id = by_key.get(&key).copied().ok_or_else(|| {
                shoal_common::Error::Invalid(format!(
                    "attempt {} of task '{}' of instance {} was neither inserted nor found",
                    t.attempt, t.name, t.workflow_instance_id
                ))
            })?;
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The columns that name one attempt.
const ATTEMPT_KEY: [Task; 4] = [
    Task::WorkflowInstanceId,
    Task::Run,
    Task::Name,
    Task::Attempt,
];

/// (instance, run, task, attempt).
type AttemptKey = (i64, i32, String, i32);

/// The ids of the attempts of `chunk` that are already there.
async fn existing_attempts(
    tx: &mut Tx,
    chunk: &[NewTaskInstance],
) -> Result<Vec<(AttemptKey, i64)>> {
    let wanted: HashSet<AttemptKey> = chunk
        .iter()
        .map(|t| (t.workflow_instance_id, t.run, t.name.clone(), t.attempt))
        .collect();
    let instances: HashSet<i64> = chunk.iter().map(|t| t.workflow_instance_id).collect();
    let names: HashSet<&str> = chunk.iter().map(|t| t.name.as_str()).collect();
    // The chunk's instances and names may pair up into more attempts than it holds: those
    // are read too and left out here.
    let mut columns = ATTEMPT_KEY.to_vec();
    columns.push(Task::Id);
    let rows: Vec<(i64, i32, String, i32, i64)> = tx
        .fetch_all(
            Query::select()
                .columns(columns)
                .from(Task::Table)
                .and_where(Expr::col(Task::WorkflowInstanceId).is_in(instances))
                .and_where(Expr::col(Task::Name).is_in(names)),
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|(instance, run, name, attempt, id)| ((instance, run, name, attempt), id))
        .filter(|(key, _)| wanted.contains(key))
        .collect())
}

/// One `UPDATE task_instance ... FROM (VALUES ...)` per chunk; a `None` field is sent as
/// NULL and keeps the stored value. The ids are also listed in an `IN`: without it
/// Postgres joins the list to the table by scanning the whole table until the table is
/// large enough for its costs to favour the primary key, and a cycle's update then took
/// longer with every run kept (17 -> 55 µs a row over three 10,000-task fan-outs).
async fn update_tasks(tx: &mut Tx, updates: &[TaskUpdate], fenced: &HashSet<i64>) -> Result<()> {
    let updates = merge_task_updates(updates);
    for chunk in updates.chunks(tx.rows_per_statement(9)) {
        let rows = chunk
            .iter()
            .map(|u| -> Result<ValueTuple> {
                let output = u.output.as_ref().map(to_json).transpose()?;
                Ok(ValueTuple::Many(vec![
                    u.id.into(),
                    u.state.as_str().into(),
                    u.worker.clone().into(),
                    u.started_at.into(),
                    u.ended_at.into(),
                    u.exit_code.into(),
                    output.into(),
                    u.message.clone().into(),
                ]))
            })
            .collect::<Result<Vec<_>>>()?;
        tx.execute(
            Query::update()
                .table(Task::Table)
                .value(Task::State, batch(Batch::C2))
                .value(
                    Task::Worker,
                    batch_or_keep(Batch::C3, (Task::Table, Task::Worker)),
                )
                .value(
                    Task::StartedAt,
                    batch_or_keep(Batch::C4, (Task::Table, Task::StartedAt)),
                )
                .value(
                    Task::EndedAt,
                    batch_or_keep(Batch::C5, (Task::Table, Task::EndedAt)),
                )
                .value(
                    Task::ExitCode,
                    batch_or_keep(Batch::C6, (Task::Table, Task::ExitCode)),
                )
                .value(
                    Task::Output,
                    batch_or_keep(Batch::C7, (Task::Table, Task::Output)),
                )
                .value(
                    Task::Message,
                    batch_or_keep(Batch::C8, (Task::Table, Task::Message)),
                )
                .from(batch_rows(tx, rows))
                .and_where(Expr::col((Task::Table, Task::Id)).eq(batch(Batch::C1)))
                .and_where(Expr::col((Task::Table, Task::Id)).is_in(chunk.iter().map(|u| u.id)))
                .and_where_option((!fenced.is_empty()).then(|| {
                    Expr::col((Task::Table, Task::WorkflowInstanceId))
                        .is_not_in(fenced.iter().copied())
                })),
        )
        .await?;
    }
    Ok(())
}

/// Instances of `epochs` whose owner epoch moved on (or that are gone). On Postgres the
/// rows stay locked until commit, so a takeover cannot slip in between check and write;
/// SQLite's write transaction is exclusive anyway.
async fn lost_instances(tx: &mut Tx, epochs: &[(i64, i64)]) -> Result<HashSet<i64>> {
    let mut lost = HashSet::new();
    for chunk in epochs.chunks(tx.rows_per_statement(1)) {
        let current = current_epochs(tx, chunk.iter().map(|(id, _)| *id)).await?;
        lost.extend(
            chunk
                .iter()
                .filter(|(id, epoch)| current.get(id) != Some(epoch))
                .map(|(id, _)| *id),
        );
    }
    Ok(lost)
}

/// The owner epochs of instances `ids`, their rows locked until commit (in id order, so
/// that concurrent writers lock alike).
async fn current_epochs(
    tx: &mut Tx,
    ids: impl IntoIterator<Item = i64>,
) -> Result<HashMap<i64, i64>> {
    Ok(tx
        .fetch_all::<(i64, i64)>(
            Query::select()
                .columns([Inst::Id, Inst::OwnerEpoch])
                .from(Inst::Table)
                .and_where(Expr::col(Inst::Id).is_in(ids))
                .order_by(Inst::Id, Order::Asc)
                .lock(LockType::Update),
        )
        .await?
        .into_iter()
        .collect())
}

/// Applies instance updates where `owner_epoch` still matches, one statement per chunk
/// (ids also in an `IN`, as in `update_tasks`); returns the ids that did not match
/// (fenced).
async fn update_instances(tx: &mut Tx, updates: &[InstanceUpdate]) -> Result<Vec<i64>> {
    let updates = merge_instance_updates(updates);
    let mut fenced = Vec::new();
    for chunk in updates.chunks(tx.rows_per_statement(5)) {
        let rows = chunk
            .iter()
            .map(|u| {
                ValueTuple::Many(vec![
                    u.id.into(),
                    u.owner_epoch.into(),
                    u.state.as_str().into(),
                    u.ended_at.into(),
                ])
            })
            .collect();
        let mut update = Query::update();
        update
            .table(Inst::Table)
            .value(Inst::State, batch(Batch::C3))
            .value(
                Inst::EndedAt,
                batch_or_keep(Batch::C4, (Inst::Table, Inst::EndedAt)),
            )
            .from(batch_rows(tx, rows))
            .and_where(Expr::col((Inst::Table, Inst::Id)).eq(batch(Batch::C1)))
            .and_where(Expr::col((Inst::Table, Inst::Id)).is_in(chunk.iter().map(|u| u.id)))
            .and_where(Expr::col((Inst::Table, Inst::OwnerEpoch)).eq(batch(Batch::C2)))
            .returning_col(Inst::Id);
        let applied: HashSet<i64> = if tx.backend() == Backend::Mysql {
            // No RETURNING: the rows whose epoch matches, locked, are the ones updated.
            let current = current_epochs(tx, chunk.iter().map(|u| u.id)).await?;
            tx.execute(&update).await?;
            chunk
                .iter()
                .filter(|u| current.get(&u.id) == Some(&u.owner_epoch))
                .map(|u| u.id)
                .collect()
        } else {
            tx.fetch_all::<(i64,)>(&update)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect()
        };
        fenced.extend(
            chunk
                .iter()
                .map(|u| u.id)
                .filter(|id| !applied.contains(id)),
        );
    }
    Ok(fenced)
}

/// One update per task, in first-seen order; a later update's fields win and its `None`s
/// keep the earlier values. (Two VALUES rows for one id would leave it to the database
/// which one applies.)
fn merge_task_updates(updates: &[TaskUpdate]) -> Vec<TaskUpdate> {
    let mut merged: Vec<TaskUpdate> = Vec::with_capacity(updates.len());
    let mut position: HashMap<i64, usize> = HashMap::with_capacity(updates.len());
    for update in updates {
        match position.entry(update.id) {
            Entry::Vacant(entry) => {
                entry.insert(merged.len());
                merged.push(update.clone());
            }
            Entry::Occupied(entry) => {
                let into = &mut merged[*entry.get()];
                into.state = update.state;
                keep_latest(&mut into.worker, &update.worker);
                keep_latest(&mut into.started_at, &update.started_at);
                keep_latest(&mut into.ended_at, &update.ended_at);
                keep_latest(&mut into.exit_code, &update.exit_code);
                keep_latest(&mut into.output, &update.output);
                keep_latest(&mut into.message, &update.message);
            }
        }
    }
    merged
}

/// Like `merge_task_updates`, for instances: the last state and epoch win.
fn merge_instance_updates(updates: &[InstanceUpdate]) -> Vec<InstanceUpdate> {
    let mut merged: Vec<InstanceUpdate> = Vec::with_capacity(updates.len());
    let mut position: HashMap<i64, usize> = HashMap::with_capacity(updates.len());
    for update in updates {
        match position.entry(update.id) {
            Entry::Vacant(entry) => {
                entry.insert(merged.len());
                merged.push(update.clone());
            }
            Entry::Occupied(entry) => {
                let into = &mut merged[*entry.get()];
                into.owner_epoch = update.owner_epoch;
                into.state = update.state;
                keep_latest(&mut into.ended_at, &update.ended_at);
            }
        }
    }
    merged
}

fn keep_latest<T: Clone>(into: &mut Option<T>, later: &Option<T>) {
    if later.is_some() {
        into.clone_from(later);
    }
}
