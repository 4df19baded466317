//! Publish tasks: one message sent to a broker from the worker itself, a success once the
//! broker confirmed it: an AMQP publisher confirm (the message mandatory: one no queue
//! takes fails), a JetStream ack (a stream stored it), an MQTT QoS 1 PUBACK. A failure is
//! the task's failure, and its retries apply.
//!
//! The log gets the broker (its URL without the password), where the message went, the
//! header names (not their values), the body's size and the broker's answer.

use super::Outcome;
use super::kill::KillSwitch;
use super::task_log::TaskLog;
use amqprs::channel::{BasicPublishArguments, ConfirmSelectArguments};
use amqprs::{BasicProperties, FieldTable, FieldValue};
use rumqttc::{AsyncClient, Event, Packet, QoS};
use shoal_common::broker::{self, BrokerKind, CONNECT_TIMEOUT, amqp, mqtt, nats};
use shoal_common::definition::PublishSpec;
use shoal_common::proto::TaskSpec;
use std::collections::HashMap;
use std::time::Duration;

/// Longest a publish may wait for the broker's confirmation, once connected.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);

/// Publishes; a stop (kill or timeout) drops the connection, which cancels it.
pub(crate) async fn run(
    p: &PublishSpec,
    spec: &TaskSpec,
    log: &TaskLog,
    kill: &KillSwitch,
) -> Outcome {
    let name = format!(
        "shoal task {} attempt {}",
        spec.task_instance_id, spec.attempt
    );
    let shown = broker::parse_url(p.broker, &p.url).map(|a| a.shown(p.broker));
    log.note(&format!(
        "publish to {} on {}",
        p.target(),
        shown.as_deref().unwrap_or("the broker")
    ));
    if !p.headers.is_empty() {
        let names: Vec<&str> = p.headers.keys().map(String::as_str).collect();
        log.note(&format!("headers: {}", names.join(", ")));
    }
    log.note(&format!("body: {} bytes", p.body.len()));
    let sent = async {
        match p.broker {
            BrokerKind::Amqp => publish_amqp(p, &name).await,
            BrokerKind::Nats => publish_nats(p, &name).await,
            BrokerKind::Mqtt => publish_mqtt(p, spec).await,
        }
    };
    let limit = CONNECT_TIMEOUT + CONFIRM_TIMEOUT;
    let outcome = tokio::select! {
        sent = tokio::time::timeout(limit, sent) => sent.unwrap_or_else(|_| {
            Err(format!("the broker did not confirm the message within {limit:?}"))
        }),
        _ = kill.stopped() => return Outcome::killed(),
    };
    match outcome {
        Ok(confirmed) => {
            log.note(&confirmed);
            Outcome::Success {
                output: HashMap::new(),
            }
        }
        Err(e) => {
            let message = format!("publish to {} failed: {e}", p.target());
            log.note(&message);
            Outcome::failure(message)
        }
    }
}

/// To a queue (through the default exchange) or an exchange, mandatory, confirmed.
async fn publish_amqp(p: &PublishSpec, name: &str) -> Result<String, String> {
    let (exchange, routing_key) = match &p.queue {
        Some(queue) => ("", queue.as_str()),
        None => (
            p.exchange.as_deref().unwrap_or_default(),
            p.routing_key.as_deref().unwrap_or_default(),
        ),
    };
    broker::check_amqp_name("exchange", exchange)?;
    broker::check_amqp_name("routing_key", routing_key)?;
    let mut headers = FieldTable::new();
    for (header, value) in &p.headers {
        let key = header
            .as_str()
            .try_into()
            .map_err(|_| format!("header name '{header}' is longer than 255 bytes"))?;
        let value = value
            .as_str()
            .try_into()
            .map_err(|_| format!("header '{header}' is too long"))?;
        headers.insert(key, FieldValue::S(value));
    }
    let mut opened = amqp::open(&p.url, name).await?;
    let confirms = opened
        .channel
        .confirm_select(ConfirmSelectArguments::default())
        .await;
    if let Err(e) = confirms {
        return Err(opened.explain("cannot turn publisher confirms on", e));
    }
    let mut properties = BasicProperties::default();
    properties.with_persistence(true);
    if !headers.as_ref().is_empty() {
        properties.with_headers(headers);
    }
    let args = BasicPublishArguments::new(exchange, routing_key)
        .mandatory(true)
        .finish();
    let published = opened
        .channel
        .basic_publish(properties, p.body.clone().into_bytes(), args)
        .await;
    if let Err(e) = published {
        return Err(opened.explain("cannot publish", e));
    }
    let answer = loop {
        break match opened.events.recv().await {
            Some(amqp::Event::Ack) => Ok(format!("confirmed by {}", opened.shown)),
            Some(amqp::Event::Nack) => Err(format!("{} refused the message", opened.shown)),
            Some(amqp::Event::Returned(why)) => Err(format!(
                "{} could not route the message to a queue ({why}): does the queue exist, or \
                 a binding of the exchange for the routing key?",
                opened.shown
            )),
            Some(amqp::Event::Closed(why)) => {
                Err(format!("{} closed the channel: {why}", opened.shown))
            }
            Some(amqp::Event::Cancelled) => continue,
            None => Err(format!(
                "the connection to {} was lost before it confirmed",
                opened.shown
            )),
        };
    };
    // Confirmed or not, the connection is done with; a failure to close it changes nothing.
    let _ = opened.connection.close().await;
    answer
}

/// To a subject a JetStream stream captures; the stream's ack.
async fn publish_nats(p: &PublishSpec, name: &str) -> Result<String, String> {
    let subject = p.subject.clone().unwrap_or_default();
    broker::check_subject(&subject, false)?;
    let mut headers = async_nats::HeaderMap::new();
    for (header, value) in &p.headers {
        let value: async_nats::HeaderValue = value
            .parse()
            .map_err(|_| format!("header '{header}' holds a line break"))?;
        headers.insert(header.as_str(), value);
    }
    let (client, shown) = nats::connect(&p.url, name).await?;
    let js = async_nats::jetstream::new(client);
    let failed = |e: &dyn std::fmt::Display| {
        format!("{shown}: {e} (a JetStream stream must capture subject '{subject}')")
    };
    let ack = js
        .publish_with_headers(subject.clone(), headers, p.body.clone().into())
        .await
        .map_err(|e| failed(&e))?
        .await
        .map_err(|e| failed(&e))?;
    Ok(format!(
        "stored by {shown} in stream '{}' as message {}",
        ack.stream, ack.sequence
    ))
}

/// To a topic at QoS 1, in a session of its own; the broker's PUBACK.
async fn publish_mqtt(p: &PublishSpec, spec: &TaskSpec) -> Result<String, String> {
    let topic = p.topic.clone().unwrap_or_default();
    broker::check_topic(&topic, false)?;
    let id = format!("shoal-task-{}-{}", spec.task_instance_id, spec.attempt);
    let (options, shown) = mqtt::options(&p.url, &id)?;
    let (client, mut events) = AsyncClient::new(options, 4);
    client
        .publish(topic, QoS::AtLeastOnce, false, p.body.clone().into_bytes())
        .await
        .map_err(|e| format!("{shown}: {e}"))?;
    loop {
        match events.poll().await {
            Ok(Event::Incoming(Packet::PubAck(_))) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("{shown}: {e}")),
        }
    }
    // Sent with the next poll; the message is confirmed whether or not it gets there.
    if client.disconnect().await.is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(1), events.poll()).await;
    }
    Ok(format!("acknowledged by {shown} (QoS 1)"))
}
