//! `GET /projects/{project}/triggers`: every trigger of a project's workflows as listed
//! (never a credential), broker triggers with their consumer's state.

use crate::Ctx;
use crate::error::Result;
use crate::extract::{ApiPath, path};
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use shoal_common::redact::without_password;
use shoal_common::trigger::{TriggerMode, broker};
use shoal_common::types::ms_to_rfc3339;
use shoal_store::ConsumerState;
use std::collections::{BTreeMap, HashMap};
use utoipa::ToSchema;

/// One trigger of a project's workflow, as listed: never its credential.
#[derive(Serialize, ToSchema)]
pub struct TriggerInfo {
    pub workflow: String,
    pub name: String,
    /// `webhook`, `form`, or a broker: `amqp`, `nats`, `mqtt`.
    #[serde(rename = "type")]
    #[schema(example = "webhook")]
    pub trigger_type: String,
    pub mode: TriggerMode,
    /// Webhooks: `token` (`Authorization: Bearer`), `basic` (HTTP Basic) or `none`.
    #[schema(example = "token")]
    pub auth: String,
    /// Addresses allowed to call (CIDR); empty: any.
    pub allow_ips: Vec<String>,
    /// The HTTP methods a webhook call may use.
    #[schema(example = json!(["POST"]))]
    pub methods: Vec<String>,
    /// `auth: none` for anyone.
    pub public: bool,
    /// How many calls it takes (`10/s`); null: no limit.
    #[schema(required = true, example = "10/s")]
    pub rate: Option<String>,
    /// The condition a payload must meet to start a run; null: any.
    #[schema(required = true)]
    pub when: Option<String>,
    /// Start parameter -> JSONPath into the payload.
    pub params: BTreeMap<String, String>,
    /// `sync`: the run's outputs the answer carries.
    pub outputs: Vec<String>,
    /// `sync`: how long a call waits for the run (null for `async`).
    #[schema(required = true, example = "30s")]
    pub timeout: Option<String>,
    /// Webhooks: where to send the payload; forms: the form's page (null for a broker
    /// trigger).
    #[schema(required = true, example = "/api/v1/hooks/default/etl/deploy")]
    pub path: Option<String>,
    /// Forms: who may submit it, `members`, `login` or `public`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// Forms: the parameters its fields set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// Broker triggers: the broker's URL as the definition gives it (`${secret.NAME}`), a
    /// password in it masked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Broker triggers: the AMQP queue, NATS subject or MQTT topic consumed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumes: Option<String>,
    /// Broker triggers: the JSONPath of a message's business key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Broker triggers: the event a message is delivered as (instead of starting a run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Broker triggers: the consumer, once a master runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer: Option<ConsumerInfo>,
}

/// A broker trigger's consumer, as the master that runs it last recorded it.
#[derive(Serialize, ToSchema)]
pub struct ConsumerInfo {
    /// The master it runs on.
    pub master: String,
    /// `connecting`, `connected` or `failed` (it connects again after a pause).
    #[schema(example = "connected")]
    pub state: String,
    /// Why it failed last (kept while it connects again, cleared once connected).
    #[schema(required = true)]
    pub error: Option<String>,
    /// Since when it is in this state.
    pub since: String,
    /// When its last message came (recorded every few seconds at most).
    #[schema(required = true)]
    pub last_message_at: Option<String>,
    /// What the messages it took since it started on this master did (recorded with
    /// `last_message_at`; a new consumer, after a restart or a change of master, counts
    /// from 0 again).
    pub messages: MessageCounts,
}

/// Messages by what they did.
#[derive(Serialize, ToSchema)]
pub struct MessageCounts {
    /// Started a run.
    pub started: i64,
    /// Did not match the trigger's `when`: nothing was written.
    pub filtered: i64,
    /// Could not be used (listed by `.../ignored`).
    pub ignored: i64,
    /// Repeated a message taken before (a redelivery, or the same `key`).
    pub duplicate: i64,
    /// Delivered as the trigger's event.
    pub delivered: i64,
}

impl From<ConsumerState> for ConsumerInfo {
    fn from(s: ConsumerState) -> ConsumerInfo {
        ConsumerInfo {
            master: s.master,
            state: s.state,
            error: s.error,
            since: ms_to_rfc3339(s.since),
            last_message_at: s.last_message_at.map(ms_to_rfc3339),
            messages: MessageCounts {
                started: s.counts.started,
                filtered: s.counts.filtered,
                ignored: s.counts.ignored,
                duplicate: s.counts.duplicate,
                delivered: s.counts.delivered,
            },
        }
    }
}

/// `GET /projects/{project}/triggers`: the triggers of the latest version of every
/// workflow of the project, by workflow.
#[utoipa::path(
    get,
    path = "/projects/{project}/triggers",
    operation_id = "listTriggers",
    tag = "workflows",
    params(path::Project),
    responses((status = 200, description = "By workflow, in definition order", body = [TriggerInfo]))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
) -> Result<Json<Vec<TriggerInfo>>> {
    let workflows = ctx.store.project_triggers(&project).await?;
    let mut consumers: HashMap<(String, String), ConsumerState> = ctx
        .store
        .consumer_states(&project)
        .await?
        .into_iter()
        .map(|c| ((c.workflow.clone(), c.trigger_name.clone()), c))
        .collect();
    let mut listed = Vec::new();
    for (workflow, triggers) in workflows {
        for t in triggers {
            let consumer = consumers.remove(&(workflow.clone(), t.name.clone()));
            let path = match t.trigger_type.as_str() {
                "webhook" => Some(format!("/api/v1/hooks/{project}/{workflow}/{}", t.name)),
                "form" => Some(format!("/forms/{project}/{workflow}/{}", t.name)),
                _ => None,
            };
            listed.push(TriggerInfo {
                access: (t.trigger_type == "form").then(|| t.access().as_str().to_string()),
                fields: t.fields.iter().map(|f| f.name.clone()).collect(),
                path,
                consumes: broker::target(&t).map(str::to_string),
                url: t.url.as_deref().map(shown_url),
                consumer: consumer.map(ConsumerInfo::from),
                workflow: workflow.clone(),
                auth: t.auth_kind().to_string(),
                methods: t.methods().iter().map(|m| m.as_str().to_string()).collect(),
                public: t.public,
                rate: t.rate.map(|r| r.to_string()),
                timeout: (t.mode == TriggerMode::Sync)
                    .then(|| shoal_common::duration::format(t.timeout())),
                trigger_type: t.trigger_type,
                name: t.name,
                mode: t.mode,
                allow_ips: t.allow_ips,
                when: t.when,
                params: t.params,
                outputs: t.outputs,
                key: t.key,
                event: t.event,
            });
        }
    }
    Ok(Json(listed))
}

/// A broker URL as listed: a secret reference as written, a password masked.
fn shown_url(url: &str) -> String {
    match url.contains("${") {
        true => url.to_string(),
        false => without_password(url),
    }
}
