//! Delivers the alert outbox: leases due alerts, sends each to its channel (webhook,
//! e-mail or log) and records the outcome, retrying with backoff. It runs beside the engine and
//! never holds it up: a slow or failing channel only delays its own alerts.

mod email;
mod webhook;

use serde_json::Value;
use shoal_common::secret_key::SecretKey;
use shoal_common::types::now_ms;
use shoal_store::{AlertChannel, AlertRow, ChannelTarget, Delivery, Store};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often the outbox is looked at (alerts come from every master, retries fall due).
const POLL: Duration = Duration::from_secs(1);
/// Alerts leased per pass.
const BATCH: u64 = 50;
/// A lease outlives the slowest delivery, so only a crashed sender's alerts are retaken.
const LEASE: Duration = Duration::from_secs(60);
/// Attempts before an alert is given up (`failed`); waits double from the first.
pub const MAX_ATTEMPTS: i32 = 5;
const FIRST_RETRY: Duration = Duration::from_secs(1);

pub struct Sender {
    pub store: Store,
    /// This master's address: the lease owner.
    pub me: String,
    /// Opens e-mail channels' passwords.
    pub key: Option<SecretKey>,
}

impl Sender {
    pub async fn run(self, shutdown: CancellationToken) {
        let http = match reqwest::Client::builder()
            .timeout(webhook::HTTP_TIMEOUT)
            .build()
        {
            Ok(http) => http,
            Err(e) => {
                warn!(error = %e, "cannot set up the alert http client; alerts are not sent");
                return;
            }
        };
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Cancellation-safe: a tick lost to shutdown only skips a pass.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.pass(&http).await {
                warn!(error = %e, "alert delivery pass failed");
            }
        }
    }

    async fn pass(&self, http: &reqwest::Client) -> shoal_common::Result<()> {
        let due = self
            .store
            .lease_alerts(&self.me, BATCH, LEASE.as_millis() as i64)
            .await?;
        if due.is_empty() {
            return Ok(());
        }
        let channels = self.store.list_alert_channels().await?;
        // Concurrently: a slow channel must not hold up the others' alerts.
        let mut sending = tokio::task::JoinSet::new();
        for alert in due {
            let channel = channels.iter().find(|c| c.name == alert.channel).cloned();
            let (http, store, me) = (http.clone(), self.store.clone(), self.me.clone());
            let key = self.key.clone();
            sending.spawn(async move {
                let result = match &channel {
                    Some(channel) => deliver(&http, key.as_ref(), channel, &alert).await,
                    None => Err(format!("alert channel '{}' does not exist", alert.channel)),
                };
                let outcome = match result {
                    Ok(()) => Delivery::Sent,
                    Err(error) => {
                        warn!(alert_id = alert.id, channel = %alert.channel, attempt = alert.attempts, %error, "alert not delivered");
                        Delivery::Failed {
                            error,
                            retry_at: retry_at(alert.attempts, now_ms()),
                        }
                    }
                };
                match store.record_delivery(alert.id, &me, &outcome).await {
                    Ok(true) => {}
                    Ok(false) => {
                        warn!(alert_id = alert.id, "alert lease lapsed before its outcome was recorded")
                    }
                    // Retried when the lease expires.
                    Err(e) => warn!(alert_id = alert.id, error = %e, "cannot record an alert delivery"),
                }
            });
        }
        while sending.join_next().await.is_some() {}
        Ok(())
    }
}

/// When attempt `attempts + 1` is due, or None after the last one.
fn retry_at(attempts: i32, now: i64) -> Option<i64> {
    (attempts < MAX_ATTEMPTS).then(|| {
        let wait = FIRST_RETRY.as_millis() as i64 * (1i64 << (attempts - 1).clamp(0, 16));
        now + wait
    })
}

async fn deliver(
    http: &reqwest::Client,
    key: Option<&SecretKey>,
    channel: &AlertChannel,
    alert: &AlertRow,
) -> Result<(), String> {
    match &channel.target {
        ChannelTarget::Log => {
            info!(
                alert_id = alert.id,
                channel = %channel.name,
                workflow_instance_id = alert.workflow_instance_id,
                "alert: {}",
                summary(&alert.payload)
            );
            Ok(())
        }
        ChannelTarget::Webhook { url, format } => {
            webhook::send(http, url, *format, &alert.payload).await
        }
        ChannelTarget::Email(e) => email::send(&channel.name, e, key, &alert.payload).await,
    }
}

/// One line for people: what happened to which run (or task), and which tasks failed.
fn summary(payload: &Value) -> String {
    let text = |k: &str| payload[k].as_str().unwrap_or("-").to_string();
    if let Some(task) = payload["task"].as_str() {
        let mut line = format!(
            "shoal: task {task} of workflow {}/{} instance {} {} (attempt {})",
            text("project"),
            text("workflow"),
            payload["workflow_instance_id"],
            text("event"),
            payload["attempt"],
        );
        if let Some(message) = payload["message"].as_str() {
            line.push_str(&format!(": {message}"));
        }
        return line;
    }
    let failed: Vec<&str> = payload["failed_tasks"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut line = format!(
        "shoal: workflow {}/{} instance {} {} (state {}, started {}, ended {})",
        text("project"),
        text("workflow"),
        payload["workflow_instance_id"],
        text("event"),
        text("state"),
        text("started_at"),
        text("ended_at"),
    );
    if !failed.is_empty() {
        line.push_str(&format!("; failed tasks: {}", failed.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retries_back_off_and_stop_after_the_last_attempt() {
        assert_eq!(retry_at(1, 0), Some(1000));
        assert_eq!(retry_at(2, 0), Some(2000));
        assert_eq!(retry_at(4, 0), Some(8000));
        assert_eq!(retry_at(MAX_ATTEMPTS, 0), None);
    }

    #[test]
    fn the_summary_names_the_run_and_its_failed_tasks() {
        let payload = json!({
            "event": "failure", "workflow_instance_id": 7, "project": "default",
            "workflow": "etl", "state": "failure", "started_at": "t0", "ended_at": "t1",
            "failed_tasks": ["load", "check"],
        });
        assert_eq!(
            summary(&payload),
            "shoal: workflow default/etl instance 7 failure (state failure, started t0, ended t1); failed tasks: load, check"
        );
        let task = json!({
            "event": "task_failure", "workflow_instance_id": 7, "project": "default",
            "workflow": "etl", "task": "load", "attempt": 3, "message": "command exited with code 4",
        });
        assert_eq!(
            summary(&task),
            "shoal: task load of workflow default/etl instance 7 task_failure (attempt 3): command exited with code 4"
        );
    }
}
