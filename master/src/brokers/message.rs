//! What one broker message does, decided before anything is written: dropped (its
//! trigger's `when` does not match), ignored with a reason (not JSON, a mapping that
//! fails), a run to start or an event to deliver, under the identity that makes a
//! redelivered message a duplicate.

use serde_json::Value;
use sha2::{Digest, Sha256};
use shoal_common::broker::BrokerKind;
use shoal_common::definition::WorkflowDef;
use shoal_common::start::Params;
use shoal_common::trigger::{Rule, TriggerDef, broker::message_key};
use std::collections::BTreeMap;

/// The bytes of a body an ignored record keeps.
const KEPT_BODY: usize = 1024;
/// The longest identity stored as it is; a longer one is stored as its hash.
const MAX_ID: usize = 200;

/// A message as a broker delivered it.
#[derive(Debug, Clone, Default)]
pub(super) struct Delivery {
    pub body: Vec<u8>,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The broker's id of it (an AMQP message id, a NATS message id or stream sequence);
    /// None when it has none.
    pub id: Option<String>,
}

/// A trigger's consumer's view of it: the trigger, its workflow's latest version, and
/// its `when`, compiled once.
pub(super) struct Trigger {
    pub kind: BrokerKind,
    pub project: String,
    pub workflow: String,
    pub version: i32,
    pub definition: WorkflowDef,
    pub def: TriggerDef,
    pub rule: Option<Rule>,
    /// `project/workflow/trigger`, as metrics and logs name it.
    pub label: String,
}

/// What a message does.
#[derive(Debug, PartialEq)]
pub(super) enum Decision {
    /// The trigger's `when` does not match: nothing is written.
    Filtered,
    /// Recorded under `id`, doing `action`.
    Take { id: String, action: Action },
}

#[derive(Debug, PartialEq)]
pub(super) enum Action {
    Start(Params),
    Deliver { key: String, data: Params },
    Ignore { reason: String, body: String },
}

impl Trigger {
    /// Decides what `d` does.
    pub(super) fn decide(&self, d: &Delivery) -> Decision {
        let id = broker_id(d);
        let ignore = |reason: String| Decision::Take {
            id: id.clone(),
            action: Action::Ignore {
                reason,
                body: kept_body(&d.body),
            },
        };
        let body: Value = match serde_json::from_slice(&d.body) {
            Ok(body) => body,
            Err(e) => return ignore(format!("the body is not JSON: {e}")),
        };
        if let Some(rule) = &self.rule {
            match rule.matches(&body, &d.headers) {
                Ok(true) => {}
                Ok(false) => return Decision::Filtered,
                Err(e) => {
                    let when = self.def.when.as_deref().unwrap_or_default();
                    return ignore(format!("when ({when}): {e}"));
                }
            }
        }
        let key = match message_key(&self.def, &body) {
            Ok(key) => key,
            Err(e) => return ignore(e),
        };
        let params = match self.def.map_params(&body) {
            Ok(params) => params,
            Err(e) => return ignore(e),
        };
        match (&self.def.event, key) {
            (Some(_), Some(key)) => Decision::Take {
                id,
                action: Action::Deliver { key, data: params },
            },
            // Checked when the workflow was applied: an event trigger has a key.
            (Some(_), None) => ignore("the trigger's event has no key".into()),
            (None, key) => {
                let undefined = self.definition.unresolvable_references(&params);
                if let Some((task, param)) = undefined.into_iter().next() {
                    return ignore(format!(
                        "task '{task}' refers to ${{{param}}}, which neither the workflow nor \
                         the trigger's params define"
                    ));
                }
                Decision::Take {
                    id: key.map_or(id, |key| identity(format!("key:{key}"))),
                    action: Action::Start(params),
                }
            }
        }
    }
}

/// A message's identity without a key: the broker's id, else its body's hash (a message
/// carries the same body when redelivered).
fn broker_id(d: &Delivery) -> String {
    match &d.id {
        Some(id) => identity(format!("id:{id}")),
        None => format!("body:{}", hex::encode(Sha256::digest(&d.body))),
    }
}

/// `id` as stored: as it is, or hashed when long.
fn identity(id: String) -> String {
    match id.len() <= MAX_ID {
        true => id,
        false => format!("sha256:{}", hex::encode(Sha256::digest(id.as_bytes()))),
    }
}

