//! Broker triggers: a consumer of an AMQP queue, a NATS subject (a durable JetStream
//! consumer) or an MQTT topic (QoS 1), whose every message, a JSON body, starts a run of
//! the workflow or, with `event`, completes the waits of its key. Their fields are checked
//! here; the consumers run on the master.

use super::{TriggerDef, TriggerMode, check_params};
use crate::broker::{self, BrokerKind};
use crate::definition::MAX_EVENT_KEY;
use crate::definition::name::valid_identifier;
use crate::jsonpath::{JsonPath, render};
use serde_json::Value;

/// What a broker trigger may not have: how webhooks are called and answer.
fn webhook_fields(t: &TriggerDef) -> impl Iterator<Item = &'static str> {
    [
        ("auth", t.auth.is_some()),
        ("methods", !t.methods.is_empty()),
        ("public", t.public),
        ("rate", t.rate.is_some()),
        ("allow_ips", !t.allow_ips.is_empty()),
        ("mode", t.mode != TriggerMode::Async),
        ("timeout", t.timeout.is_some()),
        ("outputs", !t.outputs.is_empty()),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
}

/// What a webhook may not have: where a broker trigger consumes from.
fn broker_fields(t: &TriggerDef) -> impl Iterator<Item = &'static str> {
    [
        ("url", t.url.is_some()),
        ("queue", t.queue.is_some()),
        ("subject", t.subject.is_some()),
        ("topic", t.topic.is_some()),
        ("key", t.key.is_some()),
        ("event", t.event.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
}

/// Refuses the fields of broker triggers on a webhook.
pub(super) fn refuse_broker_fields(t: &TriggerDef) -> Result<(), String> {
    match broker_fields(t).next() {
        Some(field) => Err(format!(
            "{field} is for broker triggers (type: amqp, nats or mqtt); a webhook is called at \
             /api/v1/hooks/..."
        )),
        None => Ok(()),
    }
}

/// What is wrong with a broker trigger, if anything.
pub(super) fn check(t: &TriggerDef, kind: BrokerKind) -> Result<(), String> {
    if let Some(field) = webhook_fields(t).next() {
        return Err(format!(
            "{field} is for webhooks; a {} trigger consumes messages (its credentials go in \
             its url)",
            kind.as_str()
        ));
    }
    let url = t.url.as_deref().ok_or_else(|| {
        format!(
            "url is missing: where the broker is, e.g. url: \"${{secret.BROKER_URL}}\" or {}://host",
            kind.as_str()
        )
    })?;
    broker::check_url(kind, url).map_err(|e| format!("url: {e}"))?;
    // Only secrets: a trigger runs no task whose parameters a reference could read.
    let references = url.split("${").skip(1);
    if let Some(other) = references
        .map(|r| r.split('}').next().unwrap_or(r))
        .find(|r| {
            r.strip_prefix("secret.")
                .is_none_or(|name| !valid_identifier(name))
        })
    {
        return Err(format!(
            "url: '${{{other}}}' is not a project secret; a trigger's url may name secrets only (${{secret.NAME}})"
        ));
    }
    let wanted = kind.target_field();
    for (field, value) in [
        ("queue", &t.queue),
        ("subject", &t.subject),
        ("topic", &t.topic),
    ] {
        if field != wanted && value.is_some() {
            return Err(format!(
                "{field} is not for {} triggers, which take {wanted}",
                kind.as_str()
            ));
        }
    }
    let target = target(t).ok_or_else(|| {
        format!(
            "{wanted} is missing: what a {} trigger consumes",
            kind.as_str()
        )
    })?;
    match kind {
        BrokerKind::Amqp if target.is_empty() => Err("queue must not be empty".to_string()),
        BrokerKind::Amqp => broker::check_amqp_name("queue", target),
        BrokerKind::Nats => broker::check_subject(target, true),
        BrokerKind::Mqtt => broker::check_topic(target, true),
    }?;
    t.rule()?;
    check_params(&t.params)?;
    if let Some(key) = &t.key {
        parse_key(key)?;
    }
    match (&t.event, &t.key) {
        (Some(event), _) if !valid_identifier(event) => Err(format!(
            "event '{event}' is not a valid event name (ASCII letters, digits, _ - .)"
        )),
        (Some(event), None) => Err(format!(
            "event '{event}' needs key: the JSONPath of the business key of the waits a \
             message completes (e.g. key: $.order_id)"
        )),
        _ => Ok(()),
    }
}

/// The queue, subject or topic a broker trigger consumes.
pub fn target(t: &TriggerDef) -> Option<&str> {
    let target = match t.broker()? {
        BrokerKind::Amqp => &t.queue,
        BrokerKind::Nats => &t.subject,
        BrokerKind::Mqtt => &t.topic,
    };
    target.as_deref()
}

fn parse_key(key: &str) -> Result<JsonPath, String> {
    if !key.starts_with('$') {
        return Err(format!(
            "key '{key}' must be a JSONPath into the message (e.g. $.id)"
        ));
    }
    JsonPath::parse(key).map_err(|e| format!("key '{key}' is not a supported JSONPath: {e}"))
}

/// The business key of a message: the value at the trigger's `key` (None when it has
/// none). The error names the path the message lacks.
pub fn message_key(t: &TriggerDef, body: &Value) -> Result<Option<String>, String> {
    let Some(key) = &t.key else {
        return Ok(None);
    };
    let path = parse_key(key)?;
    let value = match path.find(body) {
        None | Some(Value::Null) => {
            return Err(format!(
                "the message has no value at {key} (the trigger's key)"
            ));
        }
        Some(value) => render(value),
    };
    if value.is_empty() || value.len() > MAX_EVENT_KEY {
        return Err(format!(
            "the message's key at {key} must be 1 to {MAX_EVENT_KEY} bytes long, not {}",
            value.len()
        ));
    }
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use crate::definition::WorkflowDef;
    use serde_json::json;

    fn triggers(yaml: &str) -> Result<Vec<super::TriggerDef>, String> {
        let text = format!("name: w\ntriggers:\n{yaml}\ntasks:\n- {{name: a, type: noop}}\n");
        WorkflowDef::parse(&text)
            .map(|d| d.triggers)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn broker_triggers_name_their_broker_and_what_they_consume() {
        let t = triggers(
            "- {name: a, type: amqp, url: 'amqp://rabbit/', queue: orders, when: \"body.total > 10\", params: {id: $.id}, key: $.id}\n\
             - {name: n, type: nats, url: '${secret.NATS}', subject: 'orders.>'}\n\
             - {name: m, type: mqtt, url: 'mqtt://broker:1883', topic: 'paid/+', event: order_paid, key: $.order, params: {amount: $.amount}}",
        )
        .unwrap();
        assert_eq!(super::target(&t[0]), Some("orders"));
        assert_eq!(super::target(&t[1]), Some("orders.>"));
        assert_eq!(super::target(&t[2]), Some("paid/+"));
        let key = super::message_key(&t[0], &json!({"id": 7})).unwrap();
        assert_eq!(key.as_deref(), Some("7"));
        let e = super::message_key(&t[0], &json!({})).unwrap_err();
        assert!(e.contains("no value at $.id"), "{e}");
        assert_eq!(super::message_key(&t[1], &json!({})), Ok(None));
    }

    #[test]
    fn broker_mistakes_are_refused_naming_the_field() {
        for (yaml, says) in [
            ("- {name: t, type: amqp, queue: q}", "url is missing"),
            (
                "- {name: t, type: amqp, url: 'amqp://h'}",
                "queue is missing",
            ),
            (
                "- {name: t, type: amqp, url: 'amqp://h', subject: s}",
                "subject is not for amqp triggers, which take queue",
            ),
            (
                "- {name: t, type: nats, url: 'amqp://h', subject: s}",
                "url: url 'amqp://h' must start with nats://",
            ),
            (
                "- {name: t, type: amqp, url: 'amqp://u:pw@h', queue: q}",
                "url: url carries a password",
            ),
            (
                "- {name: t, type: amqp, url: 'amqp://h', queue: q, auth: none}",
                "auth is for webhooks",
            ),
            (
                "- {name: t, type: mqtt, url: 'mqtt://h', topic: 'a/#/b'}",
                "topic 'a/#/b'",
            ),
            (
                "- {name: t, type: nats, url: 'nats://h', subject: 'a..b'}",
                "empty token",
            ),
            (
                "- {name: t, type: nats, url: 'nats://h', subject: s, key: id}",
                "key 'id' must be a JSONPath",
            ),
            (
                "- {name: t, type: nats, url: 'nats://h', subject: s, event: paid}",
                "event 'paid' needs key",
            ),
            (
                "- {name: t, type: nats, url: 'nats://h', subject: s, when: 'body.x =='}",
                "when:",
            ),
            (
                "- {name: t, type: kafka}",
                "known: webhook, form, amqp, nats, mqtt",
            ),
            (
                "- {name: t, auth: none, allow_ips: [10.0.0.0/8], queue: q}",
                "queue is for broker triggers",
            ),
        ] {
            let e = triggers(yaml).expect_err(yaml);
            assert!(e.contains(says), "{yaml}\n  says: {e}\n  want: {says}");
        }
        let long = format!(
            "- {{name: t, type: amqp, url: 'amqp://h', queue: {}}}",
            "q".repeat(256)
        );
        assert!(triggers(&long).unwrap_err().contains("at most 255"));
    }
}
