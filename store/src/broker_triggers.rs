//! Broker triggers: the definitions whose consumers the leading master runs, what each
//! message a consumer received did (written with its run's start command, its event's
//! delivery or its ignored record, in one transaction: a redelivered message finds its
//! record and does nothing twice), the messages that could not be used, and the state of
//! each consumer.

use super::command_rows::{insert_command_statement, notify_masters};
use super::db::Tx;
use super::definitions::{decode_spec, is_latest_version};
use super::event_waits::{Delivered, deliver_in};
use super::offline::online_only;
use super::schema::{
    TriggerConsumer as Consumer, TriggerIgnored as Ignored, TriggerMessage as Seen,
    WorkflowDefinition as Def,
};
use super::sql::insert_rows;
use super::{Backend, Store};
use super::{NewCommand, StoredDefinition};
use sea_query::{Alias, Expr, ExprTrait, OnConflict, Order, Query};

/// The consumer table's columns: the key (project, workflow, trigger) first, then the state.
const CONSUMER_COLUMNS: [Consumer; 13] = [
    Consumer::Project,
    Consumer::Workflow,
    Consumer::TriggerName,
    Consumer::Master,
    Consumer::State,
    Consumer::Error,
    Consumer::Since,
    Consumer::LastMessageAt,
    Consumer::Started,
    Consumer::Filtered,
    Consumer::Ignored,
    Consumer::Duplicate,
    Consumer::Delivered,
];
use shoal_common::error::{Error, Result};
use shoal_common::start::Params;
use shoal_common::types::now_ms;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// The ignored messages kept per trigger: the latest.
pub const KEPT_IGNORED: u64 = 100;

/// A message of a broker trigger, by its identity.
#[derive(Debug, Clone, Copy)]
pub struct TriggerMessage<'a> {
    pub project: &'a str,
    pub workflow: &'a str,
    pub trigger: &'a str,
    /// Its `key`, the broker's message id, or a hash of its body.
    pub id: &'a str,
}

/// What a message does, in the transaction that records it.
#[derive(Debug, Clone, Copy)]
pub enum MessageAction<'a> {
    /// Starts a run.
    Start(&'a NewCommand),
    /// Delivers an event ([`Store::deliver_event`]).
    Deliver {
        event: &'a str,
        key: &'a str,
        data: &'a Params,
        keep: Duration,
    },
    /// Is kept as ignored: why, and its body (its start).
    Ignore { reason: &'a str, body: &'a str },
}

/// What a message did.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageTaken {
    /// The start command of its run.
    Started(i64),
    Delivered(Delivered),
    Ignored,
    /// A message of this identity was taken before: nothing was written.
    Duplicate,
}

/// A message a trigger could not use.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct IgnoredMessage {
    pub id: i64,
    pub reason: String,
    /// The start of its body.
    pub body: String,
    pub received_at: i64,
}

/// Where a trigger's consumer runs and how it fares.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ConsumerState {
    pub project: String,
    pub workflow: String,
    pub trigger_name: String,
    /// The master it runs on.
    pub master: String,
    /// `connecting`, `connected` or `failed`.
    pub state: String,
    /// Why it failed last (kept while it connects again).
    pub error: Option<String>,
    /// Since when it is in this state (ms since the epoch).
    pub since: i64,
    pub last_message_at: Option<i64>,
    #[sqlx(flatten)]
    pub counts: MessageCounts,
}

/// What a consumer did with the messages it took since it started on its master.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct MessageCounts {
    pub started: i64,
    pub filtered: i64,
    pub ignored: i64,
    pub duplicate: i64,
    pub delivered: i64,
}

