//! Alert channels and the alert outbox.
//!
//! The engine writes an alert row in the transaction that records what it reports (an
//! instance's end, a timeout), so an alert is neither lost nor invented by a crash. A
//! master's sender leases due rows (`FOR UPDATE SKIP LOCKED`, then `lease_owner` and
//! `lease_until`), delivers them outside any transaction, and records the outcome under
//! its lease: one master sends a given alert, again only if it crashed mid-delivery.

use super::codec::{from_json, to_json};
use super::db::Tx;
use super::schema::{Alert, AlertChannel as Chan, WorkflowInstance as Inst};
use super::sql::insert_rows;
use super::{AlertChannel, AlertFilter, AlertRow, ChannelTarget, EmailTarget, NewAlert, Store};
use sea_query::{Expr, ExprTrait, LockBehavior, LockType, Order, Query, SelectStatement};
use shoal_common::definition::name_problem;
use shoal_common::error::{Error, Result};
use shoal_common::types::now_ms;

pub const ALERT_PENDING: &str = "pending";
pub const ALERT_SENT: &str = "sent";
pub const ALERT_FAILED: &str = "failed";

const DEFAULT_LIST_LIMIT: i64 = 100;
const MAX_LIST_LIMIT: i64 = 1000;

const ALERT_COLUMNS: [Alert; 11] = [
    Alert::Id,
    Alert::WorkflowInstanceId,
    Alert::Channel,
    Alert::Event,
    Alert::Payload,
    Alert::State,
    Alert::Attempts,
    Alert::LastError,
    Alert::NextAttemptAt,
    Alert::CreatedAt,
    Alert::SentAt,
];

#[derive(sqlx::FromRow)]
struct AlertRecord {
    id: i64,
    workflow_instance_id: i64,
    channel: String,
    event: String,
    payload: String,
    state: String,
    attempts: i32,
    last_error: Option<String>,
    next_attempt_at: i64,
    created_at: i64,
    sent_at: Option<i64>,
}

impl AlertRecord {
    fn decode(self) -> Result<AlertRow> {
        Ok(AlertRow {
            payload: from_json(&format!("alert {}", self.id), "payload", &self.payload)?,
            id: self.id,
            workflow_instance_id: self.workflow_instance_id,
            channel: self.channel,
            event: self.event,
            state: self.state,
            attempts: self.attempts,
            last_error: self.last_error,
            next_attempt_at: self.next_attempt_at,
            created_at: self.created_at,
            sent_at: self.sent_at,
        })
    }
}

/// Whether an e-mail channel can be used: its server URL and addresses read, and no
/// password over a plain connection.
fn check_email(e: &EmailTarget) -> std::result::Result<(), String> {
    use lettre::AsyncSmtpTransport;
    use lettre::Tokio1Executor;
    let url =
        url::Url::parse(&e.smtp).map_err(|err| format!("smtp '{}' is not a URL: {err}", e.smtp))?;
    if url.password().is_some() || !url.username().is_empty() {
        return Err("put the smtp server's user and password in \"username\" and \"password\", not in its URL".into());
    }
    AsyncSmtpTransport::<Tokio1Executor>::from_url(&e.smtp).map_err(|err| {
        format!(
            "smtp '{}' is not an SMTP server URL ({err}): smtps://host[:465] (TLS), \
             smtp://host[:587]?tls=required (STARTTLS) or smtp://host[:25] (plain)",
            e.smtp
        )
    })?;
    let plain = url.scheme() == "smtp"
        && !url
            .query_pairs()
            .any(|(k, v)| k == "tls" && v == "required");
    if plain && e.password.is_some() {
        return Err(format!(
            "smtp '{}' is a plain connection: the password would cross the network in clear; \
             use smtps:// or add ?tls=required",
            e.smtp
        ));
    }
    if e.to.is_empty() {
        return Err("an email channel needs at least one address in \"to\"".into());
    }
    for address in std::iter::once(&e.from).chain(&e.to) {
        address
            .parse::<lettre::message::Mailbox>()
            .map_err(|err| format!("'{address}' is not an e-mail address: {err}"))?;
    }
    if let Some(ca) = &e.ca {
        let parsed = lettre::transport::smtp::client::Certificate::from_pem(ca.as_bytes());
        if !ca.contains("-----BEGIN CERTIFICATE-----") || parsed.is_err() {
            return Err("\"ca\" is not a PEM certificate (-----BEGIN CERTIFICATE-----...)".into());
        }
    }
    Ok(())
}

