//! Versioned workflow definitions.

use super::codec::{from_json, to_json};
use super::db::Tx;
use super::schema::WorkflowDefinition as Def;
use super::sql::insert_rows;
use super::{DefinitionSummary, DefinitionVersion, Store, StoredDefinition};
use sea_query::{Alias, Expr, ExprTrait, Func, Order, Query};
use shoal_common::definition::WorkflowDef;
use shoal_common::error::{Error, Result};
use shoal_common::types::now_ms;

#[derive(sqlx::FromRow)]
struct DefinitionRecord {
    project: String,
    name: String,
    version: i32,
    spec: String,
    created_at: i64,
}

impl DefinitionRecord {
    fn decode(self) -> Result<StoredDefinition> {
        let definition = decode_spec(&self.project, &self.name, self.version, &self.spec)?;
        Ok(StoredDefinition {
            project: self.project,
            name: self.name,
            version: self.version,
            definition,
            created_at: self.created_at,
        })
    }
}

pub(super) fn decode_spec(
    project: &str,
    name: &str,
    version: i32,
    spec: &str,
) -> Result<WorkflowDef> {
    from_json(
        &format!("workflow_definition {project}/{name} version {version}"),
        "spec",
        spec,
    )
}

/// A definition version as a claim sees it: missing or unreadable (the reason), or usable.
pub(super) type DefinitionLookup = std::result::Result<WorkflowDef, String>;

/// The columns a [`DefinitionRecord`] is read from, in the order
/// [`Store::put_definition`] writes them.
const DEFINITION_COLUMNS: [Def; 5] = [
    Def::Project,
    Def::Name,
    Def::Version,
    Def::Spec,
    Def::CreatedAt,
];

/// True for a row of `workflow_definition` (read as `d`) that is its workflow's latest
/// version: one statement reads the latest of many workflows.
pub(super) fn is_latest_version(d: Alias) -> sea_query::SimpleExpr {
    let l = Alias::new("l");
    let latest = Query::select()
        .expr(Func::max(Expr::col((l.clone(), Def::Version))))
        .from_as(Def::Table, l.clone())
        .and_where(Expr::col((l.clone(), Def::Project)).equals((d.clone(), Def::Project)))
        .and_where(Expr::col((l, Def::Name)).equals((d.clone(), Def::Name)))
        .take();
    Expr::col((d, Def::Version)).eq(Expr::SubQuery(None, Box::new(latest.into())))
}

/// Reads one definition version inside a transaction.
pub(super) async fn load_definition(
    tx: &mut Tx,
    project: &str,
    name: &str,
    version: i32,
) -> Result<DefinitionLookup> {
    let spec: Option<(String,)> = tx
        .fetch_optional(
            Query::select()
                .column(Def::Spec)
                .from(Def::Table)
                .and_where(Expr::col(Def::Project).eq(project))
                .and_where(Expr::col(Def::Name).eq(name))
                .and_where(Expr::col(Def::Version).eq(version)),
        )
        .await?;
    Ok(match spec {
        None => Err(format!(
            "workflow '{project}/{name}' version {version} does not exist"
        )),
        Some((spec,)) => decode_spec(project, name, version, &spec).map_err(|e| e.to_string()),
    })
}

/// The definition an existing instance pins; its absence is corruption.
pub(super) async fn pinned_definition(
    tx: &mut Tx,
    instance: &super::InstanceRow,
) -> Result<WorkflowDef> {
    load_definition(tx, &instance.project, &instance.workflow, instance.version)
        .await?
        .map_err(|reason| Error::Corrupt(format!("workflow instance {}: {reason}", instance.id)))
}

/// Names a workflow and the version a mutation made or acted on in its audit row.
pub(super) fn audit_workflow(workflow: &str, version: i32) {
    super::audit_object(&format!("workflow '{workflow}' version {version}"));
}

