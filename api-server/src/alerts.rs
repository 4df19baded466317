//! Alert channels (`POST|GET /alert-channels`, `DELETE /alert-channels/{name}`) and the
//! alert outbox with its delivery record (`GET /alerts`).

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, Body, path};
use crate::task_groups::Deleted;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::secret_key::SecretKey;
use shoal_common::types::ms_to_rfc3339;
use shoal_store::{
    ALERT_FAILED, ALERT_PENDING, ALERT_SENT, AlertFilter, AlertRow, ChannelTarget, EmailTarget,
    WebhookFormat,
};
use utoipa::{IntoParams, ToSchema};

/// Where alerts go: a webhook (`url`, `format`), an e-mail (`smtp`, `from`, `to`, maybe
/// `username`, `password`, `ca`) or the master's log. The same shape is sent to create one
/// and answered, a password as `***`.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertChannel {
    pub name: String,
    #[serde(rename = "type")]
    #[schema(value_type = ChannelType)]
    pub kind: String,
    /// Where a webhook channel POSTs (a Telegram bot's with `?chat_id=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A webhook channel's body format (default json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<WebhookFormat>,
    /// An e-mail channel's server: `smtps://host[:465]` (TLS), `smtp://host[:587]?tls=required`
    /// (STARTTLS) or `smtp://host[:25]` (plain, refused with a password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Stored sealed with the server's secret key; answered as `***`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A PEM CA certificate to trust for this SMTP server beside the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum ChannelType {
    /// A POST to `url`, its body in `format`.
    Webhook,
    /// An e-mail through `smtp`.
    Email,
    /// A line in the master's log.
    Log,
}

impl AlertChannel {
    fn new(name: String, kind: &str) -> AlertChannel {
        AlertChannel {
            name,
            kind: kind.to_string(),
            url: None,
            format: None,
            smtp: None,
            from: None,
            to: None,
            username: None,
            password: None,
            ca: None,
        }
    }
}

impl From<shoal_store::AlertChannel> for AlertChannel {
    fn from(c: shoal_store::AlertChannel) -> Self {
        match c.target {
            ChannelTarget::Webhook { url, format } => AlertChannel {
                url: Some(url),
                format: Some(format),
                ..AlertChannel::new(c.name, "webhook")
            },
            ChannelTarget::Log => AlertChannel::new(c.name, "log"),
            ChannelTarget::Email(e) => AlertChannel {
                smtp: Some(e.smtp),
                from: Some(e.from),
                to: Some(e.to),
                username: e.username,
                password: e.password.map(|_| shoal_common::redact::MASK.to_string()),
                ca: e.ca,
                ..AlertChannel::new(c.name, "email")
            },
        }
    }
}

impl AlertChannel {
    /// The channel to store; an e-mail password sealed with `key`.
    fn into_channel(self, key: Option<&SecretKey>) -> Result<shoal_store::AlertChannel> {
        let refuse =
            |what: &str| Error::BadRequest(format!("a {} channel takes no {what}", self.kind));
        let email_fields = [
            ("\"smtp\"", self.smtp.is_some()),
            ("\"from\"", self.from.is_some()),
            ("\"to\"", self.to.is_some()),
            ("\"username\"", self.username.is_some()),
            ("\"password\"", self.password.is_some()),
            ("\"ca\"", self.ca.is_some()),
        ];
        let webhook_fields = [
            ("\"url\"", self.url.is_some()),
            ("\"format\"", self.format.is_some()),
        ];
        let not_for = |fields: &[(&str, bool)]| match fields.iter().find(|(_, given)| *given) {
            Some((field, _)) => Err(refuse(field)),
            None => Ok(()),
        };
        let target = match self.kind.as_str() {
            "webhook" => {
                not_for(&email_fields)?;
                let Some(url) = self.url else {
                    return Err(Error::BadRequest("a webhook channel needs \"url\"".into()));
                };
                let format = self.format.unwrap_or_default();
                if format == WebhookFormat::Telegram && !url.contains("chat_id=") {
                    return Err(Error::BadRequest(
                        "a telegram channel's url names the chat: \
                         https://api.telegram.org/bot<token>/sendMessage?chat_id=<chat>"
                            .into(),
                    ));
                }
                ChannelTarget::Webhook { url, format }
            }
            "log" => {
                not_for(&email_fields)?;
                not_for(&webhook_fields)?;
                ChannelTarget::Log
            }
            "email" => {
                not_for(&webhook_fields)?;
                let (Some(smtp), Some(from), Some(to)) = (self.smtp, self.from, self.to) else {
                    return Err(Error::BadRequest(
                        "an email channel needs \"smtp\", \"from\" and \"to\"".into(),
                    ));
                };
                let password = match self.password {
                    Some(password) => {
                        let Some(key) = key else {
                            return Err(Error::Unavailable(
                                "this api-server has no secret key to encrypt the password with: \
                                 start it with SHOAL_SECRET_KEY (the same on every master)"
                                    .into(),
                            ));
                        };
                        let sealed = key
                            .seal(&EmailTarget::password_context(&self.name), &password)
                            .map_err(|e| {
                                Error::Unavailable(format!("cannot encrypt the password: {e}"))
                            })?;
                        Some(sealed)
                    }
                    None => None,
                };
                let target = EmailTarget {
                    smtp,
                    from,
                    to,
                    username: self.username,
                    password,
                    ca: self.ca,
                };
                ChannelTarget::Email(target)
            }
            other => {
                return Err(Error::BadRequest(format!(
                    "unknown channel type '{other}' (expected webhook, email or log)"
                )));
            }
        };
        Ok(shoal_store::AlertChannel {
            name: self.name,
            target,
        })
    }
}

