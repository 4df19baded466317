//! Task groups: `POST|GET /task-groups`, `DELETE /task-groups/{name}`.

use crate::Ctx;
use crate::error::{ErrorBody, Result};
use crate::extract::{ApiPath, Body, path};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use shoal_common::types::ms_to_rfc3339;
use utoipa::ToSchema;

/// A task group to create, and what creating one answers.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTaskGroup {
    pub name: String,
    /// Attempts of its tasks that may hold a slot at once.
    pub slots: i32,
    #[serde(default)]
    pub description: String,
}

/// A task group with what uses it now.
#[derive(Serialize, ToSchema)]
pub struct TaskGroup {
    pub name: String,
    pub slots: i32,
    pub description: String,
    /// Attempts holding a slot.
    pub in_use: i64,
    /// Attempts waiting for one.
    pub waiting: i64,
    pub created_at: String,
}

/// What a delete removed.
#[derive(Serialize, ToSchema)]
pub struct Deleted {
    /// The name of what was deleted.
    pub deleted: String,
}

/// `POST /task-groups` `{"name", "slots", "description"}`: 201, 409 if the name is taken.
#[utoipa::path(
    post,
    path = "/task-groups",
    operation_id = "createTaskGroup",
    tag = "task-groups",
    request_body = NewTaskGroup,
    responses(
        (status = 201, body = NewTaskGroup),
        (status = 400, description = "A bad name or slot count", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
pub async fn create(
    State(ctx): State<Ctx>,
    body: Body,
) -> Result<(StatusCode, Json<NewTaskGroup>)> {
    let req: NewTaskGroup = body.json()?;
    let group = shoal_store::TaskGroup {
        name: req.name,
        slots: req.slots,
        description: req.description,
    };
    ctx.store.create_task_group(&group).await?;
    tracing::info!(name = %group.name, slots = group.slots, "task group created");
    let answer = NewTaskGroup {
        name: group.name,
        slots: group.slots,
        description: group.description,
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// `GET /task-groups`: every group with its slots in use and its waiting tasks.
#[utoipa::path(
    get,
    path = "/task-groups",
    operation_id = "listTaskGroups",
    tag = "task-groups",
    responses((status = 200, body = [TaskGroup]))
)]
pub async fn list(State(ctx): State<Ctx>) -> Result<Json<Vec<TaskGroup>>> {
    let groups = ctx.store.list_task_groups().await?;
    Ok(Json(
        groups
            .into_iter()
            .map(|g| TaskGroup {
                name: g.group.name,
                slots: g.group.slots,
                description: g.group.description,
                in_use: g.in_use,
                waiting: g.waiting,
                created_at: ms_to_rfc3339(g.created_at),
            })
            .collect(),
    ))
}

/// `DELETE /task-groups/{name}`: 409 while tasks hold or wait for its slots.
#[utoipa::path(
    delete,
    path = "/task-groups/{name}",
    operation_id = "deleteTaskGroup",
    tag = "task-groups",
    params(path::Name),
    responses(
        (status = 200, body = Deleted),
        (status = 404, description = "No such task group", body = ErrorBody),
        (status = 409, description = "Tasks hold or wait for its slots", body = ErrorBody),
    )
)]
pub async fn delete(
    State(ctx): State<Ctx>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Deleted>> {
    ctx.store.delete_task_group(&name).await?;
    tracing::info!(%name, "task group deleted");
    Ok(Json(Deleted { deleted: name }))
}
