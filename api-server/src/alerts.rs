//! Alert channels (`POST|GET /alert-channels`, `DELETE /alert-channels/{name}`) and the
//! alert outbox with its delivery record (`GET /alerts`).

use crate::Ctx;
use crate::error::{Error, Result};
use crate::extract::{ApiPath, ApiQuery, Body};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::store::{
    ALERT_FAILED, ALERT_PENDING, ALERT_SENT, AlertChannel, AlertFilter, AlertRow, ChannelTarget,
    WebhookFormat,
};
use shoal_common::types::ms_to_rfc3339;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelRequest {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    url: Option<String>,
    format: Option<WebhookFormat>,
}

impl ChannelRequest {
    fn into_channel(self) -> Result<AlertChannel> {
        let target = match (self.kind.as_str(), self.url, self.format) {
            ("webhook", Some(url), format) => ChannelTarget::Webhook {
                url,
                format: format.unwrap_or_default(),
            },
            ("webhook", None, _) => {
                return Err(Error::BadRequest("a webhook channel needs \"url\"".into()));
            }
            ("log", None, None) => ChannelTarget::Log,
            ("log", _, _) => {
                return Err(Error::BadRequest(
                    "a log channel takes no \"url\" or \"format\"".into(),
                ));
            }
            (other, _, _) => {
                return Err(Error::BadRequest(format!(
                    "unknown channel type '{other}' (expected webhook or log)"
                )));
            }
        };
        Ok(AlertChannel {
            name: self.name,
            target,
        })
    }
}

/// `POST /alert-channels` `{"name", "type": "webhook"|"log", "url", "format": "json"|"slack"}`.
pub async fn create_channel(
    State(ctx): State<Ctx>,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    let channel = body.json::<ChannelRequest>()?.into_channel()?;
    ctx.store.create_alert_channel(&channel).await?;
    tracing::info!(name = %channel.name, "alert channel created");
    Ok((StatusCode::CREATED, Json(json!(channel))))
}

pub async fn list_channels(State(ctx): State<Ctx>) -> Result<Json<Value>> {
    Ok(Json(json!(ctx.store.list_alert_channels().await?)))
}

pub async fn delete_channel(
    State(ctx): State<Ctx>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Value>> {
    ctx.store.delete_alert_channel(&name).await?;
    tracing::info!(%name, "alert channel deleted");
    Ok(Json(json!({ "deleted": name })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsQuery {
    instance: Option<i64>,
    state: Option<String>,
    limit: Option<i64>,
}

/// `GET /alerts?instance=&state=pending|sent|failed&limit=`: newest first.
pub async fn list(
    State(ctx): State<Ctx>,
    ApiQuery(q): ApiQuery<AlertsQuery>,
) -> Result<Json<Vec<Value>>> {
    let state = q.state.filter(|s| !s.is_empty());
    if let Some(s) = &state
        && ![ALERT_PENDING, ALERT_SENT, ALERT_FAILED].contains(&s.as_str())
    {
        return Err(Error::BadRequest(format!(
            "unknown alert state '{s}' (expected pending, sent or failed)"
        )));
    }
    let filter = AlertFilter {
        workflow_instance_id: q.instance,
        state,
        limit: q.limit,
    };
    let rows = ctx.store.list_alerts(&filter).await?;
    Ok(Json(rows.iter().map(alert_json).collect()))
}

fn alert_json(a: &AlertRow) -> Value {
    json!({
        "id": a.id,
        "workflow_instance_id": a.workflow_instance_id,
        "channel": a.channel,
        "event": a.event,
        "state": a.state,
        "attempts": a.attempts,
        "last_error": a.last_error,
        "next_attempt_at": ms_to_rfc3339(a.next_attempt_at),
        "created_at": ms_to_rfc3339(a.created_at),
        "sent_at": a.sent_at.map(ms_to_rfc3339),
        "payload": a.payload,
    })
}
