//! Workflow definitions: apply (create a new version), list, read.

use crate::Ctx;
use crate::error::{Error, Result};
use crate::extract::{ApiPath, ApiQuery, Body};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::definition::{DefinitionError, WorkflowDef};
use shoal_common::store::StoredDefinition;
use shoal_common::types::ms_to_rfc3339;

/// `POST /projects/{project}/workflows`: the body is the definition, YAML or JSON.
/// Answers 201 when a new version was stored, 200 when the body equals the latest version.
pub async fn apply(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    let def = parse_for_project(body.text()?, &project)?;
    check_references(&ctx, &def).await?;
    let (version, created) = ctx.store.put_definition(&def).await?;
    tracing::info!(
        project = %def.project,
        workflow = %def.name,
        version,
        created,
        tasks = def.tasks.len(),
        "workflow applied"
    );
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let answer = json!({
        "project": def.project,
        "name": def.name,
        "version": version,
        "created": created,
    });
    Ok((status, Json(answer)))
}

/// Task groups and alert channels a definition names must exist when it is applied (a
/// group deleted later fails the task that needs it, with the reason).
async fn check_references(ctx: &Ctx, def: &WorkflowDef) -> Result<()> {
    if let Some(group) = ctx
        .store
        .missing_task_groups(&def.task_groups())
        .await?
        .first()
    {
        let task = def
            .tasks
            .iter()
            .find(|t| t.task_group.as_deref() == Some(group.as_str()))
            .map_or("", |t| t.name.as_str());
        return Err(Error::BadRequest(format!(
            "task '{task}' uses task group '{group}', which does not exist; create it first with `shoal task-group create {group} --slots N`"
        )));
    }
    let channels = def.alert_channels();
    if channels.is_empty() {
        return Ok(());
    }
    if let Some(channel) = ctx.store.missing_alert_channels(&channels).await?.first() {
        return Err(Error::BadRequest(format!(
            "alert channel '{channel}' does not exist; create it first with `shoal alert-channel create {channel} ...`"
        )));
    }
    Ok(())
}

/// Parses and validates a definition applied under `url_project`. A definition without a
/// `project` key belongs to the URL's project; one that names another project is refused.
fn parse_for_project(text: &str, url_project: &str) -> Result<WorkflowDef, DefinitionError> {
    let mut def = WorkflowDef::parse(text)?;
    // The parse succeeded, so the text is a YAML mapping; only whether it has the key
    // matters (an explicit `project: default` must not be overridden by the URL).
    let names_project = serde_yaml::from_str::<serde_yaml::Mapping>(text)
        .map(|m| m.contains_key("project"))
        .unwrap_or(true);
    if !names_project {
        def.project = url_project.to_string();
        def.validate()?;
    } else if def.project != url_project {
        return Err(DefinitionError::ProjectMismatch {
            given: def.project,
            expected: url_project.to_string(),
        });
    }
    Ok(def)
}

/// `GET /projects/{project}/workflows`: one line per workflow with its latest version.
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
) -> Result<Json<Vec<Value>>> {
    let rows = ctx.store.list_definitions(&project).await?;
    let out = rows
        .into_iter()
        .map(|d| {
            json!({
                "project": d.project,
                "name": d.name,
                "latest_version": d.latest_version,
                "updated_at": ms_to_rfc3339(d.updated_at),
            })
        })
        .collect();
    Ok(Json(out))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionQuery {
    version: Option<i32>,
}

/// `GET /projects/{project}/workflows/{name}[?version=N]`: the latest or a given version.
pub async fn get(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<VersionQuery>,
) -> Result<Json<Value>> {
    match ctx.store.get_definition(&project, &name, q.version).await? {
        Some(def) => Ok(Json(definition_json(&def))),
        None => Err(missing(&ctx, &project, &name, q.version).await),
    }
}

/// The 404 for a definition lookup, telling a missing workflow from a missing version.
async fn missing(ctx: &Ctx, project: &str, name: &str, version: Option<i32>) -> Error {
    if let Some(v) = version {
        match ctx.store.get_definition(project, name, None).await {
            Ok(Some(latest)) => {
                return Error::NotFound(format!(
                    "workflow '{project}/{name}' has no version {v} (latest is {})",
                    latest.version
                ));
            }
            Ok(None) => {}
            Err(e) => return e.into(),
        }
    }
    Error::NotFound(format!("workflow '{project}/{name}' does not exist"))
}

pub fn definition_json(d: &StoredDefinition) -> Value {
    json!({
        "project": d.project,
        "name": d.name,
        "version": d.version,
        "created_at": ms_to_rfc3339(d.created_at),
        "definition": d.definition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_PROJECT: &str = "name: w\ntasks:\n- {name: a, type: noop}\n";

    #[test]
    fn a_definition_without_project_takes_the_urls() {
        assert_eq!(parse_for_project(NO_PROJECT, "etl").unwrap().project, "etl");
        assert_eq!(
            parse_for_project(NO_PROJECT, "default").unwrap().project,
            "default"
        );
        let json = r#"{"name":"w","tasks":[{"name":"a","type":"noop"}]}"#;
        assert_eq!(parse_for_project(json, "etl").unwrap().project, "etl");
    }

    #[test]
    fn a_definition_naming_another_project_is_refused() {
        let text = format!("project: default\n{NO_PROJECT}");
        let err = parse_for_project(&text, "etl").unwrap_err().to_string();
        assert!(err.contains("'default'") && err.contains("'etl'"), "{err}");
        assert_eq!(
            parse_for_project(&text, "default").unwrap().project,
            "default"
        );
    }

    #[test]
    fn a_bad_url_project_is_named() {
        let err = parse_for_project(NO_PROJECT, "bad name")
            .unwrap_err()
            .to_string();
        assert!(err.contains("project name 'bad name'"), "{err}");
    }
}
