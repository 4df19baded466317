//! The audit log. An API mutation runs inside [`super::audited`]: the first transaction it
//! commits writes the audit row too ([`super::pending_audit`]). A mutation that commits
//! nothing (refused, or a no-op) is recorded after it by [`Store::record_audit`].

use super::Store;
use super::pending_audit::{AuditEntry, FIELDS, insert};
use super::schema::AuditLog as Audit;
use sea_query::{Expr, ExprTrait, Order, Query};
use shoal_common::error::Result;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub project: Option<String>,
    /// What the mutation concerned, beyond its path (see [`super::audit_object`]).
    pub object: Option<String>,
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