impl Store {
    /// The latest version of every online workflow that has a broker trigger.
    pub async fn broker_trigger_definitions(&self) -> Result<Vec<StoredDefinition>> {
        let d = Alias::new("d");
        let col = |c: Def| Expr::col((d.clone(), c));
        // Only these definitions can hold one (a trigger's type is always written).
        let broker = ["amqp", "nats", "mqtt"]
            .map(|kind| col(Def::Spec).like(format!("%\"type\":\"{kind}\"%")));
        let [amqp, nats, mqtt] = broker;
        let rows: Vec<(String, String, i32, String, i64)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([
                        (d.clone(), Def::Project),
                        (d.clone(), Def::Name),
                        (d.clone(), Def::Version),
                        (d.clone(), Def::Spec),
                        (d.clone(), Def::CreatedAt),
                    ])
                    .from_as(Def::Table, d.clone())
                    .and_where(is_latest_version(d.clone()))
                    .and_where(col(Def::Spec).like("%\"triggers\":%"))
                    .and_where(amqp.or(nats).or(mqtt))
                    .and_where(online_only(
                        (d.clone(), Def::Project),
                        (d.clone(), Def::Name),
                    ))
                    .order_by((d.clone(), Def::Project), Order::Asc)
                    .order_by((d, Def::Name), Order::Asc),
            )
            .await?;
        let mut found = Vec::new();
        for (project, name, version, spec, created_at) in rows {
            let definition = decode_spec(&project, &name, version, &spec)?;
            if definition.triggers.iter().any(|t| t.broker().is_some()) {
                found.push(StoredDefinition {
                    project,
                    name,
                    version,
                    definition,
                    created_at,
                });
            }
        }
        Ok(found)
    }

    /// Does what message `m` asks, once: [`Store::take_trigger_messages`] of one.
    pub async fn take_trigger_message(
        &self,
        m: &TriggerMessage<'_>,
        action: MessageAction<'_>,
    ) -> Result<MessageTaken> {
        let mut taken = self.take_trigger_messages(&[(*m, action)]).await?;
        Ok(taken.pop().unwrap_or(MessageTaken::Duplicate))
    }

    /// Does what each message asks, once, all in one transaction (one durable commit
    /// for the batch): each message's identity is recorded first, and one whose record
    /// was there already (taken before, or earlier in `batch`) is a duplicate and writes
    /// nothing. A concurrent taker of the same identity (two consumers for a moment,
    /// after a change of leader) waits at that record for the first to commit. What each
    /// message did, in `batch`'s order; on an error nothing was written.
    pub async fn take_trigger_messages(
        &self,
        batch: &[(TriggerMessage<'_>, MessageAction<'_>)],
    ) -> Result<Vec<MessageTaken>> {
        let now = now_ms();
        let mut tx = self.db.begin().await?;
        let claimed = claim(&mut tx, batch, now).await?;
        let mut taken = Vec::with_capacity(batch.len());
        let mut started = Vec::new();
        for ((m, action), claimed) in batch.iter().zip(&claimed) {
            if !claimed {
                taken.push(MessageTaken::Duplicate);
                continue;
            }
            taken.push(match *action {
                MessageAction::Start(cmd) => {
                    let id = tx.insert_id(&insert_command_statement(cmd, now)?).await?;
                    started.push((*m, id));
                    MessageTaken::Started(id)
                }
                MessageAction::Deliver {
                    event,
                    key,
                    data,
                    keep,
                } => {
                    let delivered = deliver_in(&mut tx, m.project, event, key, data, keep).await?;
                    MessageTaken::Delivered(delivered)
                }
                MessageAction::Ignore { reason, body } => {
                    keep_ignored(&mut tx, m, reason, body, now).await?;
                    MessageTaken::Ignored
                }
            });
        }
        if !claimed.contains(&true) {
            // Nothing to write: dropped uncommitted.
            return Ok(taken);
        }
        if !started.is_empty() {
            note_commands(&mut tx, &started).await?;
            notify_masters(&mut tx).await?;
        }
        tx.commit().await?;
        if !started.is_empty() {
            self.commands_written();
        }
        Ok(taken)
    }

    /// The messages trigger `trigger` of `project/workflow` could not use, newest first.
    pub async fn ignored_messages(
        &self,
        project: &str,
        workflow: &str,
        trigger: &str,
    ) -> Result<Vec<IgnoredMessage>> {
        self.db
            .fetch_all(
                Query::select()
                    .columns([
                        Ignored::Id,
                        Ignored::Reason,
                        Ignored::Body,
                        Ignored::ReceivedAt,
                    ])
                    .from(Ignored::Table)
                    .and_where(Expr::col(Ignored::Project).eq(project))
                    .and_where(Expr::col(Ignored::Workflow).eq(workflow))
                    .and_where(Expr::col(Ignored::TriggerName).eq(trigger))
                    .order_by(Ignored::Id, Order::Desc),
            )
            .await
    }

    /// Records the state of a consumer, replacing the one recorded before.
    pub async fn set_consumer_state(&self, s: &ConsumerState) -> Result<()> {
        let mut upsert = insert_rows(
            Consumer::Table,
            CONSUMER_COLUMNS,
            [[
                s.project.as_str().into(),
                s.workflow.as_str().into(),
                s.trigger_name.as_str().into(),
                s.master.as_str().into(),
                s.state.as_str().into(),
                s.error.clone().into(),
                s.since.into(),
                s.last_message_at.into(),
                s.counts.started.into(),
                s.counts.filtered.into(),
                s.counts.ignored.into(),
                s.counts.duplicate.into(),
                s.counts.delivered.into(),
            ]],
        );
        upsert.on_conflict(
            OnConflict::columns([Consumer::Project, Consumer::Workflow, Consumer::TriggerName])
                .update_columns(CONSUMER_COLUMNS[3..].iter().copied())
                .to_owned(),
        );
        let mut tx = self.db.begin().await?;
        tx.execute(&upsert).await?;
        tx.commit().await
    }

    /// Forgets the state of a consumer `master` ran (one another master runs now stays).
    pub async fn drop_consumer_state(
        &self,
        project: &str,
        workflow: &str,
        trigger: &str,
        master: &str,
    ) -> Result<()> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            Query::delete()
                .from_table(Consumer::Table)
                .and_where(Expr::col(Consumer::Project).eq(project))
                .and_where(Expr::col(Consumer::Workflow).eq(workflow))
                .and_where(Expr::col(Consumer::TriggerName).eq(trigger))
                .and_where(Expr::col(Consumer::Master).eq(master)),
        )
        .await?;
        tx.commit().await
    }

    /// The consumers of `project`'s triggers.
    pub async fn consumer_states(&self, project: &str) -> Result<Vec<ConsumerState>> {
        self.db
            .fetch_all(
                Query::select()
                    .columns(CONSUMER_COLUMNS)
                    .from(Consumer::Table)
                    .and_where(Expr::col(Consumer::Project).eq(project)),
            )
            .await
    }
}

