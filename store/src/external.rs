//! External tasks: offered with their attempt's `waiting` row, taken by an external
//! worker's poll (a lease: the worker, a token's hash, an expiry), kept by heartbeats, and
//! ended like any waiting attempt by one conditional write (`Store::end_waiting`): its
//! worker's completion, or the master's when the lease lapsed or the timeout passed.

use super::db::Tx;
use super::schema::{
    ExternalTask as Ext, ExternalWorker as Seen, TaskInstance as Task, TaskLog as Log,
    WorkflowInstance as Inst,
};
use super::signal::{EXTERNAL_CHANNEL, Signal, Written};
use super::sql::insert_rows;
use super::{Backend, Store};
use sea_query::{
    Expr, ExprTrait, LockBehavior, LockType, OnConflict, Order, Query, SelectStatement,
};
use shoal_common::error::Result;
use shoal_common::types::{TaskState, now_ms};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Ids one read names at most: below SQLite's and Postgres' limits of bound values.
pub(super) const IDS_PER_READ: usize = 10_000;

/// The most of an external task's log the store keeps: its last bytes.
pub const EXTERNAL_LOG_BYTES: usize = 256 * 1024;

/// An external task offered to external workers on `queue`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalOffer {
    pub task_instance_id: i64,
    pub workflow_instance_id: i64,
    pub project: String,
    pub queue: String,
    /// The task's params expanded, as a JSON object; sealed with the secret key when
    /// they hold a secret.
    pub params: String,
    pub sealed: bool,
    pub lease_ms: i64,
}

/// An external task a poll took: what its worker is given.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Leased {
    pub task_instance_id: i64,
    pub workflow_instance_id: i64,
    pub project: String,
    pub workflow: String,
    pub task: String,
    pub attempt: i32,
    pub queue: String,
    pub params: String,
    pub sealed: bool,
    pub lease_expires_at: i64,
}

/// An external task's offer as it stands: who holds it, until when.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Lease {
    pub worker: Option<String>,
    pub token_hash: Option<String>,
    pub lease_expires_at: Option<i64>,
}

/// An external task's offer as the task's page shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Offered {
    pub task_instance_id: i64,
    pub queue: String,
    /// Who took it; None while it waits for a poll.
    pub worker: Option<String>,
    pub lease_expires_at: Option<i64>,
}

/// One queue of one project: its offers and the external workers seen on it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalQueue {
    pub project: String,
    pub queue: String,
    /// Offered, not taken.
    pub waiting: i64,
    /// Taken, under a lease.
    pub taken: i64,
    /// Seen since the time asked for, the latest first.
    pub workers: Vec<SeenWorker>,
}

/// An external worker as last seen on a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenWorker {
    pub name: String,
    /// Its last take or heartbeat on the queue (ms since the epoch).
    pub last_seen_at: i64,
    /// The queue's tasks it holds now.
    pub holding: i64,
}

/// Who ends a waiting attempt ([`Store::end_waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder<'a> {
    /// The API, a callback, the master's timeout: whoever comes first.
    Anyone,
    /// The external worker holding the lease whose token has this hash.
    Lease(&'a str),
    /// The master, for a lease that lapsed before this time (unless a heartbeat renewed
    /// it meanwhile).
    LapsedBefore(i64),
}

impl Holder<'_> {
    /// The condition on the attempt's id that makes this holder's write count.
    pub(super) fn condition(self, id: i64) -> Option<sea_query::SimpleExpr> {
        let offer = |cond: sea_query::SimpleExpr| {
            Expr::col(Task::Id).in_subquery(
                Query::select()
                    .column(Ext::TaskInstanceId)
                    .from(Ext::Table)
                    .and_where(Expr::col(Ext::TaskInstanceId).eq(id))
                    .and_where(cond)
                    .take(),
            )
        };
        match self {
            Holder::Anyone => None,
            Holder::Lease(hash) => Some(offer(Expr::col(Ext::TokenHash).eq(hash))),
            Holder::LapsedBefore(at) => Some(offer(Expr::col(Ext::LeaseExpiresAt).lt(at))),
        }
    }
}

