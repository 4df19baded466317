//! Webhook triggers of a workflow: who may call them (a token or a basic password, an
//! address allowlist), how a call's JSON payload becomes start parameters, and what a
//! synchronous call answers with.

use crate::definition::DefinitionError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerDef {
    pub name: String,
    /// Only `webhook` for now.
    #[serde(rename = "type", default = "webhook")]
    pub trigger_type: String,
    /// `async` answers 202 with the run at once; `sync` waits for the run to end.
    #[serde(default)]
    pub mode: TriggerMode,
    pub auth: TriggerAuth,
    /// Client addresses (CIDR, e.g. `10.0.0.0/8`) allowed to call; empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_ips: Vec<String>,
    /// Start parameter -> JSONPath into the payload (`$.data.id`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// `sync`: how long the call waits for the run to end (default 30s).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub timeout: Option<Duration>,
    /// `sync`: the run's outputs the answer carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerMode {
    #[default]
    Async,
    Sync,
}

/// Exactly one of `token` (sent as `Authorization: Bearer`) or `basic` (HTTP Basic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<BasicAuth>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    pub user: String,
    pub password: String,
}

fn webhook() -> String {
    "webhook".to_string()
}

/// Checks every trigger of a definition.
pub fn validate(triggers: &[TriggerDef]) -> Result<(), DefinitionError> {
    let bad = |t: &TriggerDef, reason: String| DefinitionError::BadTrigger {
        trigger: t.name.clone(),
        reason,
    };
    for (i, t) in triggers.iter().enumerate() {
        if !crate::definition::valid_name(&t.name) {
            return Err(DefinitionError::BadName {
                what: "trigger name",
                value: t.name.clone(),
            });
        }
        if triggers[..i].iter().any(|o| o.name == t.name) {
            return Err(bad(t, "the name is used more than once".into()));
        }
        if t.trigger_type != "webhook" {
            return Err(bad(
                t,
                format!("unknown type '{}' (known: webhook)", t.trigger_type),
            ));
        }
        if t.auth.token.is_some() == t.auth.basic.is_some() {
            return Err(bad(
                t,
                "auth needs exactly one of {token: T} or {basic: {user, password}}".into(),
            ));
        }
    }
    Ok(())
}
