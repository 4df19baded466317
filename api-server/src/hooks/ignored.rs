//! `GET /projects/{project}/workflows/{name}/triggers/{trigger}/ignored`: the messages a
//! broker trigger could not use (not JSON, a mapping that failed), with the reason and the
//! start of the body: acknowledged, so never retried, and kept here to be looked at.

use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::ApiPath;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use shoal_common::types::ms_to_rfc3339;
use utoipa::{IntoParams, ToSchema};

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct TriggerPath {
    /// Project name.
    project: String,
    /// Workflow name.
    name: String,
    /// The trigger's name.
    trigger: String,
}

/// A message a trigger could not use.
#[derive(Serialize, ToSchema)]
pub struct IgnoredMessage {
    pub id: i64,
    /// Why (e.g. `the body is not JSON: …`, `the message has no value at $.id …`).
    pub reason: String,
    /// The start of its body (1 KiB at most), as text.
    pub body: String,
    pub received_at: String,
}

/// The messages a broker trigger could not use, newest first (the latest 100).
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows/{name}/triggers/{trigger}/ignored",
    operation_id = "listIgnoredMessages",
    tag = "workflows",
    params(TriggerPath),
    responses(
        (status = 200, description = "Newest first", body = [IgnoredMessage]),
        (status = 404, description = "No such workflow, or it has no such trigger", body = ErrorBody),
    )
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath((project, workflow, trigger)): ApiPath<(String, String, String)>,
) -> Result<Json<Vec<IgnoredMessage>>> {
    let def = ctx.store.get_definition(&project, &workflow, None).await?;
    let known = def.is_some_and(|d| d.definition.triggers.iter().any(|t| t.name == trigger));
    if !known {
        return Err(Error::NotFound(format!(
            "workflow '{project}/{workflow}' has no trigger '{trigger}'"
        )));
    }
    let ignored = ctx
        .store
        .ignored_messages(&project, &workflow, &trigger)
        .await?;
    let listed = ignored.into_iter().map(|m| IgnoredMessage {
        id: m.id,
        reason: m.reason,
        body: m.body,
        received_at: ms_to_rfc3339(m.received_at),
    });
    Ok(Json(listed.collect()))
}
