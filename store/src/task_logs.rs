//! The ends of finished attempts' logs, kept so a log stays readable when its worker is
//! gone (the worker sends them with the attempt's end; see `TaskEvent.log`).

use super::db::Tx;
use super::schema::TaskLog as Log;
use super::sql::insert_rows;
use super::{Backend, Store};
use sea_query::{Expr, ExprTrait, Iden, OnConflict, Query};
use shoal_common::error::Result;
use std::collections::BTreeMap;

/// The row an upsert proposed (`excluded` in Postgres and SQLite).
#[derive(Iden)]
#[iden = "excluded"]
struct Excluded;

/// The kept end of one attempt's log.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptLog {
    pub task_instance_id: i64,
    /// The log's last bytes: from `size - content.len()` on.
    pub content: Vec<u8>,
    /// The whole log's size in bytes.
    pub size: u64,
}

/// Records kept logs: a longer log of an attempt (a running attempt's log grows, then its
/// end comes) replaces a shorter one; a resent or late one changes nothing.
pub(super) async fn insert_logs(tx: &mut Tx, logs: &[&KeptLog]) -> Result<()> {
    if logs.is_empty() {
        return Ok(());
    }
    // One row per attempt: a statement may not update a row twice.
    let mut longest: BTreeMap<i64, &KeptLog> = BTreeMap::new();
    for l in logs {
        let kept = longest.entry(l.task_instance_id).or_insert(l);
        if l.size > kept.size {
            *kept = l;
        }
    }
    let mut insert = insert_rows(
        Log::Table,
        [Log::TaskInstanceId, Log::Content, Log::Size],
        longest.values().map(|l| {
            [
                l.task_instance_id.into(),
                l.content.clone().into(),
                (l.size as i64).into(),
            ]
        }),
    );
    let on_conflict = if tx.backend() == Backend::Mysql {
        // MySQL's upsert takes no condition: each column takes the proposed value where
        // it is longer. Content first: MySQL assigns left to right, so the size compared
        // is still the stored one.
        let longer = || Expr::col(Log::Size).lt(Expr::cust("VALUES(`size`)"));
        OnConflict::column(Log::TaskInstanceId)
            .value(
                Log::Content,
                Expr::case(longer(), Expr::cust("VALUES(`content`)"))
                    .finally(Expr::col(Log::Content)),
            )
            .value(
                Log::Size,
                Expr::case(longer(), Expr::cust("VALUES(`size`)")).finally(Expr::col(Log::Size)),
            )
            .to_owned()
    } else {
        OnConflict::column(Log::TaskInstanceId)
            .update_columns([Log::Content, Log::Size])
            .action_and_where(
                Expr::col((Log::Table, Log::Size)).lt(Expr::col((Excluded, Log::Size))),
            )
            .to_owned()
    };
    insert.on_conflict(on_conflict);
    tx.execute(&insert).await?;
    Ok(())
}

impl Store {
    /// The kept end of attempt `task_instance_id`'s log, if the master got one.
    pub async fn kept_log(&self, task_instance_id: i64) -> Result<Option<KeptLog>> {
        let row: Option<(Vec<u8>, i64)> = self
            .db
            .fetch_optional(
                Query::select()
                    .columns([Log::Content, Log::Size])
                    .from(Log::Table)
                    .and_where(Expr::col(Log::TaskInstanceId).eq(task_instance_id)),
            )
            .await?;
        Ok(row.map(|(content, size)| KeptLog {
            task_instance_id,
            content,
            size: size as u64,
        }))
    }
}
