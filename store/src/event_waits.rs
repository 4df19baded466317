//! Events that complete waiting tasks. A wait task that names an event waits for it under
//! a key (an `event_wait` row, written with the attempt's `waiting` row). An event
//! completes every wait of its project, event and key at once, through the conditional
//! write that ends a waiting attempt, so a wait is completed once however many events
//! race for it. An event that completes none is kept (`kept_event`) until it expires; the
//! first wait for it that begins meanwhile takes it, in the transaction that ends that
//! wait, so a kept event completes one wait (a message correlates to one waiting run, as
//! in Camunda; only an event that finds runs waiting completes them all).

use super::Store;
use super::codec::{from_json, to_json};
use super::db::Tx;
use super::external::IDS_PER_READ;
use super::schema::{EventWait as Wait, KeptEvent as Kept};
use super::sql::insert_rows;
use super::waits::end_update;
use sea_query::{Expr, ExprTrait, Order, Query, SelectStatement};
use shoal_common::error::Result;
use shoal_common::start::Params;
use shoal_common::types::{TaskState, now_ms};
use std::collections::HashSet;
use std::time::Duration;

/// A wait task's attempt waiting for `event` with `key` in `project`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventWait {
    pub task_instance_id: i64,
    pub workflow_instance_id: i64,
    pub project: String,
    pub event: String,
    pub key: String,
}

/// What an event did ([`Store::deliver_event`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    /// The waiting attempts it completed, by id.
    pub completed: Vec<i64>,
    /// When it completed none: until when it is kept for a wait that begins later (ms
    /// since the epoch; None when it is not kept).
    pub kept_until: Option<i64>,
}

/// How a task an event completed says so.
fn completed_by(event: &str, key: &str) -> String {
    format!("completed by event '{event}' (key '{key}')")
}

/// Records the event waits of `waits` in `tx` (those of fenced instances aside).
pub(super) async fn subscribe(
    tx: &mut Tx,
    waits: &[EventWait],
    fenced: &HashSet<i64>,
) -> Result<()> {
    let waits: Vec<&EventWait> = waits
        .iter()
        .filter(|w| !fenced.contains(&w.workflow_instance_id))
        .collect();
    const COLUMNS: [Wait; 5] = [
        Wait::TaskInstanceId,
        Wait::WorkflowInstanceId,
        Wait::Project,
        Wait::Event,
        Wait::EventKey,
    ];
    for chunk in waits.chunks(tx.rows_per_statement(COLUMNS.len())) {
        tx.execute(&insert_rows(
            Wait::Table,
            COLUMNS,
            chunk.iter().map(|w| {
                [
                    w.task_instance_id.into(),
                    w.workflow_instance_id.into(),
                    w.project.clone().into(),
                    w.event.clone().into(),
                    w.key.clone().into(),
                ]
            }),
        ))
        .await?;
    }
    Ok(())
}

/// Deletes the event waits of attempts `ids`, which ended.
pub(super) async fn ended(tx: &mut Tx, ids: &[i64]) -> Result<()> {
    for chunk in ids.chunks(tx.rows_per_statement(1)) {
        tx.execute(
            Query::delete()
                .from_table(Wait::Table)
                .and_where(Expr::col(Wait::TaskInstanceId).is_in(chunk.iter().copied())),
        )
        .await?;
    }
    Ok(())
}

/// Deletes the event waits of the instances `which` selects (their ids).
pub(super) async fn delete_of_instances(tx: &mut Tx, which: SelectStatement) -> Result<()> {
    tx.execute(
        Query::delete()
            .from_table(Wait::Table)
            .and_where(Expr::col(Wait::WorkflowInstanceId).in_subquery(which)),
    )
    .await
}

/// The waits of `project`, `event` and `key` (their attempts' ids).
fn waits_for(project: &str, event: &str, key: &str) -> SelectStatement {
    Query::select()
        .column(Wait::TaskInstanceId)
        .from(Wait::Table)
        .and_where(Expr::col(Wait::Project).eq(project))
        .and_where(Expr::col(Wait::Event).eq(event))
        .and_where(Expr::col(Wait::EventKey).eq(key))
        .to_owned()
}

/// The oldest event of `project`, `event` and `key` kept past `now` (its id).
fn oldest_kept(project: &str, event: &str, key: &str, now: i64) -> SelectStatement {
    Query::select()
        .column(Kept::Id)
        .from(Kept::Table)
        .and_where(Expr::col(Kept::Project).eq(project))
        .and_where(Expr::col(Kept::Event).eq(event))
        .and_where(Expr::col(Kept::EventKey).eq(key))
        .and_where(Expr::col(Kept::ExpiresAt).gt(now))
        .order_by(Kept::Id, Order::Asc)
        .limit(1)
        .to_owned()
}

