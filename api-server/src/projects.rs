//! `GET /projects`: the projects that have workflows, for a project switcher.

use crate::Ctx;
use crate::error::Result;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use shoal_common::definition::DEFAULT_PROJECT;
use utoipa::ToSchema;

#[derive(Serialize, ToSchema)]
pub struct Project {
    pub name: String,
    /// How many workflows it has.
    pub workflows: i64,
}

/// Every project that has workflows, by name; `default` is always listed.
#[utoipa::path(
    get,
    path = "/projects",
    operation_id = "listProjects",
    tag = "workflows",
    responses((status = 200, description = "By name", body = [Project]))
)]
pub async fn list(State(ctx): State<Ctx>) -> Result<Json<Vec<Project>>> {
    let mut projects: Vec<Project> = ctx
        .store
        .list_projects()
        .await?
        .into_iter()
        .map(|p| Project {
            name: p.name,
            workflows: p.workflows,
        })
        .collect();
    // By name in Rust's order, whatever the database's collation.
    projects.sort_by(|a, b| a.name.cmp(&b.name));
    if let Err(at) = projects.binary_search_by(|p| p.name.as_str().cmp(DEFAULT_PROJECT)) {
        projects.insert(
            at,
            Project {
                name: DEFAULT_PROJECT.to_string(),
                workflows: 0,
            },
        );
    }
    Ok(Json(projects))
}
