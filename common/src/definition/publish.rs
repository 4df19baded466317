//! `publish` tasks: one message sent to a broker by the worker, which succeeds once the
//! broker confirmed it (AMQP publisher confirms, a JetStream ack, an MQTT QoS 1 PUBACK).
//! Their shape, validation and the texts parameters are expanded in (as data: a value
//! lands in the message as it is).

use super::{DefinitionError, TaskDef};
use crate::broker::{self, BrokerKind};
use crate::types::TaskType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `publish:` where a message goes and what it says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishSpec {
    pub broker: BrokerKind,
    /// `amqp://host:5672/vhost`, `nats://host:4222`, `mqtt://host:1883` (over TLS:
    /// `amqps://`, `tls://`, `mqtts://`); a password in it only through a secret
    /// (`${secret.BROKER_URL}`).
    pub url: String,
    /// `amqp`: a queue, sent to through the default exchange (or give `exchange`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// `amqp`: the exchange, with `routing_key`. A message it routes to no queue fails
    /// the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// `nats`: the subject; a JetStream stream must capture it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `mqtt`: the topic (QoS 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The message (e.g. JSON); `${name}` references are expanded.
    #[serde(default)]
    pub body: String,
    /// AMQP and NATS headers (MQTT 3.1.1 messages have none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl PublishSpec {
    /// Every text parameters are expanded in.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let targets = [
            &self.queue,
            &self.exchange,
            &self.routing_key,
            &self.subject,
            &self.topic,
        ];
        [self.url.as_str(), self.body.as_str()]
            .into_iter()
            .chain(targets.into_iter().flatten().map(String::as_str))
            .chain(self.headers.values().map(String::as_str))
    }

    /// The same, to expand in place.
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let targets = [
            &mut self.queue,
            &mut self.exchange,
            &mut self.routing_key,
            &mut self.subject,
            &mut self.topic,
        ];
        [&mut self.url, &mut self.body]
            .into_iter()
            .chain(targets.into_iter().flatten())
            .chain(self.headers.values_mut())
    }

    /// What is wrong with it as written (a value with a `${reference}` is checked once
    /// expanded, by the worker).
    pub fn check(&self) -> Result<(), String> {
        let kind = self.broker;
        broker::check_url(kind, &self.url).map_err(|e| format!("url: {e}"))?;
        let fields = [
            ("queue", &self.queue, BrokerKind::Amqp),
            ("exchange", &self.exchange, BrokerKind::Amqp),
            ("routing_key", &self.routing_key, BrokerKind::Amqp),
            ("subject", &self.subject, BrokerKind::Nats),
            ("topic", &self.topic, BrokerKind::Mqtt),
        ];
        for (field, value, of) in fields {
            if value.is_some() && of != kind {
                return Err(format!(
                    "{field} is for {} brokers, not {}",
                    of.as_str(),
                    kind.as_str()
                ));
            }
        }
        let literal = |v: &str| !v.contains("${");
        match kind {
            BrokerKind::Amqp => self.check_amqp()?,
            BrokerKind::Nats => match &self.subject {
                None => return Err("subject is missing: where the message goes".into()),
                Some(s) if literal(s) => broker::check_subject(s, false)?,
                Some(_) => {}
            },
            BrokerKind::Mqtt => match &self.topic {
                None => return Err("topic is missing: where the message goes".into()),
                Some(t) if literal(t) => broker::check_topic(t, false)?,
                Some(_) => {}
            },
        }
        if kind == BrokerKind::Mqtt && !self.headers.is_empty() {
            return Err("headers: MQTT 3.1.1 messages carry no headers".into());
        }
        for name in self.headers.keys() {
            let token = |c: char| c.is_ascii_graphic() && c != ':';
            if name.is_empty() || name.len() > broker::MAX_AMQP_NAME || !name.chars().all(token) {
                return Err(format!(
                    "headers: '{name}' is not a header name (visible ASCII without ':', at most {} bytes)",
                    broker::MAX_AMQP_NAME
                ));
            }
        }
        Ok(())
    }

    /// An AMQP message goes to a queue, or to an exchange with a routing key.
    fn check_amqp(&self) -> Result<(), String> {
        match (&self.queue, &self.exchange) {
            (Some(_), Some(_)) => {
                return Err("give queue or exchange (with routing_key), not both".into());
            }
            (None, None) => {
                return Err("queue or exchange is missing: where the message goes".into());
            }
            (Some(_), None) if self.routing_key.is_some() => {
                return Err("routing_key goes with exchange (a queue is its own key)".into());
            }
            _ => {}
        }
        let names = [
            ("queue", &self.queue),
            ("exchange", &self.exchange),
            ("routing_key", &self.routing_key),
        ];
        for (field, value) in names {
            if let Some(value) = value.as_deref().filter(|v| !v.contains("${")) {
                broker::check_amqp_name(field, value)?;
            }
        }
        Ok(())
    }

    /// Where the message goes, as messages name it: `queue 'q'`, `exchange 'x' with
    /// routing key 'k'`, `subject 's'`, `topic 't'`.
    pub fn target(&self) -> String {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        match (self.broker, &self.queue) {
            (BrokerKind::Amqp, Some(queue)) => format!("queue '{queue}'"),
            (BrokerKind::Amqp, None) => format!(
                "exchange '{}' with routing key '{}'",
                s(&self.exchange),
                s(&self.routing_key)
            ),
            (BrokerKind::Nats, _) => format!("subject '{}'", s(&self.subject)),
            (BrokerKind::Mqtt, _) => format!("topic '{}'", s(&self.topic)),
        }
    }
}

