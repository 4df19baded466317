//! Triggers of a workflow. Webhooks: who may call them (a token or a basic password, or
//! `none` behind an address allowlist or public at a [`rate`]), which calls start a run
//! ([`rule`]), how a call's JSON payload becomes start parameters, and what a synchronous
//! call answers with. Broker triggers ([`broker`]: AMQP, NATS JetStream, MQTT) consume a
//! queue, subject or topic, each message starting a run or delivering an event.
//!
//! Credentials are never stored as given: [`seal`] replaces a literal token or password by
//! a salted slow hash when the definition is applied, and [`mask`] hides it when the
//! definition is read (`***` applies back as "keep it"). `${secret.NAME}` names a project
//! secret instead, read when the trigger is called.

pub mod auth;
pub mod broker;
pub mod cidr;
pub mod credential;
pub mod form;
pub mod rate;
pub mod rule;

use crate::broker::BrokerKind;
use crate::definition::error::DefinitionError;
use crate::definition::name::{valid_identifier, valid_name};
use crate::jsonpath::{JsonPath, render};
use crate::start::{Params, check_param_name};
pub use auth::{BasicAuth, Credentials, TriggerAuth};
pub use credential::Credential;
pub use form::{FieldType, FormAccess, FormField};
pub use rate::Rate;
pub use rule::Rule;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a `sync` call waits for its run when the trigger names no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest `timeout` a trigger may have: a caller's HTTP request stays open that long.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Literal credentials shorter than this are refused: one that can be guessed needs no
/// hash to be found.
const MIN_LITERAL_LEN: usize = 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerDef {
    pub name: String,
    /// `webhook` (the default), `form`, or a broker: `amqp`, `nats`, `mqtt`.
    #[serde(rename = "type", default = "webhook")]
    pub trigger_type: String,
    /// `async` answers 202 with the run at once; `sync` waits for the run to end.
    #[serde(default)]
    pub mode: TriggerMode,
    /// `{token}`, `{basic}`, or `none` (only with `allow_ips`, or `public` and `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<TriggerAuth>,
    /// The HTTP methods a call may use; default `[POST]`. A GET's query parameters are
    /// its payload (a JSON object of strings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<HookMethod>,
    /// `auth: none` for anyone on the network: then `rate` is required.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public: bool,
    /// How many calls it takes (`10/s`, `600/m`, `100/h`); 429 beyond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "10/s")]
    pub rate: Option<Rate>,
    /// Client addresses (CIDR, e.g. `10.0.0.0/8`) allowed to call; empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_ips: Vec<String>,
    /// A CEL condition over the payload (`body`) and the headers (`headers`, lower-case
    /// names): a call that does not match starts nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Start parameter -> JSONPath into the payload (`$.data.id`), or a CEL expression
    /// over it as `body` (`size(body.items)`).
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
    /// Broker triggers: the broker (`amqp://host:5672/vhost`, `nats://host:4222`,
    /// `mqtt://host:1883`; over TLS `amqps://`, `tls://`, `mqtts://`), or `${secret.NAME}`
    /// naming a project secret that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `amqp`: the queue consumed (it must exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// `nats`: the subject consumed through a durable JetStream consumer (a stream must
    /// capture it); `*` and `>` wildcards allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `mqtt`: the topic subscribed to at QoS 1; `+` and `#` wildcards allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Broker triggers: JSONPath of the message's business key (`$.id`). A run-starting
    /// trigger starts one run per key (a message repeating it is a duplicate); an `event`
    /// trigger completes the waits of that key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Broker triggers: deliver each message as this event (completing the wait tasks
    /// waiting for it with the message's `key`, `params` becoming their outputs) instead
    /// of starting a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// `form`: its fields, each a run parameter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FormField>,
    /// `form`: who may submit it (default `members`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<FormAccess>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerMode {
    #[default]
    Async,
    Sync,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HookMethod {
    Get,
    Post,
    Put,
}

impl HookMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HookMethod::Get => "GET",
            HookMethod::Post => "POST",
            HookMethod::Put => "PUT",
        }
    }
}