/// Records the identity of each message of `batch` not recorded before, in the order of
/// the identities (so that two batches sharing some wait for each other rather than
/// deadlock); whether each message (in `batch`'s order) was the one recorded. Of two
/// messages of one identity in `batch`, the first is.
async fn claim(
    tx: &mut Tx,
    batch: &[(TriggerMessage<'_>, MessageAction<'_>)],
    now: i64,
) -> Result<Vec<bool>> {
    let mut first: HashMap<(&str, &str, &str, &str), usize> = HashMap::new();
    for (i, (m, _)) in batch.iter().enumerate() {
        first.entry(identity(m)).or_insert(i);
    }
    let mut ids: Vec<_> = first.keys().copied().collect();
    ids.sort_unstable();
    let record = |chunk: &[(&str, &str, &str, &str)]| {
        insert_rows(
            Seen::Table,
            [
                Seen::Project,
                Seen::Workflow,
                Seen::TriggerName,
                Seen::MessageId,
                Seen::CommandId,
                Seen::ReceivedAt,
            ],
            chunk.iter().map(|&(project, workflow, trigger, id)| {
                [
                    project.into(),
                    workflow.into(),
                    trigger.into(),
                    id.into(),
                    Option::<i64>::None.into(),
                    now.into(),
                ]
            }),
        )
    };
    let mut recorded = HashSet::new();
    if tx.backend() == Backend::Mysql {
        // MySQL says nothing of which rows an insert added: one insert per identity, a
        // duplicate's error (after which a MySQL transaction goes on) meaning it was
        // recorded before.
        for &(project, workflow, trigger, id) in &ids {
            match tx
                .execute(&record(&[(project, workflow, trigger, id)]))
                .await
            {
                Ok(()) => {
                    recorded.insert((project.into(), workflow.into(), trigger.into(), id.into()));
                }
                Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {}
                Err(e) => return Err(e),
            }
        }
    } else {
        for chunk in ids.chunks(tx.rows_per_statement(6)) {
            let mut insert = record(chunk);
            insert.on_conflict(OnConflict::columns(SEEN_KEY).do_nothing().to_owned());
            insert.returning(Query::returning().columns(SEEN_KEY));
            let rows: Vec<(String, String, String, String)> = tx.fetch_all(&insert).await?;
            recorded.extend(rows);
        }
    }
    Ok(batch
        .iter()
        .enumerate()
        .map(|(i, (m, _))| {
            let (project, workflow, trigger, id) = identity(m);
            let key = (project.into(), workflow.into(), trigger.into(), id.into());
            first[&identity(m)] == i && recorded.contains(&key)
        })
        .collect())
}

/// What names a message's record: (project, workflow, trigger, id).
fn identity<'a>(m: &TriggerMessage<'a>) -> (&'a str, &'a str, &'a str, &'a str) {
    (m.project, m.workflow, m.trigger, m.id)
}

/// The columns that name a message's record.
const SEEN_KEY: [Seen; 4] = [
    Seen::Project,
    Seen::Workflow,
    Seen::TriggerName,
    Seen::MessageId,
];

/// A message's id and its run's start command.
type Noted<'a> = (&'a str, i64);