/// [`Store::deliver_event`] inside `tx`, with whatever else it writes (a broker
/// trigger's record of the message).
pub(super) async fn deliver_in(
    tx: &mut Tx,
    project: &str,
    event: &str,
    key: &str,
    data: &Params,
    keep: Duration,
) -> Result<Delivered> {
    // Each wait ended on its own, by id: the ones still waiting count (MySQL returns no
    // ids from an update).
    let mut waits: Vec<(i64,)> = tx.fetch_all(&waits_for(project, event, key)).await?;
    waits.sort_unstable();
    let mut completed = Vec::with_capacity(waits.len());
    for (id,) in waits {
        let mut ending = end_update(TaskState::Success, data, &completed_by(event, key))?;
        ending.and_where(Expr::col(super::schema::TaskInstance::Id).eq(id));
        if tx.execute_counted(&ending).await? > 0 {
            completed.push(id);
        }
    }
    let now = now_ms();
    let keep_ms = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
    let kept_until = (completed.is_empty() && keep_ms > 0).then(|| now.saturating_add(keep_ms));
    ended(tx, &completed).await?;
    if let Some(until) = kept_until {
        tx.execute(&insert_rows(
            Kept::Table,
            [
                Kept::Project,
                Kept::Event,
                Kept::EventKey,
                Kept::Data,
                Kept::ReceivedAt,
                Kept::ExpiresAt,
            ],
            [[
                project.into(),
                event.into(),
                key.into(),
                to_json(data)?.into(),
                now.into(),
                until.into(),
            ]],
        ))
        .await?;
    }
    Ok(Delivered {
        completed,
        kept_until,
    })
}

impl Store {
    /// Delivers event `event` with `key` to `project`: every attempt of the project
    /// waiting for it ends as succeeded with `data` as its outputs. An event that completes
    /// none is kept for `keep` (not at all when zero) for the first wait of its event and
    /// key that begins meanwhile ([`Store::take_kept_events`]). The API's
    /// `POST /projects/{project}/events/{event}` calls it; so may anything else that
    /// receives events (a broker's consumer), with the retention it was configured with.
    pub async fn deliver_event(
        &self,
        project: &str,
        event: &str,
        key: &str,
        data: &Params,
        keep: Duration,
    ) -> Result<Delivered> {
        let mut tx = self.db.begin().await?;
        let delivered = deliver_in(&mut tx, project, event, key, data, keep).await?;
        tx.commit().await?;
        Ok(delivered)
    }

    /// Completes each event wait among `waiting` (attempt ids) that still waits and has
    /// an unexpired kept event of its project, event and key, with the oldest such event,
    /// which goes. Returns the attempts it completed. A wait that something else ended
    /// first leaves the event kept.
    pub async fn take_kept_events(&self, waiting: &[i64]) -> Result<Vec<i64>> {
        let now = now_ms();
        let mut completed = Vec::new();
        for chunk in waiting.chunks(IDS_PER_READ) {
            let kept = Query::select()
                .expr(Expr::val(1))
                .from(Kept::Table)
                .and_where(
                    Expr::col((Kept::Table, Kept::Project)).equals((Wait::Table, Wait::Project)),
                )
                .and_where(Expr::col((Kept::Table, Kept::Event)).equals((Wait::Table, Wait::Event)))
                .and_where(
                    Expr::col((Kept::Table, Kept::EventKey)).equals((Wait::Table, Wait::EventKey)),
                )
                .and_where(Expr::col((Kept::Table, Kept::ExpiresAt)).gt(now))
                .to_owned();
            let matched: Vec<(i64, String, String, String)> = self
                .db
                .fetch_all(
                    Query::select()
                        .columns([
                            (Wait::Table, Wait::TaskInstanceId),
                            (Wait::Table, Wait::Project),
                            (Wait::Table, Wait::Event),
                            (Wait::Table, Wait::EventKey),
                        ])
                        .from(Wait::Table)
                        .and_where(
                            Expr::col((Wait::Table, Wait::TaskInstanceId))
                                .is_in(chunk.iter().copied()),
                        )
                        .and_where(Expr::exists(kept))
                        .order_by((Wait::Table, Wait::TaskInstanceId), Order::Asc),
                )
                .await?;
            for (id, project, event, key) in matched {
                if self
                    .take_kept_event(id, &project, &event, &key, now)
                    .await?
                {
                    completed.push(id);
                }
            }
        }
        Ok(completed)
    }

    /// Completes waiting attempt `id` with the oldest event kept for it, in one
    /// transaction: both happen, or neither (another taker got the event, or the
    /// attempt no longer waits).
    async fn take_kept_event(
        &self,
        id: i64,
        project: &str,
        event: &str,
        key: &str,
        now: i64,
    ) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        // Read, then deleted by id: MySQL can neither return what it deleted nor delete
        // by a subquery of the same table. Of two takers of one event, one deletes it.
        let oldest: Option<(i64, String)> = tx
            .fetch_optional(oldest_kept(project, event, key, now).column(Kept::Data))
            .await?;
        let Some((kept_id, data)) = oldest else {
            return Ok(false);
        };
        let taken = tx
            .execute_counted(
                Query::delete()
                    .from_table(Kept::Table)
                    .and_where(Expr::col(Kept::Id).eq(kept_id)),
            )
            .await?;
        if taken == 0 {
            return Ok(false);
        }
        let data: Params = from_json(&format!("kept_event {kept_id}"), "data", &data)?;
        let mut ending = end_update(TaskState::Success, &data, &completed_by(event, key))?;
        ending.and_where(Expr::col(super::schema::TaskInstance::Id).eq(id));
        if tx.execute_counted(&ending).await? == 0 {
            // Dropped without a commit: the event stays kept.
            return Ok(false);
        }
        ended(&mut tx, &[id]).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes the events kept until `now` or before; returns how many went.
    pub async fn sweep_kept_events(&self, now: i64) -> Result<u64> {
        let mut tx = self.db.begin().await?;
        let swept = tx
            .execute_counted(
                Query::delete()
                    .from_table(Kept::Table)
                    .and_where(Expr::col(Kept::ExpiresAt).lte(now)),
            )
            .await?;
        tx.commit().await?;
        Ok(swept)
    }
}