/// How one delivery attempt went, as the sender records it.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    Sent,
    /// Failed; tried again at `retry_at`, or never again when None.
    Failed {
        error: String,
        retry_at: Option<i64>,
    },
}

pub(super) async fn insert_alerts(tx: &mut Tx, alerts: &[&NewAlert]) -> Result<()> {
    let now = now_ms();
    for chunk in alerts.chunks(tx.rows_per_statement(7)) {
        let rows = chunk
            .iter()
            .map(|a| -> Result<_> {
                Ok([
                    a.workflow_instance_id.into(),
                    a.channel.as_str().into(),
                    a.event.as_str().into(),
                    to_json(&a.payload)?.into(),
                    ALERT_PENDING.into(),
                    now.into(),
                    now.into(),
                ])
            })
            .collect::<Result<Vec<_>>>()?;
        tx.execute(&insert_rows(
            Alert::Table,
            [
                Alert::WorkflowInstanceId,
                Alert::Channel,
                Alert::Event,
                Alert::Payload,
                Alert::State,
                Alert::NextAttemptAt,
                Alert::CreatedAt,
            ],
            rows,
        ))
        .await?;
    }
    Ok(())
}

/// Alerts due for a delivery attempt and not leased by a live sender, oldest first (the
/// caller picks the columns).
fn due_alerts(now: i64, limit: u64) -> SelectStatement {
    Query::select()
        .from(Alert::Table)
        .and_where(Expr::col(Alert::State).eq(ALERT_PENDING))
        .and_where(Expr::col(Alert::NextAttemptAt).lte(now))
        .and_where(
            Expr::col(Alert::LeaseUntil)
                .is_null()
                .or(Expr::col(Alert::LeaseUntil).lt(now)),
        )
        .order_by(Alert::Id, Order::Asc)
        .limit(limit)
        .to_owned()
}