/// A `publish` section belongs to a publish task, and is well formed.
pub(super) fn check(t: &TaskDef) -> Result<(), DefinitionError> {
    let bad = |reason: String| DefinitionError::BadBranch {
        task: t.name.clone(),
        reason,
    };
    match (&t.publish, t.kind()) {
        (Some(_), kind) if kind != TaskType::Publish => Err(bad(format!(
            "a {} task takes no `publish` section",
            t.task_type
        ))),
        (Some(p), _) => p.check().map_err(|e| bad(format!("publish: {e}"))),
        (None, _) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::definition::WorkflowDef;

    fn parse(publish: &str) -> Result<WorkflowDef, String> {
        let text = format!(
            "name: w\nparams: {{id: '1'}}\ntasks:\n- {{name: p, type: publish, retries: 2, publish: {publish}}}\n"
        );
        WorkflowDef::parse(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_publish_task_names_its_broker_and_where_the_message_goes() {
        let def = parse(
            "{broker: amqp, url: 'amqp://rabbit/', exchange: orders, routing_key: 'paid.${id}', \
             body: '{\"id\": ${id}}', headers: {x-source: shoal}}",
        )
        .unwrap();
        let p = def.tasks[0].publish.as_ref().unwrap();
        assert_eq!(
            p.target(),
            "exchange 'orders' with routing key 'paid.${id}'"
        );
        assert!(def.tasks[0].texts().any(|t| t == "{\"id\": ${id}}"));
        parse("{broker: nats, url: '${secret.NATS}', subject: orders.paid, body: x}").unwrap();
        parse("{broker: mqtt, url: 'mqtt://h', topic: 'paid/${id}'}").unwrap();
    }

    #[test]
    fn publish_mistakes_are_refused_naming_the_field() {
        for (publish, says) in [
            (
                "{broker: amqp, url: 'amqp://h'}",
                "queue or exchange is missing",
            ),
            (
                "{broker: amqp, url: 'amqp://h', queue: q, exchange: x}",
                "not both",
            ),
            (
                "{broker: amqp, url: 'amqp://h', queue: q, routing_key: k}",
                "routing_key goes with exchange",
            ),
            ("{broker: nats, url: 'nats://h'}", "subject is missing"),
            (
                "{broker: nats, url: 'nats://h', subject: 'a.*'}",
                "has a wildcard",
            ),
            (
                "{broker: mqtt, url: 'mqtt://h', topic: t, headers: {a: b}}",
                "MQTT 3.1.1 messages carry no headers",
            ),
            (
                "{broker: mqtt, url: 'mqtt://h', subject: s}",
                "subject is for nats brokers, not mqtt",
            ),
            (
                "{broker: amqp, url: 'amqp://u:p@h', queue: q}",
                "url: url carries a password",
            ),
            (
                "{broker: amqp, url: 'amqp://h', queue: q, headers: {'a b': x}}",
                "'a b' is not a header name",
            ),
            ("{broker: kafka, url: 'x'}", "unknown variant `kafka`"),
        ] {
            let e = parse(publish).expect_err(publish);
            assert!(e.contains(says), "{publish}\n  says: {e}\n  want: {says}");
        }
        let long = format!(
            "{{broker: amqp, url: 'amqp://h', queue: {}}}",
            "q".repeat(256)
        );
        assert!(parse(&long).unwrap_err().contains("at most 255"));
        let e = WorkflowDef::parse("name: w\ntasks:\n- {name: p, type: publish}\n").unwrap_err();
        assert!(e.to_string().contains("needs 'publish'"), "{e}");
    }
}