/// `POST /alert-channels` `{"name", "type": "webhook"|"email"|"log", ...}`.
#[utoipa::path(
    post,
    path = "/alert-channels",
    operation_id = "createAlertChannel",
    tag = "alerts",
    request_body = AlertChannel,
    responses(
        (status = 201, body = AlertChannel),
        (status = 400, description = "A bad name, type, url, format, server or address", body = ErrorBody),
        (status = 503, description = "A password, and no secret key to seal it with", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
pub async fn create_channel(
    State(ctx): State<Ctx>,
    body: Body,
) -> Result<(StatusCode, Json<AlertChannel>)> {
    let channel = body
        .json::<AlertChannel>()?
        .into_channel(ctx.secret_key.as_ref())?;
    ctx.store.create_alert_channel(&channel).await?;
    tracing::info!(name = %channel.name, "alert channel created");
    Ok((StatusCode::CREATED, Json(channel.into())))
}

/// `GET /alert-channels`: every channel. A webhook's URL is whole for global admins; others
/// see where it goes (`https://hooks.slack.com/***`), as its path is often its credential.
#[utoipa::path(
    get,
    path = "/alert-channels",
    operation_id = "listAlertChannels",
    tag = "alerts",
    responses((status = 200, body = [AlertChannel]))
)]
pub async fn list_channels(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<AlertChannel>>> {
    let channels = ctx.store.list_alert_channels().await?;
    let shown = channels.into_iter().map(AlertChannel::from).map(|mut c| {
        if !caller.admin {
            c.url = c.url.as_deref().map(shoal_common::redact::origin_only);
        }
        c
    });
    Ok(Json(shown.collect()))
}

/// `DELETE /alert-channels/{name}`
#[utoipa::path(
    delete,
    path = "/alert-channels/{name}",
    operation_id = "deleteAlertChannel",
    tag = "alerts",
    params(path::Name),
    responses(
        (status = 200, body = Deleted),
        (status = 404, description = "No such alert channel", body = ErrorBody),
    )
)]
pub async fn delete_channel(
    State(ctx): State<Ctx>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Deleted>> {
    ctx.store.delete_alert_channel(&name).await?;
    tracing::info!(%name, "alert channel deleted");
    Ok(Json(Deleted { deleted: name }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AlertsQuery {
    /// Only alerts of this workflow instance.
    instance: Option<i64>,
    /// Only alerts in this state: pending, sent or failed.
    state: Option<String>,
    /// How many (default 100).
    limit: Option<i64>,
}

/// An alert in the outbox with its delivery record.
#[derive(Serialize, ToSchema)]
pub struct Alert {
    pub id: i64,
    pub workflow_instance_id: i64,
    pub channel: String,
    /// success, failure, stopped or timeout.
    pub event: String,
    /// pending (to deliver, maybe after a failed attempt), sent or failed (gave up).
    pub state: String,
    pub attempts: i32,
    /// Why the last attempt failed; a webhook's URL in it shows only where it goes
    /// (`https://host/***`) unless the caller is a global admin.
    #[schema(required = true)]
    pub last_error: Option<String>,
    pub next_attempt_at: String,
    pub created_at: String,
    #[schema(required = true)]
    pub sent_at: Option<String>,
    /// What is delivered.
    pub payload: Value,
}

/// `GET /alerts?instance=&state=pending|sent|failed&limit=`: newest first.
#[utoipa::path(
    get,
    path = "/alerts",
    operation_id = "listAlerts",
    tag = "alerts",
    params(AlertsQuery),
    responses(
        (status = 200, description = "Newest first", body = [Alert]),
        (status = 400, description = "A bad filter", body = ErrorBody),
    )
)]
pub async fn list(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<AlertsQuery>,
) -> Result<Json<Vec<Alert>>> {
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
        projects: caller.visible_projects(),
    };
    let rows = ctx.store.list_alerts(&filter).await?;
    Ok(Json(rows.iter().map(|a| alert_json(a, &caller)).collect()))
}

/// An alert as `caller` sees it: a webhook URL in its error is whole for global admins
/// only, as in the channel list.
fn alert_json(a: &AlertRow, caller: &Caller) -> Alert {
    let last_error = a.last_error.as_deref().map(|e| match caller.admin {
        true => e.to_string(),
        false => shoal_common::redact::urls_in(e, shoal_common::redact::origin_only).into_owned(),
    });
    Alert {
        id: a.id,
        workflow_instance_id: a.workflow_instance_id,
        channel: a.channel.clone(),
        event: a.event.clone(),
        state: a.state.clone(),
        attempts: a.attempts,
        last_error,
        next_attempt_at: ms_to_rfc3339(a.next_attempt_at),
        created_at: ms_to_rfc3339(a.created_at),
        sent_at: a.sent_at.map(ms_to_rfc3339),
        payload: a.payload.clone(),
    }
}