/// Records `offers` in `tx` (those of fenced instances aside), NOTIFYing polls on
/// Postgres at the commit; returns whether any was written.
pub(super) async fn offer(
    tx: &mut Tx,
    offers: &[ExternalOffer],
    fenced: &HashSet<i64>,
) -> Result<bool> {
    let offers: Vec<&ExternalOffer> = offers
        .iter()
        .filter(|o| !fenced.contains(&o.workflow_instance_id))
        .collect();
    if offers.is_empty() {
        return Ok(false);
    }
    let now = now_ms();
    const COLUMNS: [Ext; 8] = [
        Ext::TaskInstanceId,
        Ext::WorkflowInstanceId,
        Ext::Project,
        Ext::Queue,
        Ext::Params,
        Ext::Sealed,
        Ext::LeaseMs,
        Ext::OfferedAt,
    ];
    // A foreach may offer thousands at once: as many rows a statement as its binds allow.
    for chunk in offers.chunks(tx.rows_per_statement(COLUMNS.len())) {
        tx.execute(&insert_rows(
            Ext::Table,
            COLUMNS,
            chunk.iter().map(|o| {
                [
                    o.task_instance_id.into(),
                    o.workflow_instance_id.into(),
                    o.project.clone().into(),
                    o.queue.clone().into(),
                    o.params.clone().into(),
                    o.sealed.into(),
                    o.lease_ms.into(),
                    now.into(),
                ]
            }),
        ))
        .await?;
    }
    notify(tx).await?;
    Ok(true)
}

/// Wakes Postgres polls at the commit of `tx` (standalone's: [`Store::external_offered`]).
async fn notify(tx: &mut Tx) -> Result<()> {
    if tx.backend() == Backend::Postgres {
        tx.execute(
            Query::select().expr(
                sea_query::Func::cust("pg_notify")
                    .arg(EXTERNAL_CHANNEL)
                    .arg(""),
            ),
        )
        .await?;
    }
    Ok(())
}

/// `columns` of the offer of attempt `id`.
fn select_offer<const N: usize>(id: i64, columns: [Ext; N]) -> SelectStatement {
    Query::select()
        .columns(columns)
        .from(Ext::Table)
        .and_where(Expr::col(Ext::TaskInstanceId).eq(id))
        .to_owned()
}

/// Deletes the offers of attempts `ids`, which ended.
pub(super) async fn withdraw(tx: &mut Tx, ids: &[i64]) -> Result<()> {
    for chunk in ids.chunks(tx.rows_per_statement(1)) {
        tx.execute(
            Query::delete()
                .from_table(Ext::Table)
                .and_where(Expr::col(Ext::TaskInstanceId).is_in(chunk.iter().copied())),
        )
        .await?;
    }
    Ok(())
}

impl Store {
    /// Wakes this process' polls after a commit that offered external tasks (Postgres
    /// polls are woken by the NOTIFY of the transaction; MySQL ones elsewhere poll).
    pub(super) fn external_offered(&self) {
        self.db.written(Written::External);
    }

    /// Wakes when external tasks were offered (on Postgres over a connection of its own).
    pub async fn external_signal(&self) -> Result<Signal> {
        self.db.signal(Written::External).await
    }

