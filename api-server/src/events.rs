//! Events that complete waiting tasks: `POST /projects/{project}/events/{event}` with a
//! business key completes every wait task of the project waiting for that event and key,
//! the event's data becoming their outputs. An event that completes none is kept for
//! `--event-retention`, for the first such wait that begins meanwhile (see
//! `shoal_store::Store::deliver_event`).

use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, check_identifier};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::definition::MAX_EVENT_KEY;
use shoal_common::types::ms_to_rfc3339;
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// An event for the waits of one business key.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendEvent {
    /// The business key (e.g. an order id): the waits whose `key` expanded to it are
    /// completed.
    #[serde(default)]
    key: Option<String>,
    /// The outputs of the tasks it completes, seen downstream as `${name}` (a switch
    /// after the wait branches on them); strings, numbers or booleans.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, crate::commands::StartParam>>)]
    data: Option<Value>,
}

/// What the event did.
#[derive(Serialize, ToSchema)]
pub struct EventDelivered {
    /// The task instances it completed, by id.
    pub completed: Vec<i64>,
    /// When it completed none: until when it is kept for a wait that begins later (null
    /// when it completed some, or the server keeps no events).
    pub kept_until: Option<String>,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct EventPath {
    /// Project name.
    project: String,
    /// The event's name, as wait tasks name it (`event: order_paid`).
    event: String,
}

/// `POST /projects/{project}/events/{event}` `{"key": "42", "data": {...}}`: completes
/// every wait task of the project waiting for this event and key, as succeeded with `data`
/// as its outputs.
#[utoipa::path(
    post,
    path = "/projects/{project}/events/{event}",
    operation_id = "sendEvent",
    tag = "instances",
    params(EventPath),
    request_body(content = SendEvent, description = "The business key, and the outputs of the tasks it completes"),
    responses(
        (status = 200, description = "The waits it completed; none: it is kept for a wait that begins later", body = EventDelivered),
        (status = 400, description = "No key, data that is not an object of scalars, a bad event or output name", body = ErrorBody),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
pub async fn send(
    State(ctx): State<Ctx>,
    ApiPath((project, event)): ApiPath<(String, String)>,
    body: Body,
) -> Result<Json<EventDelivered>> {
    check_identifier("event", &event)?;
    let req: SendEvent = body.json_or_default()?;
    let Some(key) = req.key.filter(|k| !k.is_empty()) else {
        return Err(Error::BadRequest(
            "\"key\" is required: the business key of the waits to complete (e.g. an order id)"
                .into(),
        ));
    };
    if key.len() > MAX_EVENT_KEY {
        return Err(Error::BadRequest(format!(
            "\"key\" is {} bytes long: an event's key has at most {MAX_EVENT_KEY}",
            key.len()
        )));
    }
    let data = match req.data {
        None => BTreeMap::new(),
        Some(Value::Object(data)) => data.into_iter().collect(),
        Some(other) => {
            return Err(Error::BadRequest(format!(
                "\"data\" must be a JSON object of output names to strings, numbers or booleans, not {other}"
            )));
        }
    };
    let outputs = crate::completions::given_outputs(data)?;
    let delivered = (ctx.store)
        .deliver_event(&project, &event, &key, &outputs, ctx.limits.event_retention)
        .await?;
    tracing::info!(
        %project,
        %event,
        completed = delivered.completed.len(),
        kept = delivered.kept_until.is_some(),
        "event delivered"
    );
    Ok(Json(EventDelivered {
        completed: delivered.completed,
        kept_until: delivered.kept_until.map(ms_to_rfc3339),
    }))
}
