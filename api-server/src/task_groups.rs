//! Task groups: `POST|GET /task-groups`, `DELETE /task-groups/{name}`.

use crate::Ctx;
use crate::error::Result;
use crate::extract::{ApiPath, Body};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::store::TaskGroup;
use shoal_common::types::ms_to_rfc3339;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    name: String,
    slots: i32,
    #[serde(default)]
    description: String,
}

/// `POST /task-groups` `{"name", "slots", "description"}`: 201, 409 if the name is taken.
pub async fn create(State(ctx): State<Ctx>, body: Body) -> Result<(StatusCode, Json<Value>)> {
    let req: CreateRequest = body.json()?;
    let group = TaskGroup {
        name: req.name,
        slots: req.slots,
        description: req.description,
    };
    ctx.store.create_task_group(&group).await?;
    tracing::info!(name = %group.name, slots = group.slots, "task group created");
    Ok((StatusCode::CREATED, Json(json!(group))))
}

/// `GET /task-groups`: every group with its slots in use and its waiting tasks.
pub async fn list(State(ctx): State<Ctx>) -> Result<Json<Vec<Value>>> {
    let groups = ctx.store.list_task_groups().await?;
    Ok(Json(
        groups
            .into_iter()
            .map(|g| {
                let mut v = json!(g);
                v["created_at"] = json!(ms_to_rfc3339(g.created_at));
                v
            })
            .collect(),
    ))
}

/// `DELETE /task-groups/{name}`: 409 while tasks hold or wait for its slots.
pub async fn delete(State(ctx): State<Ctx>, ApiPath(name): ApiPath<String>) -> Result<Json<Value>> {
    ctx.store.delete_task_group(&name).await?;
    tracing::info!(%name, "task group deleted");
    Ok(Json(json!({ "deleted": name })))
}