    /// Takes up to `max` untaken external tasks of `queues` (of `projects` only, when
    /// given), oldest first, for `worker` under the token whose hash is `token_hash`.
    /// Concurrent polls take different tasks.
    pub async fn take_external(
        &self,
        queues: &[String],
        projects: Option<&[String]>,
        worker: &str,
        token_hash: &str,
        max: u64,
    ) -> Result<Vec<Leased>> {
        let mut tx = self.db.begin().await?;
        let mut ready = Query::select();
        ready
            .column((Ext::Table, Ext::TaskInstanceId))
            .from(Ext::Table)
            .inner_join(
                Task::Table,
                Expr::col((Task::Table, Task::Id)).equals((Ext::Table, Ext::TaskInstanceId)),
            )
            .and_where(Expr::col((Ext::Table, Ext::TokenHash)).is_null())
            .and_where(Expr::col((Ext::Table, Ext::Queue)).is_in(queues.iter().cloned()))
            .and_where(Expr::col((Task::Table, Task::State)).eq(TaskState::Waiting.as_str()))
            .order_by((Ext::Table, Ext::TaskInstanceId), Order::Asc)
            .limit(max);
        if let Some(projects) = projects {
            ready.and_where(Expr::col((Ext::Table, Ext::Project)).is_in(projects.iter().cloned()));
        }
        match tx.backend() {
            Backend::Postgres => {
                ready.lock_with_tables_behavior(
                    LockType::Update,
                    [Ext::Table],
                    LockBehavior::SkipLocked,
                );
            }
            // MariaDB has no `FOR UPDATE OF`: the attempts' rows are locked too, briefly.
            Backend::Mysql => {
                ready.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
            }
            // Its write transaction is exclusive.
            Backend::Sqlite => {}
        }
        let ids: Vec<(i64,)> = tx.fetch_all(&ready).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
        let now = now_ms();
        tx.execute(
            Query::update()
                .table(Ext::Table)
                .value(Ext::Worker, worker)
                .value(Ext::TokenHash, token_hash)
                .value(Ext::LeaseExpiresAt, Expr::col(Ext::LeaseMs).add(now))
                .and_where(Expr::col(Ext::TaskInstanceId).is_in(ids.iter().copied())),
        )
        .await?;
        tx.execute(
            Query::update()
                .table(Task::Table)
                .value(Task::Worker, worker)
                .value(Task::Message, format!("taken by external worker {worker}"))
                .and_where(Expr::col(Task::Id).is_in(ids.iter().copied())),
        )
        .await?;
        let taken: Vec<Leased> = tx
            .fetch_all(
                Query::select()
                    .expr_as(
                        Expr::col((Ext::Table, Ext::TaskInstanceId)),
                        "task_instance_id",
                    )
                    .expr_as(
                        Expr::col((Ext::Table, Ext::WorkflowInstanceId)),
                        "workflow_instance_id",
                    )
                    .expr_as(Expr::col((Ext::Table, Ext::Project)), "project")
                    .expr_as(Expr::col((Inst::Table, Inst::Workflow)), "workflow")
                    .expr_as(Expr::col((Task::Table, Task::Name)), "task")
                    .expr_as(Expr::col((Task::Table, Task::Attempt)), "attempt")
                    .expr_as(Expr::col((Ext::Table, Ext::Queue)), "queue")
                    .expr_as(Expr::col((Ext::Table, Ext::Params)), "params")
                    .expr_as(Expr::col((Ext::Table, Ext::Sealed)), "sealed")
                    .expr_as(
                        Expr::col((Ext::Table, Ext::LeaseExpiresAt)),
                        "lease_expires_at",
                    )
                    .from(Ext::Table)
                    .inner_join(
                        Task::Table,
                        Expr::col((Task::Table, Task::Id))
                            .equals((Ext::Table, Ext::TaskInstanceId)),
                    )
                    .inner_join(
                        Inst::Table,
                        Expr::col((Inst::Table, Inst::Id))
                            .equals((Ext::Table, Ext::WorkflowInstanceId)),
                    )
                    .and_where(Expr::col((Ext::Table, Ext::TaskInstanceId)).is_in(ids))
                    .order_by((Ext::Table, Ext::TaskInstanceId), Order::Asc),
            )
            .await?;
        let queues = taken.iter().map(|t| (t.project.clone(), t.queue.clone()));
        seen(&mut tx, worker, queues.collect(), now).await?;
        tx.commit().await?;
        Ok(taken)
    }

    /// The offer of attempt `id`, if it is (still) offered.
    pub async fn external_lease(&self, id: i64) -> Result<Option<Lease>> {
        self.db
            .fetch_optional(
                Query::select()
                    .columns([Ext::Worker, Ext::TokenHash, Ext::LeaseExpiresAt])
                    .from(Ext::Table)
                    .and_where(Expr::col(Ext::TaskInstanceId).eq(id)),
            )
            .await
    }

    /// Renews the lease of waiting attempt `id` held under the token whose hash is
    /// `token_hash`; returns its new expiry, or None when that lease is not current (the
    /// attempt ended, or another lease holds it).
    pub async fn renew_lease(&self, id: i64, token_hash: &str) -> Result<Option<i64>> {
        let mut tx = self.db.begin().await?;
        let now = now_ms();
        let columns = [Ext::LeaseExpiresAt, Ext::Project, Ext::Queue, Ext::Worker];
        let renewed: Option<(i64, String, String, String)> = tx
            .update_returning(
                Query::update()
                    .table(Ext::Table)
                    .value(Ext::LeaseExpiresAt, Expr::col(Ext::LeaseMs).add(now))
                    .and_where(Expr::col(Ext::TaskInstanceId).eq(id))
                    .and_where(Expr::col(Ext::TokenHash).eq(token_hash))
                    .and_where(waiting(id))
                    .returning(Query::returning().columns(columns)),
                &select_offer(id, columns),
            )
            .await?;
        let Some((at, project, queue, worker)) = renewed else {
            return Ok(None);
        };
        seen(&mut tx, &worker, BTreeSet::from([(project, queue)]), now).await?;
        tx.commit().await?;
        Ok(Some(at))
    }