fn webhook() -> String {
    "webhook".to_string()
}

impl TriggerDef {
    /// The broker a broker trigger consumes from; None for a webhook.
    pub fn broker(&self) -> Option<BrokerKind> {
        BrokerKind::of_trigger(&self.trigger_type)
    }

    /// Whether it is called at `/api/v1/hooks/...` (not a broker trigger, not a form).
    pub fn is_webhook(&self) -> bool {
        self.trigger_type == "webhook"
    }

    /// Who may submit a form.
    pub fn access(&self) -> FormAccess {
        self.access.unwrap_or_default()
    }

    /// How long a `sync` call waits.
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    /// `token`, `basic` or `none`.
    pub fn auth_kind(&self) -> &'static str {
        self.auth.as_ref().map_or("none", TriggerAuth::kind)
    }

    /// The HTTP methods a call may use.
    pub fn methods(&self) -> &[HookMethod] {
        if self.methods.is_empty() {
            &[HookMethod::Post]
        } else {
            &self.methods
        }
    }

    /// The trigger's `when`, compiled; None when it has none (everything matches).
    pub fn rule(&self) -> Result<Option<Rule>, String> {
        let compile = |text: &String| Rule::compile(text).map_err(|e| format!("when: {e}"));
        self.when.as_ref().map(compile).transpose()
    }

    /// Whether a message (`body`, `headers` with lower-case names) passes the trigger's
    /// `when`; the error names the trigger and why the condition cannot be decided.
    pub fn matches(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
    ) -> Result<bool, String> {
        let named = |e: String| format!("trigger '{}': {e}", self.name);
        let Some(rule) = self.rule().map_err(named)? else {
            return Ok(true);
        };
        let when = self.when.as_deref().unwrap_or_default();
        rule.matches(body, headers)
            .map_err(|e| named(format!("when ({when}): {e}")))
    }

    /// The start parameters a call's `payload` maps to: each value its JSONPath names
    /// (or its expression gives), a string as itself and anything else as compact JSON.
    /// The error names the parameter and the path the payload lacks.
    pub fn map_params(&self, payload: &Value) -> Result<Params, String> {
        self.params
            .iter()
            .map(|(param, path)| {
                if !path.starts_with('$') {
                    return self.map_expression(param, path, payload);
                }
                let parsed = JsonPath::parse(path)
                    .map_err(|e| format!("param '{param}': '{path}' is not a JSONPath: {e}"))?;
                match parsed.find(payload) {
                    None => Err(format!(
                        "the payload has no value at {path}, which trigger '{}' maps to param '{param}'",
                        self.name
                    )),
                    Some(Value::Null) => Err(format!(
                        "the payload's value at {path} (param '{param}' of trigger '{}') is null",
                        self.name
                    )),
                    Some(value) => Ok((param.clone(), render(value))),
                }
            })
            .collect()
    }

    fn map_expression(
        &self,
        param: &str,
        text: &str,
        payload: &Value,
    ) -> Result<(String, String), String> {
        let body = crate::expr::Vars::default().with("body", payload);
        let value = crate::expr::eval(text, &body)
            .map_err(|e| format!("param '{param}' of trigger '{}' ({text}): {e}", self.name))?;
        match value {
            Value::Null => Err(format!(
                "param '{param}' of trigger '{}' ({text}) is null for this payload",
                self.name
            )),
            value => Ok((param.to_string(), render(&value))),
        }
    }
}

/// Checks every trigger of a definition.
pub fn validate(triggers: &[TriggerDef]) -> Result<(), DefinitionError> {
    for (i, t) in triggers.iter().enumerate() {
        if !valid_name(&t.name) {
            return Err(DefinitionError::BadName {
                what: "trigger name",
                value: t.name.clone(),
            });
        }
        let bad = |reason: String| DefinitionError::BadTrigger {
            trigger: t.name.clone(),
            reason,
        };
        if triggers[..i].iter().any(|o| o.name == t.name) {
            return Err(bad("the name is used more than once".into()));
        }
        check(t).map_err(bad)?;
    }
    Ok(())
}

