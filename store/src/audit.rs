//! The audit log. An API mutation runs inside [`audited`]: the first transaction it commits
//! writes the audit row too, so a change and its record land together or not at all. A
//! mutation that commits nothing (refused, or a no-op) is recorded after it by
//! [`Store::record_audit`].

use super::Store;
use super::db::{Tx, insert_rows};
use super::schema::AuditLog as Audit;
use sea_query::{Expr, ExprTrait, Order, Query};
use shoal_common::error::Result;
use shoal_common::types::now_ms;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// One mutation: who, what, on what, from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub actor: String,
    /// The API operation, e.g. `startWorkflow`.
    pub action: String,
    /// Method and path, e.g. `POST /api/v1/instances/7/stop`.
    pub target: String,
    pub project: Option<String>,
    pub address: String,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub project: Option<String>,
    pub address: String,
    /// `ok`, or `<status>: <error>`.
    pub result: String,
}

#[derive(Debug, Default, Clone)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub project: Option<String>,
    pub action: Option<String>,
    /// At or after (ms).
    pub from: Option<i64>,
    /// Before (ms).
    pub to: Option<i64>,
    /// Rows with a smaller id only (the next page).
    pub before: Option<i64>,
    pub limit: u64,
}

struct Pending {
    entry: Mutex<AuditEntry>,
    written: AtomicBool,
    /// The id of the row written, once it is.
    row: Mutex<Option<i64>>,
}

tokio::task_local! {
    static PENDING: Arc<Pending>;
}

/// Runs `mutation` with `entry` pending: the first transaction it commits writes the row
/// (result `ok`; [`Store::set_audit_result`] corrects it when the mutation fails after
/// all). Returns the output, the id of that row when one was written, and the entry as it
/// ended.
pub async fn audited<F: Future>(
    entry: AuditEntry,
    mutation: F,
) -> (F::Output, Option<i64>, AuditEntry) {
    let pending = Arc::new(Pending {
        entry: Mutex::new(entry),
        written: AtomicBool::new(false),
        row: Mutex::new(None),
    });
    let output = PENDING.scope(pending.clone(), mutation).await;
    let entry = pending.entry.lock().expect("audit entry lock").clone();
    let row = *pending.row.lock().expect("audit row lock");
    (output, row, entry)
}

/// Names the project of the mutation this task runs, when only its body tells (a project
/// being created).
pub fn audit_project(project: &str) {
    let _ = PENDING.try_with(|p| {
        p.entry.lock().expect("audit entry lock").project = Some(project.to_string());
    });
}

/// The columns of a row but its id, in [`AuditRow`]'s order.
const FIELDS: [Audit; 7] = [
    Audit::At,
    Audit::Actor,
    Audit::Action,
    Audit::Target,
    Audit::Project,
    Audit::Address,
    Audit::Result,
];

fn insert(entry: &AuditEntry, result: &str) -> sea_query::InsertStatement {
    insert_rows(
        Audit::Table,
        FIELDS,
        [[
            now_ms().into(),
            entry.actor.as_str().into(),
            entry.action.as_str().into(),
            entry.target.as_str().into(),
            entry.project.clone().into(),
            entry.address.as_str().into(),
            result.into(),
        ]],
    )
}

/// Called by every commit: writes the pending entry of the mutation this task runs, once.
pub(super) async fn write_pending(tx: &mut Tx) -> Result<()> {
    let Ok(pending) = PENDING.try_with(Arc::clone) else {
        return Ok(());
    };
    if pending.written.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let entry = pending.entry.lock().expect("audit entry lock").clone();
    let (id,): (i64,) = tx
        .fetch_one(insert(&entry, "ok").returning_col(Audit::Id))
        .await?;
    *pending.row.lock().expect("audit row lock") = Some(id);
    Ok(())
}

impl Store {
    /// Records a mutation that committed nothing, with its `result`.
    pub async fn record_audit(&self, entry: &AuditEntry, result: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        tx.execute(&insert(entry, result)).await?;
        tx.commit().await
    }

    /// Sets the result of row `id`, written by a mutation's commit, to how the mutation
    /// ended (an error after the commit).
    pub async fn set_audit_result(&self, id: i64, result: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            Query::update()
                .table(Audit::Table)
                .value(Audit::Result, result)
                .and_where(Expr::col(Audit::Id).eq(id)),
        )
        .await?;
        tx.commit().await
    }

    /// Audit rows matching `filter`, newest first.
    pub async fn list_audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>> {
        self.db
            .fetch_all(
                Query::select()
                    .column(Audit::Id)
                    .columns(FIELDS)
                    .from(Audit::Table)
                    .and_where_option(
                        filter
                            .actor
                            .as_deref()
                            .map(|v| Expr::col(Audit::Actor).eq(v)),
                    )
                    .and_where_option(
                        filter
                            .project
                            .as_deref()
                            .map(|v| Expr::col(Audit::Project).eq(v)),
                    )
                    .and_where_option(
                        filter
                            .action
                            .as_deref()
                            .map(|v| Expr::col(Audit::Action).eq(v)),
                    )
                    .and_where_option(filter.from.map(|v| Expr::col(Audit::At).gte(v)))
                    .and_where_option(filter.to.map(|v| Expr::col(Audit::At).lt(v)))
                    .and_where_option(filter.before.map(|v| Expr::col(Audit::Id).lt(v)))
                    .order_by(Audit::Id, Order::Desc)
                    .limit(filter.limit),
            )
            .await
    }
}
