//! Who may call a trigger: a caller from an allowed address (the TCP peer, or what a
//! trusted proxy says it forwarded), carrying the trigger's token or basic password.

use crate::Ctx;
use crate::error::{Error, Result};
use axum::Json;
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use shoal_common::access::token_hash;
use shoal_common::trigger::cidr::Cidr;
use shoal_common::trigger::credential::verify;
use shoal_common::trigger::{Credential, TriggerAuth, TriggerDef};
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{LazyLock, Mutex};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

/// 403 unless `client` is in the trigger's `allow_ips` (an empty list allows anyone).
pub(crate) fn check_address(t: &TriggerDef, client: Option<IpAddr>) -> Result<()> {
    if t.allow_ips.is_empty() {
        return Ok(());
    }
    // Checked when the definition was applied: an entry that no longer parses allows no one.
    let allowed = client.is_some_and(|ip| {
        t.allow_ips
            .iter()
            .filter_map(|c| c.parse::<Cidr>().ok())
            .any(|c| c.contains(ip))
    });
    if allowed {
        return Ok(());
    }
    let who = client.map_or_else(|| "an unknown address".to_string(), |ip| ip.to_string());
    // Not the list itself: the caller may be anyone.
    Err(Error::Forbidden(format!(
        "trigger '{}' may not be called from {who}, which is not in its allow_ips; behind a \
         reverse proxy, start the server with --trusted-proxy set to the proxy's address",
        t.name
    )))
}

/// What a request's `Authorization` header carries.
pub(crate) enum Presented {
    None,
    Bearer(String),
    Basic { user: String, password: String },
    Unreadable,
}

pub(crate) fn presented(headers: &HeaderMap) -> Presented {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Presented::None;
    };
    let Ok(value) = value.to_str() else {
        return Presented::Unreadable;
    };
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") && !rest.is_empty() {
        return Presented::Bearer(rest.to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let pair = (BASIC.decode(rest).ok()).and_then(|bytes| String::from_utf8(bytes).ok());
        if let Some((user, password)) = pair.as_deref().and_then(|p| p.split_once(':')) {
            return Presented::Basic {
                user: user.to_string(),
                password: password.to_string(),
            };
        }
    }
    Presented::Unreadable
}

/// Standard base64 (RFC 4648) as HTTP Basic sends it; some clients leave out the `=`
/// padding, or set the unused bits of the last character.
const BASIC: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// A refused credential: 401 with the challenge of the trigger's scheme, so a client that
/// sends credentials only when challenged (curl --anyauth, browsers) sends them.
pub(super) struct Refused {
    scheme: &'static str,
    realm: String,
    message: String,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let challenge = format!(
            "{} realm=\"{}\", charset=\"UTF-8\"",
            self.scheme, self.realm
        );
        let body = super::error_body(self.message, None);
        let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
        if let Ok(value) = challenge.parse() {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// Checks the request's credential against the trigger's: Ok, a 401 ([`Refused`]), or
/// an error when the trigger's own credential cannot be read (a secret it names is
/// missing).
pub(super) async fn check_credential(
    ctx: &Ctx,
    project: &str,
    workflow: &str,
    t: &TriggerDef,
    headers: &HeaderMap,
) -> Result<std::result::Result<(), Refused>> {
    let refuse = |scheme: &'static str, message: String| Refused {
        scheme,
        realm: format!("shoal trigger {project}/{workflow}/{}", t.name),
        message,
    };
    let name = &t.name;
    let credentials = match &t.auth {
        // Checked at apply to be behind an allowlist, or public at a rate.
        Some(TriggerAuth::Open(_)) => return Ok(Ok(())),
        Some(TriggerAuth::Credential(c)) => c,
        None => {
            return Err(Error::Store(shoal_common::Error::Corrupt(format!(
                "trigger '{name}' of workflow '{project}/{workflow}' has no auth"
            ))));
        }
    };
    match (&credentials.basic, &credentials.token, presented(headers)) {
        (None, Some(stored), Presented::Bearer(token)) => {
            let expected = expected(ctx, project, stored).await?;
            Ok(expected
                .matches(token)
                .await
                .then_some(())
                .ok_or_else(|| refuse("Bearer", format!("wrong token for trigger '{name}'"))))
        }
        (None, Some(_), _) => Ok(Err(refuse(
            "Bearer",
            format!("trigger '{name}' needs its token: send Authorization: Bearer <token>"),
        ))),
        (Some(basic), _, Presented::Basic { user, password }) => {
            let expected = expected(ctx, project, &basic.password).await?;
            // Both checked, so the time taken does not tell which one was wrong.
            let right_user: bool = (token_hash(&user).as_bytes())
                .ct_eq(token_hash(&basic.user).as_bytes())
                .into();
            let right = right_user & expected.matches(password).await;
            Ok(right.then_some(()).ok_or_else(|| {
                refuse(
                    "Basic",
                    format!("wrong user or password for trigger '{name}'"),
                )
            }))
        }
        (Some(_), ..) => Ok(Err(refuse(
            "Basic",
            format!(
                "trigger '{name}' needs HTTP Basic credentials: send Authorization: Basic base64(user:password)"
            ),
        ))),
        (None, None, _) => Err(Error::Store(shoal_common::Error::Corrupt(format!(
            "trigger '{name}' of workflow '{project}/{workflow}' has no credential"
        )))),
    }
}

/// What a presented credential must be.
enum Expected {
    /// The value a stored hash was made from.
    Sealed(String),
    /// A project secret's value.
    Plain(String),
}

/// Stored hashes run PBKDF2 at most this many at a time, so a flood of wrong guesses
/// holds a bounded share of the CPU.
static HASHING: Semaphore = Semaphore::const_new(2);
/// Credentials that matched a stored hash (SHA-256 of hash and value), so a caller that
/// calls often pays the slow hash once. Bounded: emptied when full.
static MATCHED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);
const MATCHED_MAX: usize = 4096;

