//! Runs started by messages on the machine's RabbitMQ (127.0.0.1:5672, guest/guest), as a
//! system outside shoal publishes them: a workflow of one noop task with an `amqp` trigger
//! on a queue of its own, and the bench publishing to that queue.

use crate::api::{Api, Instance, PROJECT};
use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use shoal_common::broker::amqp::{Opened, open};
use std::time::Instant;

/// The broker the bench publishes to and shoal consumes from.
pub const URL: &str = "amqp://127.0.0.1:5672/";

/// A trigger as `GET /projects/{project}/triggers` lists it, with its consumer's state.
#[derive(Deserialize)]
struct Listed {
    workflow: String,
    consumer: Option<Consumer>,
}

#[derive(Deserialize)]
struct Consumer {
    state: String,
}

/// Declares the queue `name`-q, applies workflow `name` with a trigger consuming it, and
/// waits until its consumer is connected; the channel to publish on.
async fn setup(api: &Api, name: &str, deadline: Instant) -> Result<(Opened, String)> {
    let queue = format!("{name}-q");
    let publisher = open(URL, "shoal-bench")
        .await
        .map_err(|e| anyhow::anyhow!("{e}: the broker bench needs RabbitMQ on 127.0.0.1:5672"))?;
    // Gone a minute after its last consumer: bench runs leave no queues behind.
    let mut expires = amqprs::FieldTable::new();
    expires.insert("x-expires".try_into()?, amqprs::FieldValue::I(60_000));
    let declare = amqprs::channel::QueueDeclareArguments::new(&queue)
        .arguments(expires)
        .finish();
    publisher
        .channel
        .queue_declare(declare)
        .await
        .with_context(|| format!("declaring queue {queue}"))?;
    let trigger = json!({
        "name": "bus", "type": "amqp", "url": URL, "queue": queue, "params": { "seq": "$.seq" },
    });
    let def = json!({
        "name": name,
        "params": { "seq": "" },
        "triggers": [trigger],
        "tasks": [{ "name": "t", "type": "noop" }],
    });
    api.apply(&def).await?;
    loop {
        let listed: Vec<Listed> = api.get(&format!("/projects/{PROJECT}/triggers")).await?;
        let connected = listed
            .iter()
            .filter(|t| t.workflow == name)
            .filter_map(|t| t.consumer.as_ref())
            .any(|c| c.state == "connected");
        if connected {
            return Ok((publisher, queue));
        }
        if Instant::now() >= deadline {
            bail!("timed out waiting for the consumer of {name}'s trigger to connect");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn publish(o: &Opened, queue: &str, seq: usize) -> Result<()> {
    let args = amqprs::channel::BasicPublishArguments::new("", queue);
    let body = json!({ "seq": seq }).to_string().into_bytes();
    o.channel
        .basic_publish(amqprs::BasicProperties::default(), body, args)
        .await
        .with_context(|| format!("publishing to {queue}"))
}

/// `n` messages published at once: runs started per second, from the first publish (the
/// bench's clock) to the last run's start (the server's `started_at`, same machine and
/// clock). Every run must succeed, one per message.
pub async fn rate(api: &Api, name: &str, n: usize, deadline: Instant) -> Result<f64> {
    let (publisher, queue) = setup(api, name, deadline).await?;
    let first = Utc::now();
    for seq in 0..n {
        publish(&publisher, &queue, seq).await?;
    }
    let runs = api.wait_workflow(name, n, deadline).await?;
    // A redelivered message that started a second run would be a bug, not a faster rate.
    let all = api.count(&format!("workflow={name}")).await?;
    if all != n as u64 {
        bail!("{n} messages started {all} runs of {name}");
    }
    let last = runs
        .iter()
        .filter_map(|i| i.started_at)
        .max()
        .context("no run has started")?;
    Ok(n as f64 / (crate::scenarios::ms(last - first) / 1000.0))
}

/// `samples` messages one after another, each once the run of the one before ended:
/// published (the bench's clock, just before the publish) → its run running (the
/// server's `started_at`), in ms: p50 and p99.
pub async fn latency(api: &Api, name: &str, samples: usize, deadline: Instant) -> Result<Vec<f64>> {
    let (publisher, queue) = setup(api, name, deadline).await?;
    let mut ms = Vec::with_capacity(samples);
    for seq in 0..samples {
        let sent: DateTime<Utc> = Utc::now();
        publish(&publisher, &queue, seq).await?;
        let runs: Vec<Instance> = api.wait_workflow(name, seq + 1, deadline).await?;
        let newest = runs.iter().max_by_key(|i| i.id).context("no run started")?;
        let started = newest
            .started_at
            .with_context(|| format!("instance {} has no started_at", newest.id))?;
        ms.push(crate::scenarios::ms(started - sent));
    }
    let p = |q| crate::stats::percentile(&ms, q).unwrap_or(f64::NAN);
    Ok(vec![p(50.0), p(99.0)])
}