/// What is wrong with one trigger, if anything.
fn check(t: &TriggerDef) -> Result<(), String> {
    let form = t.trigger_type == "form";
    if !form && (!t.fields.is_empty() || t.access.is_some()) {
        return Err("fields and access are for type: form".into());
    }
    match (t.trigger_type.as_str(), t.broker()) {
        (_, Some(kind)) => broker::check(t, kind)?,
        ("webhook", None) => {
            broker::refuse_broker_fields(t)?;
            check_webhook(t)?;
        }
        ("form", None) => form::check(t)?,
        (other, None) => {
            return Err(format!(
                "unknown type '{other}' (known: webhook, form, amqp, nats, mqtt)"
            ));
        }
    }
    for (i, entry) in t.allow_ips.iter().enumerate() {
        entry
            .parse::<cidr::Cidr>()
            .map_err(|e| format!("allow_ips[{i}]: {e}"))?;
    }
    Ok(())
}

/// A webhook: who may call it, and how a call becomes a run.
fn check_webhook(t: &TriggerDef) -> Result<(), String> {
    check_auth(t)?;
    for (i, m) in t.methods.iter().enumerate() {
        if t.methods[..i].contains(m) {
            return Err(format!("methods: {} is listed twice", m.as_str()));
        }
    }
    t.rule()?;
    check_params(&t.params)?;
    for output in &t.outputs {
        check_param_name(output).map_err(|e| format!("outputs: {e}"))?;
    }
    if t.mode == TriggerMode::Async && (t.timeout.is_some() || !t.outputs.is_empty()) {
        return Err(
            "timeout and outputs are for mode: sync (an async call answers at once)".into(),
        );
    }
    match t.timeout {
        Some(d) if d.is_zero() || d > MAX_TIMEOUT => Err(format!(
            "timeout must be more than 0 and at most {}",
            crate::duration::format(MAX_TIMEOUT)
        )),
        _ => Ok(()),
    }
}

/// Each mapping: a parameter name to a JSONPath or an expression over `body`.
pub(crate) fn check_params(params: &BTreeMap<String, String>) -> Result<(), String> {
    for (param, path) in params {
        check_param_name(param).map_err(|e| format!("params: {e}"))?;
        if path.starts_with('$') {
            JsonPath::parse(path).map_err(|e| {
            format!("params.{param}: '{path}' is not a supported JSONPath ($, .key, ['key'], [index]): {e}")
        })?;
        } else {
            crate::expr::parse(path)
                .map_err(|e| format!("params.{param}: '{path}' is not an expression: {e}"))?;
            // What a forgotten `$` looks like: a path into the payload by another name.
            let head = path
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            let rest = path[head.len()..].trim_start();
            let names_a_path = rest.is_empty() || rest.starts_with(['.', '[']);
            let literal = matches!(head, "" | "true" | "false" | "null")
                || head.starts_with(|c: char| c.is_ascii_digit());
            let other = (!literal && head != "body" && names_a_path).then_some(head);
            if let Some(other) = other {
                return Err(format!(
                    "params.{param}: '{path}' reads '{other}', but a mapping sees only the payload: as `body` in an expression (body.{other}) or as a JSONPath ($.{other})"
                ));
            }
        }
    }
    Ok(())
}

