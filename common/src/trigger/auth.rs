//! A webhook trigger's `auth`: a credential the caller must carry, or `none`, which
//! [`super::check`] accepts only behind an address allowlist or with `public: true` and
//! a rate limit.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum TriggerAuth {
    /// `none`: no credential.
    Open(NoAuth),
    Credential(Credentials),
}

/// The word `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NoAuth {
    None,
}

/// Exactly one of `token` (sent as `Authorization: Bearer`) or `basic` (HTTP Basic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
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

impl TriggerAuth {
    /// Its credentials; None for `auth: none`.
    pub fn credentials(&self) -> Option<&Credentials> {
        match self {
            TriggerAuth::Open(_) => None,
            TriggerAuth::Credential(c) => Some(c),
        }
    }

    pub fn credentials_mut(&mut self) -> Option<&mut Credentials> {
        match self {
            TriggerAuth::Open(_) => None,
            TriggerAuth::Credential(c) => Some(c),
        }
    }

    /// `token`, `basic` or `none`.
    pub fn kind(&self) -> &'static str {
        match self.credentials() {
            None => "none",
            Some(c) if c.basic.is_some() => "basic",
            Some(_) => "token",
        }
    }
}

/// By hand rather than untagged, so a mistake inside `{token, basic}` keeps serde's own
/// message (an unknown field, by name) instead of "did not match any variant".
impl<'de> Deserialize<'de> for TriggerAuth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Auth;
        impl<'de> Visitor<'de> for Auth {
            type Value = TriggerAuth;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("{token: T}, {basic: {user, password}} or none")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<TriggerAuth, E> {
                match v {
                    "none" => Ok(TriggerAuth::Open(NoAuth::None)),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TriggerAuth, A::Error> {
                let fields = de::value::MapAccessDeserializer::new(map);
                Credentials::deserialize(fields).map(TriggerAuth::Credential)
            }
        }
        d.deserialize_any(Auth)
    }
}