/// Writes the start command of each message of `started` on its record: one statement
/// per trigger.
async fn note_commands(tx: &mut Tx, started: &[(TriggerMessage<'_>, i64)]) -> Result<()> {
    let mut by_trigger: BTreeMap<(&str, &str, &str), Vec<Noted>> = BTreeMap::new();
    for (m, command_id) in started {
        let of = by_trigger.entry((m.project, m.workflow, m.trigger));
        of.or_default().push((m.id, *command_id));
    }
    for ((project, workflow, trigger), commands) in by_trigger {
        // Within the bind limit: a batch is at most a consumer's prefetch.
        let mut case = sea_query::CaseStatement::new();
        for &(id, command_id) in &commands {
            case = case.case(Expr::col(Seen::MessageId).eq(id), command_id);
        }
        let ids = commands.iter().map(|&(id, _)| id);
        tx.execute(
            Query::update()
                .table(Seen::Table)
                .value(Seen::CommandId, case)
                .and_where(Expr::col(Seen::Project).eq(project))
                .and_where(Expr::col(Seen::Workflow).eq(workflow))
                .and_where(Expr::col(Seen::TriggerName).eq(trigger))
                .and_where(Expr::col(Seen::MessageId).is_in(ids)),
        )
        .await?;
    }
    Ok(())
}

/// Keeps an ignored message, and the latest [`KEPT_IGNORED`] of its trigger only.
async fn keep_ignored(
    tx: &mut Tx,
    m: &TriggerMessage<'_>,
    reason: &str,
    body: &str,
    now: i64,
) -> Result<()> {
    tx.execute(&insert_rows(
        Ignored::Table,
        [
            Ignored::Project,
            Ignored::Workflow,
            Ignored::TriggerName,
            Ignored::Reason,
            Ignored::Body,
            Ignored::ReceivedAt,
        ],
        [[
            m.project.into(),
            m.workflow.into(),
            m.trigger.into(),
            reason.into(),
            body.into(),
            now.into(),
        ]],
    ))
    .await?;
    let of_trigger = |q: &mut sea_query::SelectStatement| {
        q.and_where(Expr::col(Ignored::Project).eq(m.project))
            .and_where(Expr::col(Ignored::Workflow).eq(m.workflow))
            .and_where(Expr::col(Ignored::TriggerName).eq(m.trigger));
    };
    // The newest record past the kept ones, then it and all older go (MySQL deletes by
    // neither a LIMIT subquery nor a subquery of the same table).
    let mut past_kept = Query::select();
    past_kept.column(Ignored::Id).from(Ignored::Table);
    of_trigger(&mut past_kept);
    past_kept
        .order_by(Ignored::Id, Order::Desc)
        .limit(1)
        .offset(KEPT_IGNORED);
    let Some((oldest_dropped,)) = tx.fetch_optional::<(i64,)>(&past_kept).await? else {
        return Ok(());
    };
    tx.execute(
        Query::delete()
            .from_table(Ignored::Table)
            .and_where(Expr::col(Ignored::Project).eq(m.project))
            .and_where(Expr::col(Ignored::Workflow).eq(m.workflow))
            .and_where(Expr::col(Ignored::TriggerName).eq(m.trigger))
            .and_where(Expr::col(Ignored::Id).lte(oldest_dropped)),
    )
    .await
}

/// Deletes the records of `project/workflow`'s trigger messages (the workflow goes).
pub(super) async fn delete_of_workflow(tx: &mut Tx, project: &str, workflow: &str) -> Result<()> {
    tx.execute(
        Query::delete()
            .from_table(Seen::Table)
            .and_where(Expr::col(Seen::Project).eq(project))
            .and_where(Expr::col(Seen::Workflow).eq(workflow)),
    )
    .await?;
    tx.execute(
        Query::delete()
            .from_table(Ignored::Table)
            .and_where(Expr::col(Ignored::Project).eq(project))
            .and_where(Expr::col(Ignored::Workflow).eq(workflow)),
    )
    .await
}

/// Deletes the message records and ignored messages received before `cutoff_ms`;
/// returns how many message records went.
pub(super) async fn prune(tx: &mut Tx, cutoff_ms: i64) -> Result<u64> {
    let seen = tx
        .execute_counted(
            Query::delete()
                .from_table(Seen::Table)
                .and_where(Expr::col(Seen::ReceivedAt).lt(cutoff_ms)),
        )
        .await?;
    tx.execute(
        Query::delete()
            .from_table(Ignored::Table)
            .and_where(Expr::col(Ignored::ReceivedAt).lt(cutoff_ms)),
    )
    .await?;
    Ok(seen)
}
