//! Commands: the api-server's only way to make something run. A master claims each command
//! and turns it into a workflow instance.

use crate::Ctx;
use crate::error::{Error, Result};
use crate::extract::{ApiPath, Body};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::store::{
    CommandStatus, NewCommand, Params, Scope, StartOptions, StoredDefinition,
};
use shoal_common::types::{CommandKind, Priority};
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// Startup parameters; values may be strings, numbers or booleans.
    #[serde(default)]
    params: BTreeMap<String, Value>,
    /// Overrides the definition's priority for this run.
    #[serde(default)]
    priority: Option<Priority>,
    /// Tasks succeed without executing.
    #[serde(default)]
    dry_run: bool,
    /// Start from this task instead of the DAG's roots.
    #[serde(default)]
    from_task: Option<String>,
    /// Which tasks a start from `from_task` runs (the master's default: downstream).
    #[serde(default)]
    scope: Option<Scope>,
}

/// `POST /projects/{project}/workflows/{name}/start` with an optional JSON body
/// `{"params": {...}, "priority": "high", "dry_run": true, "from_task": "b",
/// "scope": "only|upstream|downstream"}`. Pins the latest version and answers 202 with
/// the command id; `GET /commands/{id}` tells when it became an instance.
pub async fn start(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    let req: StartRequest = body.json_or_default()?;
    let params = startup_params(req.params)?;
    if req.scope.is_some() && req.from_task.is_none() {
        return Err(Error::BadRequest(
            "\"scope\" needs \"from_task\": name the task to start from".into(),
        ));
    }
    let def = latest_definition(&ctx, &project, &name).await?;
    if let Some(task) = &req.from_task
        && !def.definition.tasks.iter().any(|t| &t.name == task)
    {
        return Err(Error::BadRequest(format!(
            "from_task '{task}' is not a task of workflow '{project}/{name}' (version {})",
            def.version
        )));
    }
    refuse_undefined(&def, &params)?;
    let cmd = NewCommand {
        kind: CommandKind::Start,
        project,
        workflow: name,
        version: def.version,
        params,
        priority: req.priority,
        workflow_instance_id: None,
        options: StartOptions {
            dry_run: req.dry_run,
            from_task: req.from_task,
            scope: req.scope,
            ..Default::default()
        },
        parent_task_id: None,
        schedule_time: None,
    };
    let command_id = ctx.store.insert_command(&cmd).await?;
    tracing::info!(
        command_id,
        kind = %cmd.kind,
        project = %cmd.project,
        workflow = %cmd.workflow,
        version = cmd.version,
        params = cmd.params.len(),
        dry_run = cmd.options.dry_run,
        from_task = cmd.options.from_task.as_deref(),
        "command written"
    );
    let answer = json!({ "command_id": command_id, "version": cmd.version });
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// The latest version of a workflow; 404 when it was never applied.
pub(crate) async fn latest_definition(
    ctx: &Ctx,
    project: &str,
    name: &str,
) -> Result<StoredDefinition> {
    ctx.store.get_definition(project, name, None).await?.ok_or_else(|| {
        Error::NotFound(format!(
            "workflow '{project}/{name}' does not exist; apply it first with `shoal apply -f FILE`"
        ))
    })
}

/// Refuses startup parameters that leave a `${name}` of a task undefined.
pub(crate) fn refuse_undefined(def: &StoredDefinition, params: &Params) -> Result<()> {
    match def
        .definition
        .unresolvable_references(params)
        .into_iter()
        .next()
    {
        Some((task, param)) => Err(Error::BadRequest(format!(
            "task '{task}' refers to ${{{param}}}, which is not defined: add it to the workflow's or the task's params, or pass it at start (--param {param}=VALUE)"
        ))),
        None => Ok(()),
    }
}

/// Checks startup parameter names and turns scalar values into the strings tasks see.
pub(crate) fn startup_params(raw: BTreeMap<String, Value>) -> Result<Params> {
    raw.into_iter()
        .map(|(k, v)| {
            let valid = (1..=128).contains(&k.len())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !valid {
                return Err(Error::BadRequest(format!(
                    "invalid parameter name '{k}': use letters, digits, '_', '.' or '-' (1-128 characters)"
                )));
            }
            let v = match v {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    return Err(Error::BadRequest(format!(
                        "parameter '{k}' must be a string, number or boolean, not {other}"
                    )));
                }
            };
            Ok((k, v))
        })
        .collect()
}

/// `GET /commands/{id}`: pending until a master claims it, then done with the instance id
/// (or error with the reason it could not become an instance).
pub async fn status(State(ctx): State<Ctx>, ApiPath(id): ApiPath<i64>) -> Result<Json<Value>> {
    let status = ctx
        .store
        .command_status(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("command {id} does not exist")))?;
    let (status, instance, error) = match status {
        CommandStatus::Pending => ("pending", None, None),
        CommandStatus::Done {
            workflow_instance_id,
        } => ("done", Some(workflow_instance_id), None),
        CommandStatus::Error { error } => ("error", None, Some(error)),
    };
    Ok(Json(json!({
        "id": id,
        "status": status,
        "workflow_instance_id": instance,
        "error": error,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_params_become_strings() {
        let raw = serde_json::from_str(r#"{"dt":"2026-01-01","n":3,"x.y-z":true,"f":1.5}"#);
        let p = startup_params(raw.unwrap()).unwrap();
        assert_eq!(p["dt"], "2026-01-01");
        assert_eq!(p["n"], "3");
        assert_eq!(p["x.y-z"], "true");
        assert_eq!(p["f"], "1.5");
    }

    #[test]
    fn bad_params_are_named() {
        let bad = |j: &str| startup_params(serde_json::from_str(j).unwrap()).unwrap_err();
        assert!(
            bad(r#"{"":"v"}"#)
                .to_string()
                .contains("invalid parameter name ''")
        );
        assert!(bad(r#"{"a b":"v"}"#).to_string().contains("'a b'"));
        assert!(
            bad(r#"{"k":[1]}"#)
                .to_string()
                .contains("parameter 'k' must be")
        );
        assert!(
            bad(r#"{"k":null}"#)
                .to_string()
                .contains("parameter 'k' must be")
        );
    }
}