    /// Hands the lease of waiting attempt `id` held under the token whose hash is
    /// `token_hash` back: the attempt is offered on its queue again, for the next poll.
    /// Returns the queue, or None when that lease is not current.
    pub async fn release_lease(&self, id: i64, token_hash: &str) -> Result<Option<String>> {
        let mut tx = self.db.begin().await?;
        let released: Option<(String,)> = tx
            .update_returning(
                Query::update()
                    .table(Ext::Table)
                    .value(Ext::Worker, Option::<String>::None)
                    .value(Ext::TokenHash, Option::<String>::None)
                    .value(Ext::LeaseExpiresAt, Option::<i64>::None)
                    .and_where(Expr::col(Ext::TaskInstanceId).eq(id))
                    .and_where(Expr::col(Ext::TokenHash).eq(token_hash))
                    .and_where(waiting(id))
                    .returning(Query::returning().column(Ext::Queue)),
                &select_offer(id, [Ext::Queue]),
            )
            .await?;
        let Some((queue,)) = released else {
            return Ok(None);
        };
        tx.execute(
            Query::update()
                .table(Task::Table)
                .value(Task::Worker, Option::<String>::None)
                .value(
                    Task::Message,
                    format!("released by its external worker: back on queue {queue}"),
                )
                .and_where(Expr::col(Task::Id).eq(id)),
        )
        .await?;
        notify(&mut tx).await?;
        tx.commit().await?;
        self.external_offered();
        Ok(Some(queue))
    }

    /// Appends `text` to the log of waiting attempt `id` held under the token whose hash
    /// is `token_hash` (its last [`EXTERNAL_LOG_BYTES`] are kept); false when that lease
    /// is not current.
    pub async fn append_external_log(&self, id: i64, token_hash: &str, text: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let held: Option<(i64,)> = tx
            .fetch_optional(
                Query::select()
                    .column(Ext::TaskInstanceId)
                    .from(Ext::Table)
                    .and_where(Expr::col(Ext::TaskInstanceId).eq(id))
                    .and_where(Expr::col(Ext::TokenHash).eq(token_hash))
                    .and_where(waiting(id)),
            )
            .await?;
        if held.is_none() {
            return Ok(false);
        }
        let kept: Option<(Vec<u8>, i64)> = tx
            .fetch_optional(
                Query::select()
                    .columns([Log::Content, Log::Size])
                    .from(Log::Table)
                    .and_where(Expr::col(Log::TaskInstanceId).eq(id)),
            )
            .await?;
        let (mut content, size) = kept.unwrap_or_default();
        content.extend_from_slice(text.as_bytes());
        let cut = content.len().saturating_sub(EXTERNAL_LOG_BYTES);
        content.drain(..cut);
        let size = size + text.len() as i64;
        tx.execute(
            Query::delete()
                .from_table(Log::Table)
                .and_where(Expr::col(Log::TaskInstanceId).eq(id)),
        )
        .await?;
        tx.execute(&insert_rows(
            Log::Table,
            [Log::TaskInstanceId, Log::Content, Log::Size],
            [[id.into(), content.into(), size.into()]],
        ))
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The offers of the attempts among `ids` that are offered now.
    pub async fn external_offers(&self, ids: &[i64]) -> Result<Vec<Offered>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.db
            .fetch_all(
                Query::select()
                    .columns([
                        Ext::TaskInstanceId,
                        Ext::Queue,
                        Ext::Worker,
                        Ext::LeaseExpiresAt,
                    ])
                    .from(Ext::Table)
                    .and_where(Expr::col(Ext::TaskInstanceId).is_in(ids.iter().copied()))
                    .order_by(Ext::TaskInstanceId, Order::Asc),
            )
            .await
    }

