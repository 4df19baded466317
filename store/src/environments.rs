//! Named environments of a project: shell lines a worker runs before a shell or python
//! task that uses one. Code, as a task's command is (not a secret): stored as written.

use super::Store;
use super::definitions::{decode_spec, is_latest_version};
use super::schema::{Environment as Env, WorkflowDefinition as Def};
use super::secrets::put_named;
use sea_query::{Alias, Expr, ExprTrait, Order, Query};
use shoal_common::error::Result;

/// An environment, with its config.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EnvironmentRow {
    pub project: String,
    pub name: String,
    pub config: String,
    pub description: String,
    pub updated_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: [Env; 7] = [
    Env::Project,
    Env::Name,
    Env::Config,
    Env::Description,
    Env::UpdatedBy,
    Env::CreatedAt,
    Env::UpdatedAt,
];

/// Why an environment was not deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvironmentDelete {
    Deleted,
    Missing,
    /// The latest versions of these workflows name it.
    InUse(Vec<String>),
}

impl Store {
    /// Sets `project`'s environment `name` (creating or replacing it). Returns true when it
    /// is new.
    pub async fn put_environment(
        &self,
        project: &str,
        name: &str,
        config: &str,
        description: &str,
        by: &str,
    ) -> Result<bool> {
        let row = [project, name, config, description, by];
        put_named(self, Env::Table, COLUMNS, row).await
    }

    /// The environments of `project`, by name.
    pub async fn list_environments(&self, project: &str) -> Result<Vec<EnvironmentRow>> {
        self.db
            .fetch_all(
                Query::select()
                    .columns(COLUMNS)
                    .from(Env::Table)
                    .and_where(Expr::col(Env::Project).eq(project))
                    .order_by(Env::Name, Order::Asc),
            )
            .await
    }

    /// One environment; None when `project` has no environment `name`.
    pub async fn get_environment(
        &self,
        project: &str,
        name: &str,
    ) -> Result<Option<EnvironmentRow>> {
        self.db
            .fetch_optional(
                Query::select()
                    .columns(COLUMNS)
                    .from(Env::Table)
                    .and_where(Expr::col(Env::Project).eq(project))
                    .and_where(Expr::col(Env::Name).eq(name)),
            )
            .await
    }

    /// Every environment of every project (a master keeps them to send with tasks).
    pub async fn all_environments(&self) -> Result<Vec<EnvironmentRow>> {
        self.db
            .fetch_all(Query::select().columns(COLUMNS).from(Env::Table))
            .await
    }

    /// Of `names`, those `project` has no environment of.
    pub async fn missing_environments(&self, project: &str, names: &[&str]) -> Result<Vec<String>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<(String,)> = self
            .db
            .fetch_all(
                Query::select()
                    .column(Env::Name)
                    .from(Env::Table)
                    .and_where(Expr::col(Env::Project).eq(project))
                    .and_where(Expr::col(Env::Name).is_in(names.iter().copied())),
            )
            .await?;
        Ok(names
            .iter()
            .filter(|n| !found.iter().any(|(f,)| f == *n))
            .map(|n| n.to_string())
            .collect())
    }

    /// Deletes an environment unless the latest version of a workflow of its project names
    /// it (a run of an older version that names it fails its shell and python tasks).
    pub async fn delete_environment(&self, project: &str, name: &str) -> Result<EnvironmentDelete> {
        let mut tx = self.db.begin().await?;
        let d = Alias::new("d");
        let latest: Vec<(String, i32, String)> = tx
            .fetch_all(
                Query::select()
                    .columns([
                        (d.clone(), Def::Name),
                        (d.clone(), Def::Version),
                        (d.clone(), Def::Spec),
                    ])
                    .from_as(Def::Table, d.clone())
                    .and_where(Expr::col((d.clone(), Def::Project)).eq(project))
                    .and_where(is_latest_version(d.clone()))
                    .order_by((d, Def::Name), Order::Asc),
            )
            .await?;
        let mut users = Vec::new();
        for (workflow, version, spec) in latest {
            // An unreadable definition names nothing a run could use.
            let Ok(def) = decode_spec(project, &workflow, version, &spec) else {
                continue;
            };
            if def.environments().contains(&name) {
                users.push(workflow);
            }
        }
        if !users.is_empty() {
            return Ok(EnvironmentDelete::InUse(users));
        }
        let deleted = tx
            .execute_counted(
                Query::delete()
                    .from_table(Env::Table)
                    .and_where(Expr::col(Env::Project).eq(project))
                    .and_where(Expr::col(Env::Name).eq(name)),
            )
            .await?;
        tx.commit().await?;
        Ok(match deleted {
            0 => EnvironmentDelete::Missing,
            _ => EnvironmentDelete::Deleted,
        })
    }
}