/// The start of a body, as text, for an ignored record.
fn kept_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(KEPT_BODY)]);
    text.trim_end_matches('\u{FFFD}').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trigger(extra: &str) -> Trigger {
        let text = format!(
            "name: w\nparams: {{region: eu}}\ntriggers:\n- {{name: t, type: amqp, url: 'amqp://h', queue: q{extra}}}\n\
             tasks:\n- {{name: a, type: shell, command: 'echo ${{order}} ${{region}}'}}\n"
        );
        let definition = WorkflowDef::parse(&text).unwrap();
        let def = definition.triggers[0].clone();
        Trigger {
            kind: BrokerKind::Amqp,
            project: "p".into(),
            workflow: "w".into(),
            version: 1,
            rule: def.rule().unwrap(),
            definition,
            def,
            label: "p/w/t".into(),
        }
    }

    fn message(body: serde_json::Value, id: Option<&str>) -> Delivery {
        Delivery {
            body: body.to_string().into_bytes(),
            headers: BTreeMap::from([("kind".to_string(), "order".to_string())]),
            id: id.map(str::to_string),
        }
    }

    #[test]
    fn a_message_starts_a_run_under_its_key_or_its_broker_id_or_its_body() {
        let t = trigger(", params: {order: $.id}, key: $.id");
        let d = message(json!({"id": 42}), Some("m-1"));
        let Decision::Take { id, action } = t.decide(&d) else {
            panic!("not taken")
        };
        assert_eq!(id, "key:42");
        assert_eq!(
            action,
            Action::Start(Params::from([("order".into(), "42".into())]))
        );

        let t = trigger(", params: {order: $.id}");
        let Decision::Take { id, .. } = t.decide(&d) else {
            panic!("not taken")
        };
        assert_eq!(id, "id:m-1");
        let Decision::Take { id: hashed, .. } = t.decide(&message(json!({"id": 42}), None)) else {
            panic!("not taken")
        };
        assert!(hashed.starts_with("body:"), "{hashed}");
        let long = "x".repeat(300);
        let Decision::Take { id, .. } = t.decide(&message(json!({"id": 1}), Some(&long))) else {
            panic!("not taken")
        };
        assert!(id.starts_with("sha256:"), "{id}");
    }

    #[test]
    fn when_filters_and_what_cannot_be_used_is_ignored_with_the_reason() {
        let t = trigger(
            ", when: \"body.total > 10 && headers.kind == 'order'\", params: {order: $.id}",
        );
        assert_eq!(
            t.decide(&message(json!({"total": 5, "id": 1}), None)),
            Decision::Filtered
        );
        let reason = |d: Delivery| match t.decide(&d) {
            Decision::Take {
                action: Action::Ignore { reason, body },
                ..
            } => (reason, body),
            other => panic!("{other:?}"),
        };
        let (why, body) = reason(Delivery {
            body: b"{not json".to_vec(),
            ..Default::default()
        });
        assert!(why.starts_with("the body is not JSON"), "{why}");
        assert_eq!(body, "{not json");
        let (why, _) = reason(message(json!({"total": 50}), None));
        assert!(why.contains("no value at $.id"), "{why}");
        let (why, _) = reason(message(json!({"id": 1}), None));
        assert!(why.starts_with("when (body.total > 10"), "{why}");
        // A run whose task reads a parameter nothing defines is not started.
        let Decision::Take {
            action: Action::Ignore { reason: why, .. },
            ..
        } = trigger("").decide(&message(json!({"id": 1}), None))
        else {
            panic!("not ignored")
        };
        assert!(why.contains("${order}"), "{why}");
    }

    #[test]
    fn an_event_trigger_delivers_its_key_and_params_as_data() {
        let t = trigger(", event: paid, key: $.order, params: {amount: $.amount}");
        let d = message(json!({"order": "A-1", "amount": 3.5}), Some("m-9"));
        assert_eq!(
            t.decide(&d),
            Decision::Take {
                id: "id:m-9".into(),
                action: Action::Deliver {
                    key: "A-1".into(),
                    data: Params::from([("amount".into(), "3.5".into())]),
                },
            }
        );
    }
}
