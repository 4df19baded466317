//! Wait, callback and external tasks: a waiting attempt ends through one conditional
//! write, whoever makes it (the API's completion, a callback, an external worker, the
//! master's timeout, a lapsed lease or a failed callback request), so exactly one of them
//! wins; the master learns the end from the row (an event's too: see `event_waits`).

use super::codec::to_json;
use super::external::IDS_PER_READ;
use super::instance_rows::{TaskRecord, select_tasks};
use super::schema::{TaskCallback, TaskInstance as Task};
use super::sql::insert_rows;
use super::{Holder, Store};
use crate::TaskInstanceRow;
use sea_query::{Expr, ExprTrait, Query, UpdateStatement};
use shoal_common::error::Result;
use shoal_common::start::Params;
use shoal_common::types::{TaskState, now_ms};

/// One end of a waiting attempt ([`Store::end_waits`]): attempt `id` ends in `state` with
/// `output` and `message` if it still waits and `holder` may end it.
#[derive(Debug, Clone, Copy)]
pub struct WaitEnd<'a> {
    pub id: i64,
    pub state: TaskState,
    pub output: &'a Params,
    pub message: &'a str,
    pub holder: Holder<'a>,
}

impl Store {
    /// Ends attempt `id` in `state` with its outputs if it is still waiting and `holder`
    /// may end it (an external task's offer, or what an event wait waits for, goes with
    /// it). Returns false when it was not (already ended, not a waiting task, or another
    /// holder's): nothing was written.
    pub async fn end_waiting(
        &self,
        id: i64,
        state: TaskState,
        output: &Params,
        message: &str,
        holder: Holder<'_>,
    ) -> Result<bool> {
        let end = WaitEnd {
            id,
            state,
            output,
            message,
            holder,
        };
        Ok(self.end_waits(&[end]).await? == [true])
    }

    /// [`Store::end_waiting`] for each of `ends`, in one transaction: each its own
    /// conditional write, so that each counts or not on its own. Whether each ended, in
    /// order.
    pub async fn end_waits(&self, ends: &[WaitEnd<'_>]) -> Result<Vec<bool>> {
        let mut tx = self.db.begin().await?;
        let mut ended = Vec::with_capacity(ends.len());
        let mut hits = Vec::new();
        for end in ends {
            let mut update = end_update(end.state, end.output, end.message)?;
            update.and_where(Expr::col(Task::Id).eq(end.id));
            if let Some(held) = end.holder.condition(end.id) {
                update.and_where(held);
            }
            let hit = tx.execute_counted(&update).await? > 0;
            ended.push(hit);
            if hit {
                hits.push(end.id);
            }
        }
        if !hits.is_empty() {
            super::external::withdraw(&mut tx, &hits).await?;
            super::event_waits::ended(&mut tx, &hits).await?;
        }
        tx.commit().await?;
        Ok(ended)
    }

    /// The attempts among `ids` that no longer wait, as their rows say now.
    pub async fn ended_waits(&self, ids: &[i64]) -> Result<Vec<TaskInstanceRow>> {
        let mut ended = Vec::new();
        for chunk in ids.chunks(IDS_PER_READ) {
            let records: Vec<TaskRecord> = self
                .db
                .fetch_all(
                    select_tasks()
                        .and_where(Expr::col(Task::Id).is_in(chunk.iter().copied()))
                        .and_where(Expr::col(Task::State).ne(TaskState::Waiting.as_str())),
                )
                .await?;
            ended.extend(records);
        }
        ended.into_iter().map(TaskRecord::decode).collect()
    }

    /// Records a new callback token (its hash) for attempt `id`, unless a request carrying
    /// one of its tokens was sent already (then returns false: do not send again).
    pub async fn arm_callback(&self, id: i64, token_hash: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let sent: Option<(i64,)> = tx
            .fetch_optional(
                Query::select()
                    .column(TaskCallback::TaskInstanceId)
                    .from(TaskCallback::Table)
                    .and_where(Expr::col(TaskCallback::TaskInstanceId).eq(id))
                    .and_where(Expr::col(TaskCallback::SentAt).is_not_null())
                    .limit(1),
            )
            .await?;
        if sent.is_some() {
            return Ok(false);
        }
        tx.execute(&insert_rows(
            TaskCallback::Table,
            [
                TaskCallback::TokenHash,
                TaskCallback::TaskInstanceId,
                TaskCallback::CreatedAt,
            ],
            [[token_hash.into(), id.into(), now_ms().into()]],
        ))
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The request carrying this token was answered as expected.
    pub async fn callback_sent(&self, token_hash: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            Query::update()
                .table(TaskCallback::Table)
                .value(TaskCallback::SentAt, now_ms())
                .and_where(Expr::col(TaskCallback::TokenHash).eq(token_hash)),
        )
        .await?;
        tx.commit().await
    }

    /// The attempt a callback token was armed for.
    pub async fn callback_task(&self, token_hash: &str) -> Result<Option<i64>> {
        let row: Option<(i64,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(TaskCallback::TaskInstanceId)
                    .from(TaskCallback::Table)
                    .and_where(Expr::col(TaskCallback::TokenHash).eq(token_hash)),
            )
            .await?;
        Ok(row.map(|(id,)| id))
    }
}

/// Ends the attempts the caller narrows it to (by id) if they still wait, in `state` with
/// `output` and `message`; returns their ids. The one conditional write every end of a
/// waiting attempt goes through.
pub(super) fn end_update(
    state: TaskState,
    output: &Params,
    message: &str,
) -> Result<UpdateStatement> {
    let output = (!output.is_empty()).then(|| to_json(output)).transpose()?;
    let mut update = Query::update();
    update
        .table(Task::Table)
        .value(Task::State, state.as_str())
        .value(Task::Output, output)
        .value(Task::Message, message)
        .value(Task::EndedAt, now_ms())
        .and_where(Expr::col(Task::State).eq(TaskState::Waiting.as_str()));
    Ok(update)
}