impl Store {
    pub async fn create_alert_channel(&self, channel: &AlertChannel) -> Result<()> {
        if let Some(problem) = name_problem(&channel.name) {
            return Err(Error::Invalid(format!(
                "invalid alert channel name '{}': {problem}",
                channel.name
            )));
        }
        let kind = match &channel.target {
            ChannelTarget::Webhook { url, .. } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(Error::Invalid(format!(
                        "webhook url '{url}' must start with http:// or https://"
                    )));
                }
                "webhook"
            }
            ChannelTarget::Log => "log",
            ChannelTarget::Email(email) => {
                check_email(email).map_err(Error::Invalid)?;
                "email"
            }
        };
        let mut tx = self.db.begin().await?;
        let insert = insert_rows(
            Chan::Table,
            [Chan::Name, Chan::Kind, Chan::Config, Chan::CreatedAt],
            [[
                channel.name.as_str().into(),
                kind.into(),
                to_json(&channel.target)?.into(),
                now_ms().into(),
            ]],
        );
        match tx.execute(&insert).await {
            Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {
                return Err(Error::Conflict(format!(
                    "alert channel '{}' exists already",
                    channel.name
                )));
            }
            other => other?,
        }
        tx.commit().await
    }

    /// Every channel, by name.
    pub async fn list_alert_channels(&self) -> Result<Vec<AlertChannel>> {
        let rows: Vec<(String, String)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Chan::Name, Chan::Config])
                    .from(Chan::Table)
                    .order_by(Chan::Name, Order::Asc),
            )
            .await?;
        rows.into_iter()
            .map(|(name, config)| {
                let target = from_json(&format!("alert_channel {name}"), "config", &config)?;
                Ok(AlertChannel { name, target })
            })
            .collect()
    }

    pub async fn delete_alert_channel(&self, name: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let deleted = tx
            .execute_counted(
                Query::delete()
                    .from_table(Chan::Table)
                    .and_where(Expr::col(Chan::Name).eq(name)),
            )
            .await?;
        if deleted == 0 {
            return Err(Error::NotFound(format!(
                "alert channel '{name}' does not exist"
            )));
        }
        tx.commit().await
    }

    /// Which of `names` are not alert channels.
    pub async fn missing_alert_channels(&self, names: &[&str]) -> Result<Vec<String>> {
        let known = self.list_alert_channels().await?;
        Ok(names
            .iter()
            .filter(|n| !known.iter().any(|c| c.name == **n))
            .map(|n| n.to_string())
            .collect())
    }

    /// Leases up to `limit` due alerts to `owner` for `lease_ms` and counts the attempt.
    /// Rows another master holds (locked now, or leased and not expired) are skipped.
    pub async fn lease_alerts(
        &self,
        owner: &str,
        limit: u64,
        lease_ms: i64,
    ) -> Result<Vec<AlertRow>> {
        let now = now_ms();
        // A read first: most passes find nothing, and on SQLite a write transaction would
        // queue behind (and hold up) the engine's writes.
        let any: Option<(i64,)> = self
            .db
            .fetch_optional(due_alerts(now, 1).column(Alert::Id))
            .await?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        let mut tx = self.db.begin().await?;
        let due: Vec<AlertRecord> = tx
            .fetch_all(
                due_alerts(now, limit)
                    .columns(ALERT_COLUMNS)
                    .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked),
            )
            .await?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        tx.execute(
            Query::update()
                .table(Alert::Table)
                .value(Alert::LeaseOwner, owner)
                .value(Alert::LeaseUntil, now + lease_ms)
                .value(Alert::Attempts, Expr::col(Alert::Attempts).add(1))
                .and_where(Expr::col(Alert::Id).is_in(due.iter().map(|a| a.id))),
        )
        .await?;
        tx.commit().await?;
        due.into_iter()
            .map(|a| {
                let mut row = a.decode()?;
                row.attempts += 1;
                Ok(row)
            })
            .collect()
    }

    /// Records a delivery attempt of an alert `owner` leased; false when the lease was
    /// lost meanwhile (another master may be sending it).
    pub async fn record_delivery(&self, id: i64, owner: &str, outcome: &Delivery) -> Result<bool> {
        let now = now_ms();
        let mut update = Query::update();
        update
            .table(Alert::Table)
            .value(Alert::LeaseOwner, Option::<String>::None)
            .value(Alert::LeaseUntil, Option::<i64>::None)
            .and_where(Expr::col(Alert::Id).eq(id))
            .and_where(Expr::col(Alert::LeaseOwner).eq(owner));
        match outcome {
            Delivery::Sent => update
                .value(Alert::State, ALERT_SENT)
                .value(Alert::SentAt, now),
            Delivery::Failed { error, retry_at } => update
                .value(Alert::LastError, error.as_str())
                .value(
                    Alert::State,
                    if retry_at.is_some() {
                        ALERT_PENDING
                    } else {
                        ALERT_FAILED
                    },
                )
                .value(Alert::NextAttemptAt, retry_at.unwrap_or(now)),
        };
        let mut tx = self.db.begin().await?;
        let updated = tx.execute_counted(&update).await?;
        tx.commit().await?;
        Ok(updated > 0)
    }

    /// Alerts, newest first.
    pub async fn list_alerts(&self, filter: &AlertFilter) -> Result<Vec<AlertRow>> {
        let limit = filter
            .limit
            .unwrap_or(DEFAULT_LIST_LIMIT)
            .clamp(1, MAX_LIST_LIMIT);
        let records: Vec<AlertRecord> = self
            .db
            .fetch_all(
                Query::select()
                    .columns(ALERT_COLUMNS)
                    .from(Alert::Table)
                    .and_where_option(
                        filter
                            .workflow_instance_id
                            .map(|id| Expr::col(Alert::WorkflowInstanceId).eq(id)),
                    )
                    .and_where_option(
                        filter
                            .state
                            .as_deref()
                            .map(|s| Expr::col(Alert::State).eq(s)),
                    )
                    .and_where_option(filter.projects.as_ref().map(|ps| {
                        Expr::col(Alert::WorkflowInstanceId).in_subquery(
                            Query::select()
                                .column(Inst::Id)
                                .from(Inst::Table)
                                .and_where(
                                    Expr::col(Inst::Project).is_in(ps.iter().map(String::as_str)),
                                )
                                .to_owned(),
                        )
                    }))
                    .order_by(Alert::Id, Order::Desc)
                    .limit(limit.unsigned_abs()),
            )
            .await?;
        records.into_iter().map(AlertRecord::decode).collect()
    }
}