impl Expected {
    async fn matches(&self, presented: String) -> bool {
        let sealed = match self {
            Expected::Plain(value) => {
                let digest = token_hash(&presented);
                return digest.as_bytes().ct_eq(token_hash(value).as_bytes()).into();
            }
            Expected::Sealed(sealed) => sealed.clone(),
        };
        let key = token_hash(&format!("{sealed}\0{presented}"));
        if MATCHED.lock().is_ok_and(|m| m.contains(&key)) {
            return true;
        }
        let Ok(_permit) = HASHING.acquire().await else {
            return false;
        };
        let right = tokio::task::spawn_blocking(move || verify(&presented, &sealed))
            .await
            .unwrap_or(false);
        if right && let Ok(mut matched) = MATCHED.lock() {
            if matched.len() >= MATCHED_MAX {
                matched.clear();
            }
            matched.insert(key);
        }
        right
    }
}

/// What a stored credential stands for: its hash, or the project secret it names.
async fn expected(ctx: &Ctx, project: &str, stored: &str) -> Result<Expected> {
    let name = match Credential::of(stored) {
        Credential::Secret(name) => name,
        // Stored definitions hold hashes; a value that is not one matches nothing.
        _ => return Ok(Expected::Sealed(stored.to_string())),
    };
    let unavailable = |why: String| Err(Error::Unavailable(why));
    let Some(sealed) = ctx.store.sealed_secret(project, name).await? else {
        return unavailable(format!(
            "the trigger's credential is secret '{name}', which project '{project}' does not have: \
             set it with `shoal secret set {name} --project {project}`"
        ));
    };
    let Some(key) = &ctx.secret_key else {
        return unavailable(format!(
            "the trigger's credential is secret '{name}', and this api-server has no secret key \
             to read it: start it with SHOAL_SECRET_KEY"
        ));
    };
    match key.open(&format!("{project}/{name}"), &sealed) {
        Ok(value) => Ok(Expected::Plain(value)),
        Err(why) => unavailable(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn basic_credentials_are_decoded() {
        let basic = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            match presented(&h) {
                Presented::Basic { user, password } => Some((user, password)),
                _ => None,
            }
        };
        // echo -n 'ci:pa:ss wörd' | base64
        let pair = basic("Basic Y2k6cGE6c3Mgd8O2cmQ=").unwrap();
        assert_eq!(pair, ("ci".to_string(), "pa:ss wörd".to_string()));
        assert_eq!(basic("basic  dTpw ").unwrap(), ("u".into(), "p".into()));
        assert!(basic("Basic dTpw!").is_none());
        assert!(basic("Basic dXNlcg==").is_none(), "no ':'");
        assert!(basic("Bearer dTpw").is_none());
        assert_eq!(BASIC.decode("").unwrap(), b"");
        assert_eq!(BASIC.decode("TWFu").unwrap(), b"Man");
        assert_eq!(BASIC.decode("TWE=").unwrap(), b"Ma");
        assert_eq!(BASIC.decode("TWE").unwrap(), b"Ma", "padding optional");
        assert_eq!(BASIC.decode("TQ==").unwrap(), b"M");
        assert_eq!(BASIC.decode("TR==").unwrap(), b"M", "unused bits set");
        assert!(BASIC.decode("TWFu-_").is_err(), "not the URL alphabet");
        assert!(BASIC.decode("T").is_err(), "not a whole byte");
    }
}