impl Store {
    /// Stores `def` as the next version of its workflow, unless it equals the latest
    /// version, which is then returned unchanged. Returns (version, created).
    pub async fn put_definition(&self, def: &WorkflowDef) -> Result<(i32, bool)> {
        let spec = to_json(def)?;
        let mut tx = self.db.begin().await?;
        // Serializes writers of one workflow, so two puts never both pick version N+1.
        tx.lock_key(&format!("{}/{}", def.project, def.name))
            .await?;
        let latest: Option<(i32, String)> = tx
            .fetch_optional(
                Query::select()
                    .columns([Def::Version, Def::Spec])
                    .from(Def::Table)
                    .and_where(Expr::col(Def::Project).eq(def.project.as_str()))
                    .and_where(Expr::col(Def::Name).eq(def.name.as_str()))
                    .order_by(Def::Version, Order::Desc)
                    .limit(1),
            )
            .await?;
        let version = match latest {
            Some((version, stored)) => {
                match decode_spec(&def.project, &def.name, version, &stored) {
                    Ok(stored) if stored == *def => {
                        audit_workflow(&def.name, version);
                        return Ok((version, false));
                    }
                    Ok(_) => {}
                    // Writing a new version is how an operator repairs a corrupt one.
                    Err(error) => tracing::warn!(%error, "latest definition unreadable"),
                }
                version + 1
            }
            None => 1,
        };
        super::projects::ensure_project(&mut tx, &def.project, "").await?;
        tx.execute(&insert_rows(
            Def::Table,
            DEFINITION_COLUMNS,
            [[
                def.project.as_str().into(),
                def.name.as_str().into(),
                version.into(),
                spec.into(),
                now_ms().into(),
            ]],
        ))
        .await?;
        audit_workflow(&def.name, version);
        tx.commit().await?;
        Ok((version, true))
    }

    /// A given version, or the latest when `version` is None.
    pub async fn get_definition(
        &self,
        project: &str,
        name: &str,
        version: Option<i32>,
    ) -> Result<Option<StoredDefinition>> {
        let mut select = Query::select();
        select
            .columns(DEFINITION_COLUMNS)
            .from(Def::Table)
            .and_where(Expr::col(Def::Project).eq(project))
            .and_where(Expr::col(Def::Name).eq(name));
        match version {
            Some(version) => select.and_where(Expr::col(Def::Version).eq(version)),
            None => select.order_by(Def::Version, Order::Desc).limit(1),
        };
        let record: Option<DefinitionRecord> = self.db.fetch_optional(&select).await?;
        record.map(DefinitionRecord::decode).transpose()
    }

    /// The latest version of every workflow of every project (for the few questions that
    /// span them all, such as which workflows depend on one).
    pub async fn latest_definitions(&self) -> Result<Vec<StoredDefinition>> {
        let d = Alias::new("d");
        let records: Vec<DefinitionRecord> = self
            .db
            .fetch_all(
                Query::select()
                    .columns(DEFINITION_COLUMNS)
                    .from_as(Def::Table, d.clone())
                    .and_where(is_latest_version(d))
                    .order_by(Def::Project, Order::Asc)
                    .order_by(Def::Name, Order::Asc),
            )
            .await?;
        records.into_iter().map(DefinitionRecord::decode).collect()
    }

    pub async fn list_definitions(&self, project: &str) -> Result<Vec<DefinitionSummary>> {
        let rows: Vec<(String, String, i32, i64)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Def::Project, Def::Name])
                    .expr(Func::max(Expr::col(Def::Version)))
                    .expr(Func::max(Expr::col(Def::CreatedAt)))
                    .from(Def::Table)
                    .and_where(Expr::col(Def::Project).eq(project))
                    .group_by_columns([Def::Project, Def::Name])
                    .order_by(Def::Name, Order::Asc),
            )
            .await?;
        let offline = super::offline::offline_in(self, project).await?;
        Ok(rows
            .into_iter()
            .map(
                |(project, name, latest_version, updated_at)| DefinitionSummary {
                    online: !offline.contains(&name),
                    project,
                    name,
                    latest_version,
                    updated_at,
                },
            )
            .collect())
    }

    /// Every stored version of a workflow, newest first; empty when it does not exist.
    pub async fn list_versions(&self, project: &str, name: &str) -> Result<Vec<DefinitionVersion>> {
        let rows: Vec<(i32, i64)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Def::Version, Def::CreatedAt])
                    .from(Def::Table)
                    .and_where(Expr::col(Def::Project).eq(project))
                    .and_where(Expr::col(Def::Name).eq(name))
                    .order_by(Def::Version, Order::Desc),
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|(version, created_at)| DefinitionVersion {
                version,
                created_at,
            })
            .collect())
    }
}
