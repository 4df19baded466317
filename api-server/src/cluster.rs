//! `GET /cluster`: the live masters and workers with their load.

use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use shoal_common::registry::Role;
use shoal_common::types::ms_to_rfc3339;
use utoipa::ToSchema;

/// A live master or worker.
#[derive(Serialize, ToSchema)]
pub struct Node {
    pub role: Role,
    /// host:port of its gRPC server.
    pub addr: String,
    /// Worker groups it serves (workers).
    pub groups: Vec<String>,
    /// Tasks it runs at once (workers).
    pub slots: u32,
    /// Tasks it runs now (workers).
    pub running: u32,
    pub weight: u32,
    pub started_at: String,
    /// Why this master claims no new commands now (`--max-cpu-load`,
    /// `--min-free-memory`); absent while it claims.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overloaded: Option<String>,
}

/// Masters first, then workers, each by address. Standalone lists its embedded master
/// and worker; a separate api-server needs `--etcd` to see the cluster.
#[utoipa::path(
    get,
    path = "/cluster",
    operation_id = "listNodes",
    tag = "cluster",
    responses(
        (status = 200, body = [Node]),
        (status = 503, description = "This api-server has no registry (started without --etcd), or etcd is unreachable", body = ErrorBody),
    )
)]
pub async fn nodes(State(ctx): State<Ctx>) -> Result<Json<Vec<Node>>> {
    let registry = ctx.registry.as_ref().ok_or_else(|| {
        Error::Unavailable(
            "this api-server has no registry; start it with --etcd to list the cluster".into(),
        )
    })?;
    let mut nodes = registry.nodes().await?;
    nodes.sort_by(|a, b| (a.role == Role::Worker, &a.addr).cmp(&(b.role == Role::Worker, &b.addr)));
    let list = nodes
        .into_iter()
        .map(|n| Node {
            role: n.role,
            addr: n.addr,
            groups: n.groups,
            slots: n.slots,
            running: n.running,
            weight: n.weight,
            started_at: ms_to_rfc3339(n.started_at),
            overloaded: n.overloaded,
        })
        .collect();
    Ok(Json(list))
}