/// Who may call: a credential, or `none` behind an allowlist or public at a rate.
fn check_auth(t: &TriggerDef) -> Result<(), String> {
    let open = match &t.auth {
        None => {
            return Err(
                "auth is missing: give {token: T}, {basic: {user, password}}, or none (with allow_ips, or public: true and a rate)"
                    .into(),
            );
        }
        Some(TriggerAuth::Open(_)) => true,
        Some(TriggerAuth::Credential(c)) => {
            check_credentials(c)?;
            false
        }
    };
    if open && !t.public && t.allow_ips.is_empty() {
        return Err(
            "auth: none lets whoever reaches the server start runs: limit it to allow_ips, or say public: true with a rate (e.g. rate: 10/s)"
                .into(),
        );
    }
    match (t.public, open, t.rate) {
        (true, false, _) => Err("public: true is for auth: none".into()),
        (true, true, None) => Err(
            "public: true needs a rate (e.g. rate: 10/s): anyone may call it, this often at most"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// Exactly one of a token and a basic user and password, each well formed.
fn check_credentials(c: &Credentials) -> Result<(), String> {
    match (&c.token, &c.basic) {
        (Some(token), None) => check_credential("auth.token", token),
        (None, Some(basic)) => {
            if basic.user.is_empty() || basic.user.contains(':') {
                return Err(
                    "auth.basic.user must be non-empty and without ':' (HTTP Basic splits at the first ':')"
                        .into(),
                );
            }
            check_credential("auth.basic.password", &basic.password)
        }
        _ => Err("auth needs exactly one of {token: T} or {basic: {user, password}}".into()),
    }
}

/// A credential as given: `${secret.NAME}`, `***` (keep the stored one), a stored hash,
/// or a literal long enough not to be guessed.
fn check_credential(field: &str, value: &str) -> Result<(), String> {
    match Credential::of(value) {
        Credential::Secret(name) if !valid_identifier(name) => Err(format!(
            "{field}: '{name}' is not a secret name; write ${{secret.NAME}}"
        )),
        Credential::Sealed(hash) if !credential::is_well_formed(hash) => Err(format!(
            "{field} looks like a stored hash but is not one; give the token itself, it is hashed when applied"
        )),
        Credential::Literal(text) if text.chars().count() < MIN_LITERAL_LEN => Err(format!(
            "{field} must be at least {MIN_LITERAL_LEN} characters (e.g. `openssl rand -hex 16`), or name a project secret as ${{secret.NAME}}"
        )),
        _ => Ok(()),
    }
}

/// The credential fields of a trigger, named as the definition names them.
fn credentials(t: &mut TriggerDef) -> impl Iterator<Item = (&'static str, &mut String)> {
    let c = t.auth.as_mut().and_then(TriggerAuth::credentials_mut);
    let (token, basic) = c.map_or((None, None), |c| (c.token.as_mut(), c.basic.as_mut()));
    let token = token.map(|v| ("auth.token", v));
    let password = basic.map(|b| ("auth.basic.password", &mut b.password));
    token.into_iter().chain(password)
}

/// Stores every credential of `triggers` as [`credential::seal`] says, given the triggers
/// of the version stored so far (`stored`, matched by trigger name and field). The error
/// names the trigger and the field.
pub fn seal(triggers: &mut [TriggerDef], stored: &[TriggerDef]) -> Result<(), DefinitionError> {
    for t in triggers {
        let before = stored.iter().find(|s| s.name == t.name);
        let name = t.name.clone();
        for (field, value) in credentials(t) {
            let stored = before.and_then(|b| b.auth.as_ref()?.credentials());
            let kept = stored.and_then(|c| match field {
                "auth.token" => c.token.as_deref(),
                _ => c.basic.as_ref().map(|b| b.password.as_str()),
            });
            *value = credential::seal(field, value, kept).map_err(|reason| {
                DefinitionError::BadTrigger {
                    trigger: name.clone(),
                    reason,
                }
            })?;
        }
    }
    Ok(())
}

/// Hides every stored hash as `***`, which applies back as "keep it"; secret references
/// stay (they name a secret, they are not one).
pub fn mask(triggers: &mut [TriggerDef]) {
    for t in triggers {
        for (_, value) in credentials(t) {
            if matches!(Credential::of(value), Credential::Sealed(_)) {
                *value = credential::MASKED.to_string();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::WorkflowDef;
    use serde_json::json;

    const TOKEN: &str = "0123456789abcdef-token";

    fn trigger(yaml: &str) -> Result<Vec<TriggerDef>, String> {
        let text = format!("name: w\ntriggers:\n{yaml}\ntasks:\n- {{name: a, type: noop}}\n");
        WorkflowDef::parse(&text)
            .map(|d| d.triggers)
            .map_err(|e| e.to_string())
    }

    fn refused(yaml: &str) -> String {
        trigger(yaml).expect_err(yaml)
    }

    #[test]
    fn a_full_trigger_parses() {
        let t = trigger(&format!(
            "- {{name: deploy, mode: sync, auth: {{token: {TOKEN}}}, allow_ips: [10.0.0.0/8, '::1'], \
             params: {{env: $.env, id: \"$.items[0]['id']\"}}, timeout: 2m, outputs: [url]}}"
        ))
        .unwrap();
        assert_eq!(t[0].mode, TriggerMode::Sync);
        assert_eq!(t[0].timeout(), Duration::from_secs(120));
        assert_eq!(t[0].auth_kind(), "token");
        let basic =
            trigger("- {name: b, auth: {basic: {user: ci, password: '${secret.hook_pw}'}}}")
                .unwrap();
        assert_eq!(basic[0].mode, TriggerMode::Async);
        assert_eq!(basic[0].timeout(), DEFAULT_TIMEOUT);
        assert_eq!(basic[0].auth_kind(), "basic");
    }

    #[test]
    fn open_triggers_take_an_allowlist_or_are_public_at_a_rate() {
        let t = trigger(
            "- {name: lan, auth: none, allow_ips: [10.0.0.0/8], methods: [GET, PUT]}\n\
             - {name: web, auth: none, public: true, rate: 10/s}",
        )
        .unwrap();
        assert_eq!(t[0].auth_kind(), "none");
        assert_eq!(t[0].methods(), [HookMethod::Get, HookMethod::Put]);
        assert_eq!(t[1].methods(), [HookMethod::Post]);
        assert_eq!(t[1].rate, Some("10/s".parse().unwrap()));
        // Stored as JSON and read back the same.
        let stored = serde_json::to_string(&t).unwrap();
        assert!(stored.contains(r#""auth":"none""#), "{stored}");
        assert_eq!(serde_json::from_str::<Vec<TriggerDef>>(&stored).unwrap(), t);
    }

    #[test]
    fn mistakes_are_refused_naming_the_field_and_the_fix() {
        let token = format!("auth: {{token: {TOKEN}}}");
        for (yaml, says) in [
            (
                format!("- {{name: t, {token}, allow_ips: [10.0.0.0/33]}}"),
                "trigger 't': allow_ips[0]: '10.0.0.0/33'",
            ),
            (
                format!("- {{name: t, {token}, allow_ips: ['::1', nope]}}"),
                "allow_ips[1]: 'nope' is not an IP address",
            ),
            (
                format!("- {{name: t, {token}, params: {{id: data.id}}}}"),
                "params.id: 'data.id' reads 'data', but a mapping sees only the payload: as `body` in an expression (body.data) or as a JSONPath ($.data)",
            ),
            (
                format!("- {{name: t, {token}, params: {{id: '$..id'}}}}"),
                "at position 2",
            ),
            (
                format!("- {{name: t, {token}, when: 'body.action =='}}"),
                "trigger 't': when: column",
            ),
            (
                format!("- {{name: t, {token}, params: {{'a b': $.x}}}}"),
                "params: invalid parameter name 'a b'",
            ),
            (
                format!("- {{name: t, mode: sync, {token}, outputs: ['x y']}}"),
                "outputs: invalid parameter name 'x y'",
            ),
            (
                format!("- {{name: t, mode: sync, {token}, timeout: 11m}}"),
                "timeout must be more than 0 and at most 10m",
            ),
            (
                format!("- {{name: t, mode: sync, {token}, timeout: 0s}}"),
                "timeout must be more than 0",
            ),
            (
                format!("- {{name: t, {token}, timeout: 5s}}"),
                "timeout and outputs are for mode: sync",
            ),
            (
                format!("- {{name: t, {token}, outputs: [x]}}"),
                "timeout and outputs are for mode: sync",
            ),
            (
                "- {name: t, auth: {token: short}}".into(),
                "auth.token must be at least 16 characters",
            ),
            (
                "- {name: t, auth: {token: 'sha256:abc'}}".into(),
                "looks like a stored hash but is not one",
            ),
            (
                "- {name: t, auth: {token: '${secret.a b}'}}".into(),
                "'a b' is not a secret name",
            ),
            (
                "- {name: t, auth: {basic: {user: 'a:b', password: '${secret.pw}'}}}".into(),
                "without ':'",
            ),
            (
                "- {name: t, auth: {basic: {user: u, password: short}}}".into(),
                "auth.basic.password must be at least 16",
            ),
            ("- {name: t, auth: {}}".into(), "exactly one of"),
            ("- {name: t}".into(), "auth is missing"),
            (
                "- {name: t, auth: {tokn: x}}".into(),
                "unknown field `tokn`, expected `token` or `basic`",
            ),
            ("- {name: t, auth: nobody}".into(), "or none"),
            (
                "- {name: t, auth: none}".into(),
                "auth: none lets whoever reaches the server start runs",
            ),
            (
                "- {name: t, auth: none, public: true}".into(),
                "public: true needs a rate",
            ),
            (
                format!("- {{name: t, {token}, public: true, rate: 1/s}}"),
                "public: true is for auth: none",
            ),
            (
                "- {name: t, auth: none, public: true, rate: 10/d}".into(),
                "'10/d' is not a rate",
            ),
            (
                format!("- {{name: t, {token}, methods: [GET, PUT, GET]}}"),
                "methods: GET is listed twice",
            ),
            (
                format!("- {{name: t, {token}, methods: [DELETE]}}"),
                "DELETE",
            ),
            (
                format!("- {{name: t, type: cron, {token}}}"),
                "unknown type 'cron'",
            ),
            (
                format!("- {{name: t, {token}}}\n- {{name: t, {token}}}"),
                "used more than once",
            ),
            (format!("- {{name: '-t', {token}}}"), "trigger name"),
        ] {
            let e = refused(&yaml);
            assert!(e.contains(says), "{yaml}\n  says: {e}\n  want: {says}");
        }
    }

    #[test]
    fn sealing_hashes_literals_masking_hides_them_and_masked_applies_back() {
        let mut triggers = trigger(&format!(
            "- {{name: a, auth: {{token: {TOKEN}}}}}\n\
             - {{name: b, auth: {{basic: {{user: ci, password: correct-horse-battery}}}}}}\n\
             - {{name: c, auth: {{token: '${{secret.hook}}'}}}}"
        ))
        .unwrap();
        seal(&mut triggers, &[]).unwrap();
        let creds = |t: &TriggerDef| t.auth.as_ref().unwrap().credentials().unwrap().clone();
        let token = creds(&triggers[0]).token.unwrap();
        assert!(credential::verify(TOKEN, &token), "{token}");
        let basic = creds(&triggers[1]).basic.unwrap();
        assert!(credential::verify("correct-horse-battery", &basic.password));
        assert_eq!(basic.user, "ci");
        assert_eq!(creds(&triggers[2]).token.as_deref(), Some("${secret.hook}"));
        validate(&triggers).unwrap();
        let stored = triggers.clone();

        // Read: no hash shown; applied back as read, or with the literal again: unchanged.
        let mut read = stored.clone();
        mask(&mut read);
        assert_eq!(creds(&read[0]).token.as_deref(), Some("***"));
        assert_eq!(creds(&read[1]).basic.unwrap().password, "***");
        assert_eq!(creds(&read[2]).token.as_deref(), Some("${secret.hook}"));
        validate(&read).unwrap();
        seal(&mut read, &stored).unwrap();
        assert_eq!(read, stored);
        let mut again = trigger(&format!("- {{name: a, auth: {{token: {TOKEN}}}}}")).unwrap();
        seal(&mut again, &stored).unwrap();
        assert_eq!(again[0], stored[0]);

        // `***` for a trigger the stored version does not have is refused by name.
        let mut renamed = trigger("- {name: z, auth: {token: '***'}}").unwrap();
        let e = seal(&mut renamed, &stored).unwrap_err().to_string();
        assert!(
            e.contains("trigger 'z'") && e.contains("auth.token is '***'"),
            "{e}"
        );
    }

    #[test]
    fn when_decides_which_calls_start_a_run() {
        let t = &trigger(&format!(
            "- {{name: t, auth: {{token: {TOKEN}}}, when: \"body.ref == 'main'\"}}"
        ))
        .unwrap()[0];
        let none = BTreeMap::new();
        assert_eq!(t.matches(&json!({"ref": "main"}), &none), Ok(true));
        assert_eq!(t.matches(&json!({"ref": "dev"}), &none), Ok(false));
        let e = t.matches(&json!({}), &none).unwrap_err();
        assert!(
            e.starts_with("trigger 't': when (body.ref == 'main'): "),
            "{e}"
        );
        let open = &trigger(&format!("- {{name: t, auth: {{token: {TOKEN}}}}}")).unwrap()[0];
        assert_eq!(open.matches(&json!(null), &none), Ok(true));
    }

    #[test]
    fn a_payload_maps_to_params_or_the_error_names_the_path_and_the_param() {
        let t = &trigger(&format!(
            "- {{name: t, auth: {{token: {TOKEN}}}, params: {{env: $.env, n: $.n, ok: $.ok, \
             first: '$.items[0].id', all: $.items, whole: $}}}}"
        ))
        .unwrap()[0];
        let payload = json!({"env": "prod", "n": 3, "ok": true, "items": [{"id": "a"}]});
        let p = t.map_params(&payload).unwrap();
        assert_eq!(p["env"], "prod");
        assert_eq!(p["n"], "3");
        assert_eq!(p["ok"], "true");
        assert_eq!(p["first"], "a");
        assert_eq!(p["all"], r#"[{"id":"a"}]"#);
        assert!(p["whole"].starts_with('{'));

        let e = t.map_params(&json!({"n": 1, "items": []})).unwrap_err();
        assert!(
            e.contains("no value at $.env") && e.contains("param 'env'"),
            "{e}"
        );
        let e = t
            .map_params(&json!({"env": null, "n": 1, "ok": 1, "items": []}))
            .unwrap_err();
        assert!(e.contains("$.env") && e.contains("is null"), "{e}");
        let e = t
            .map_params(&json!({"env": "x", "n": 1, "ok": 1, "items": []}))
            .unwrap_err();
        assert!(
            e.contains("$.items[0].id") && e.contains("param 'first'"),
            "{e}"
        );
        let computed = &trigger(&format!(
            "- {{name: t, auth: {{token: {TOKEN}}}, params: {{count: 'size(body.items)', \
             env: \"body.env + '-' + string(body.n * 2)\", ids: 'body.items.map(i, i.id)'}}}}"
        ))
        .unwrap()[0];
        let p = computed.map_params(&payload).unwrap();
        assert_eq!(
            (p["count"].as_str(), p["env"].as_str(), p["ids"].as_str()),
            ("1", "prod-6", r#"["a"]"#)
        );
        let e = computed.map_params(&json!({"items": []})).unwrap_err();
        assert!(e.contains("param 'env'") && e.contains("body.env"), "{e}");
        let none = &trigger(&format!("- {{name: t, auth: {{token: {TOKEN}}}}}")).unwrap()[0];
        assert!(none.map_params(&json!("anything")).unwrap().is_empty());
    }
}
