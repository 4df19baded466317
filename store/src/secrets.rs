//! Named secrets of a project, stored sealed ([`shoal_common::secret_key`]): the store never sees
//! a value in clear.

use super::Store;
use super::schema::Secret;
use super::sql::insert_rows;
use sea_query::{Expr, ExprTrait, IntoIden, OnConflict, Order, Query};
use shoal_common::error::{Error, Result};
use shoal_common::types::now_ms;

/// A secret as listed: never its value.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SecretRow {
    pub name: String,
    pub description: String,
    pub updated_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A secret's sealed value, for whoever holds the key.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SealedSecret {
    pub project: String,
    pub name: String,
    pub sealed: String,
}

impl Store {
    /// Sets `project`'s secret `name` (creating or replacing it). Returns true when it is new.
    pub async fn put_secret(
        &self,
        project: &str,
        name: &str,
        sealed: &str,
        description: &str,
        by: &str,
    ) -> Result<bool> {
        let columns = [
            Secret::Project,
            Secret::Name,
            Secret::Sealed,
            Secret::Description,
            Secret::UpdatedBy,
            Secret::CreatedAt,
            Secret::UpdatedAt,
        ];
        let row = [project, name, sealed, description, by];
        put_named(self, Secret::Table, columns, row).await
    }

    /// The secrets of `project`, by name, without their values.
    pub async fn list_secrets(&self, project: &str) -> Result<Vec<SecretRow>> {
        self.db
            .fetch_all(
                Query::select()
                    .columns([
                        Secret::Name,
                        Secret::Description,
                        Secret::UpdatedBy,
                        Secret::CreatedAt,
                        Secret::UpdatedAt,
                    ])
                    .from(Secret::Table)
                    .and_where(Expr::col(Secret::Project).eq(project))
                    .order_by(Secret::Name, Order::Asc),
            )
            .await
    }

    /// Every secret's sealed value (a master keeps them to expand `${secret.NAME}`).
    pub async fn sealed_secrets(&self) -> Result<Vec<SealedSecret>> {
        self.db
            .fetch_all(
                Query::select()
                    .columns([Secret::Project, Secret::Name, Secret::Sealed])
                    .from(Secret::Table),
            )
            .await
    }

    /// One secret's sealed value; None when `project` has no secret `name`.
    pub async fn sealed_secret(&self, project: &str, name: &str) -> Result<Option<String>> {
        let row: Option<(String,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(Secret::Sealed)
                    .from(Secret::Table)
                    .and_where(Expr::col(Secret::Project).eq(project))
                    .and_where(Expr::col(Secret::Name).eq(name)),
            )
            .await?;
        Ok(row.map(|(sealed,)| sealed))
    }

    /// Deletes a secret; false when there was none.
    pub async fn delete_secret(&self, project: &str, name: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let deleted = tx
            .execute_counted(
                Query::delete()
                    .from_table(Secret::Table)
                    .and_where(Expr::col(Secret::Project).eq(project))
                    .and_where(Expr::col(Secret::Name).eq(name)),
            )
            .await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }
}

/// Sets a project's named thing (a secret, an environment), creating or replacing it: a
/// table keyed by (project, name) whose `columns` are project, name, the value,
/// description, updated_by, created_at and updated_at, and `row` the first five's values.
/// Returns true when it is new; NotFound when the project does not exist.
pub(super) async fn put_named<C: IntoIden + Copy>(
    store: &Store,
    table: C,
    columns: [C; 7],
    row: [&str; 5],
) -> Result<bool> {
    let [
        project_col,
        name_col,
        value,
        description,
        updated_by,
        _,
        updated_at,
    ] = columns;
    let [project, name, ..] = row;
    let mut tx = store.db.begin().await?;
    let existed: Option<(String,)> = tx
        .fetch_optional(
            Query::select()
                .column(name_col)
                .from(table)
                .and_where(Expr::col(project_col).eq(project))
                .and_where(Expr::col(name_col).eq(name)),
        )
        .await?;
    let now = now_ms();
    let values = row.map(Expr::from);
    let [a, b, c, d, e] = values;
    let mut insert = insert_rows(table, columns, [[a, b, c, d, e, now.into(), now.into()]]);
    insert.on_conflict(
        OnConflict::columns([project_col, name_col])
            .update_columns([value, description, updated_by, updated_at])
            .to_owned(),
    );
    match tx.execute(&insert).await {
        Err(Error::Database(sqlx::Error::Database(e))) if e.is_foreign_key_violation() => {
            return Err(Error::NotFound(format!("project '{project}'")));
        }
        other => other?,
    }
    tx.commit().await?;
    Ok(existed.is_none())
}
