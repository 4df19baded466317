//! `GET /cluster`: the live masters and workers with their load.

use crate::Ctx;
use crate::error::{Error, Result};
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use shoal_common::registry::Role;
use shoal_common::types::ms_to_rfc3339;

pub async fn nodes(State(ctx): State<Ctx>) -> Result<Json<Value>> {
    let registry = ctx.registry.as_ref().ok_or_else(|| {
        Error::Unavailable(
            "this api-server has no registry; start it with --etcd to list the cluster".into(),
        )
    })?;
    let mut nodes = registry.nodes().await?;
    nodes.sort_by(|a, b| (a.role == Role::Worker, &a.addr).cmp(&(b.role == Role::Worker, &b.addr)));
    let list: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({
                "role": n.role,
                "addr": n.addr,
                "groups": n.groups,
                "slots": n.slots,
                "running": n.running,
                "weight": n.weight,
                "started_at": ms_to_rfc3339(n.started_at),
            })
        })
        .collect();
    Ok(Json(Value::Array(list)))
}