    /// The queues of `projects` (all when None) that have offers, or external workers
    /// seen at or after `seen_since`: by project, then queue.
    pub async fn external_queues(
        &self,
        projects: Option<&[String]>,
        seen_since: i64,
    ) -> Result<Vec<ExternalQueue>> {
        let mut counts = Query::select();
        counts
            .columns([Ext::Project, Ext::Queue, Ext::Worker])
            .expr(Expr::col(Ext::TaskInstanceId).count())
            .from(Ext::Table)
            .group_by_columns([Ext::Project, Ext::Queue, Ext::Worker]);
        let mut workers = Query::select();
        workers
            .columns([Seen::Project, Seen::Queue, Seen::Worker, Seen::LastSeenAt])
            .from(Seen::Table)
            .and_where(Expr::col(Seen::LastSeenAt).gte(seen_since))
            .order_by(Seen::LastSeenAt, Order::Desc)
            .order_by(Seen::Worker, Order::Asc);
        if let Some(projects) = projects {
            counts.and_where(Expr::col(Ext::Project).is_in(projects.iter().cloned()));
            workers.and_where(Expr::col(Seen::Project).is_in(projects.iter().cloned()));
        }
        let counts: Vec<(String, String, Option<String>, i64)> = self.db.fetch_all(&counts).await?;
        let workers: Vec<(String, String, String, i64)> = self.db.fetch_all(&workers).await?;
        let mut queues: BTreeMap<(String, String), ExternalQueue> = BTreeMap::new();
        let mut entry = |project: &str, queue: &str| {
            let key = (project.to_string(), queue.to_string());
            queues.entry(key).or_insert_with(|| ExternalQueue {
                project: project.to_string(),
                queue: queue.to_string(),
                waiting: 0,
                taken: 0,
                workers: Vec::new(),
            });
        };
        for (project, queue, _, _) in &counts {
            entry(project, queue);
        }
        for (project, queue, _, _) in &workers {
            entry(project, queue);
        }
        let mut holding = BTreeMap::new();
        for (project, queue, worker, n) in counts {
            let q = queues
                .get_mut(&(project.clone(), queue.clone()))
                .expect("added");
            match worker {
                None => q.waiting += n,
                Some(worker) => {
                    q.taken += n;
                    *holding.entry((project, queue, worker)).or_insert(0) += n;
                }
            }
        }
        for (project, queue, name, last_seen_at) in workers {
            let holding = holding
                .get(&(project.clone(), queue.clone(), name.clone()))
                .copied()
                .unwrap_or(0);
            let q = queues.get_mut(&(project, queue)).expect("added");
            q.workers.push(SeenWorker {
                name,
                last_seen_at,
                holding,
            });
        }
        Ok(queues.into_values().collect())
    }

    /// The attempts among `ids` whose lease lapsed before `now`: (id, worker, expiry).
    pub async fn lapsed_leases(&self, ids: &[i64], now: i64) -> Result<Vec<(i64, String, i64)>> {
        let mut lapsed = Vec::new();
        for chunk in ids.chunks(IDS_PER_READ) {
            let rows: Vec<(i64, String, i64)> = self
                .db
                .fetch_all(
                    Query::select()
                        .columns([Ext::TaskInstanceId, Ext::Worker, Ext::LeaseExpiresAt])
                        .from(Ext::Table)
                        .and_where(Expr::col(Ext::TaskInstanceId).is_in(chunk.iter().copied()))
                        .and_where(Expr::col(Ext::LeaseExpiresAt).lt(now)),
                )
                .await?;
            lapsed.extend(rows);
        }
        Ok(lapsed)
    }
}

/// Notes that `worker` took tasks of, or renewed a lease on, `queues` ((project, queue)
/// pairs) at `now`. In order, so that concurrent writers lock the rows alike.
async fn seen(
    tx: &mut Tx,
    worker: &str,
    queues: BTreeSet<(String, String)>,
    now: i64,
) -> Result<()> {
    if queues.is_empty() {
        return Ok(());
    }
    let mut upsert = insert_rows(
        Seen::Table,
        [Seen::Project, Seen::Queue, Seen::Worker, Seen::LastSeenAt],
        queues
            .into_iter()
            .map(|(project, queue)| [project.into(), queue.into(), worker.into(), now.into()]),
    );
    upsert.on_conflict(
        OnConflict::columns([Seen::Project, Seen::Queue, Seen::Worker])
            .update_column(Seen::LastSeenAt)
            .to_owned(),
    );
    tx.execute(&upsert).await
}

/// Attempt `id` still waits.
fn waiting(id: i64) -> sea_query::SimpleExpr {
    Expr::exists(
        Query::select()
            .expr(Expr::val(1))
            .from(Task::Table)
            .and_where(Expr::col(Task::Id).eq(id))
            .and_where(Expr::col(Task::State).eq(TaskState::Waiting.as_str()))
            .take(),
    )
}
