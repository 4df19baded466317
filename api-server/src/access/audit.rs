//! `GET /audit`: who changed what, when, from where, and with which result.

use crate::Ctx;
use crate::error::{ErrorBody, Result};
use crate::extract::ApiQuery;
use crate::times::parse_optional_time;
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shoal_common::types::ms_to_rfc3339;
use shoal_store::{AuditFilter, AuditRow};
use utoipa::{IntoParams, ToSchema};

#[derive(Serialize, ToSchema)]
pub struct AuditRecord {
    pub id: i64,
    #[schema(format = DateTime)]
    pub at: String,
    /// The user (`SHOAL_TOKEN` for the holder of the admin token, `anonymous` without auth).
    pub actor: String,
    /// The API operation, e.g. `startWorkflow`.
    pub action: String,
    /// Method and path.
    pub target: String,
    pub project: Option<String>,
    /// What it concerned when the target does not say it all, e.g. `workflow 'etl'
    /// version 3`, `token 'ci' (id 7)`, `secret 'db_password'` (never a value), `command
    /// 12`, `task instances 5, 6`.
    pub object: Option<String>,
    /// The caller's IP address.
    pub address: String,
    /// `ok`, or `<status>: <error>` for a refused request.
    pub result: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    actor: Option<String>,
    project: Option<String>,
    /// An operation id, e.g. `applyWorkflow`.
    action: Option<String>,
    /// At or after this time (RFC 3339).
    #[param(format = DateTime)]
    from: Option<String>,
    /// Before this time (RFC 3339).
    #[param(format = DateTime)]
    to: Option<String>,
    /// Only records older than this id (the next page: the last id seen).
    before: Option<i64>,
    /// 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
}

/// The audit log, newest first.
#[utoipa::path(
    get,
    path = "/audit",
    operation_id = "listAudit",
    tag = "access",
    params(AuditQuery),
    responses(
        (status = 200, description = "Newest first", body = [AuditRecord]),
        (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody),
    )
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<Vec<AuditRecord>>> {
    let filter = AuditFilter {
        actor: q.actor,
        project: q.project,
        action: q.action,
        from: parse_optional_time("from", q.from)?,
        to: parse_optional_time("to", q.to)?,
        before: q.before,
        limit: q.limit.unwrap_or(100).clamp(1, 1000),
    };
    let rows = ctx.store.list_audit(&filter).await?;
    Ok(Json(rows.into_iter().map(record_json).collect()))
}

fn record_json(r: AuditRow) -> AuditRecord {
    AuditRecord {
        id: r.id,
        at: ms_to_rfc3339(r.at),
        actor: r.actor,
        action: r.action,
        target: r.target,
        project: r.project,
        object: r.object,
        address: r.address,
        result: r.result,
    }
}
