//! The one store API over Postgres or MySQL/MariaDB (cluster) and SQLite (standalone).
//!
//! Statements are built once with sea-query and rendered for the backend in use; values
//! are always bound. Migrations in `sql/postgres`, `sql/mysql` and `sql/sqlite` run in
//! `connect`.
//! The methods live by subject: `definitions`, `commands` (intake and claim), `instances`
//! (the master's write batch and the run-state reads), `schedules` (cron schedules and
//! their fires), `backfills`, `serial` (execution types), `task_groups` (slots shared
//! across workflows), `alerts` (channels and the outbox), `users` (users and API tokens),
//! `projects` (projects and members), `audit` (the audit log), `secrets` (sealed secrets),
//! `environments` (shell lines run before a task), `triggers` (webhook calls and their
//! idempotency keys), `external` (external tasks' offers and leases), `waits` (ending
//! waiting attempts), `event_waits` (events that complete them).
//!
//! Below them, base modules that the subject modules share and that import none of them:
//! `db` (pools and transactions), `sql` (statement builders), `schema`, `codec`, `signal`,
//! `pending_audit`, `command_rows` (command and error-command rows), `instance_rows`
//! (instance and task rows) and `offline` (a workflow's offline mark). No store module
//! imports one that imports it back.

mod alerts;
mod audit;
mod backfill_runs;
mod backfills;
mod broker_triggers;
mod children;
mod codec;
mod command_rows;
mod commands;
mod db;
mod definitions;
mod environments;
mod event_waits;
mod external;
mod failover;
mod instance_rows;
mod instances;
mod lifecycle;
mod model;
mod offline;
mod pending_audit;
mod projects;
mod retention;
mod schedules;
mod schema;
mod secrets;
mod serial;
mod signal;
mod sql;
mod task_groups;
mod task_logs;
mod task_ops;
mod triggers;
mod users;
mod waits;

pub use alerts::{ALERT_FAILED, ALERT_PENDING, ALERT_SENT, Delivery};
pub use audit::{AuditFilter, AuditRow};
pub use backfills::{BackfillRow, BackfillRunRow, Cancel, Chained, NewBackfill};
pub use broker_triggers::{
    ConsumerState, IgnoredMessage, KEPT_IGNORED, MessageAction, MessageCounts, MessageTaken,
    TriggerMessage,
};
pub use commands::recovery_allowed;
pub use environments::{EnvironmentDelete, EnvironmentRow};
pub use event_waits::{Delivered, EventWait};
pub use external::{
    EXTERNAL_LOG_BYTES, ExternalOffer, ExternalQueue, Holder, Lease, Leased, Offered, SeenWorker,
};
pub use instances::MAX_INSTANCE_LIST;
pub use model::*;
pub use pending_audit::{AuditEntry, audit_object, audit_project, audited};
pub use projects::{MemberRow, Owned, ProjectRow};
pub use retention::Pruned;
pub use schedules::{FIRE_MEMORY_MS, ScheduleRow, ScheduleSpec};
pub use secrets::{SealedSecret, SecretRow};
pub use signal::Signal;
pub use task_logs::KeptLog;
pub use task_ops::Forced;
pub use triggers::{CallKey, RunProgress, TriggeredRun};
pub use users::{BOOTSTRAP_ADMIN, BOOTSTRAP_TOKEN, TokenOwner, TokenRow, UserRow};
pub use waits::WaitEnd;

use db::Db;
use shoal_common::error::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
    Mysql,
}

/// Cheap to clone: clones share the pools (and, on SQLite, the command signal).
#[derive(Clone)]
pub struct Store {
    db: Db,
}

impl Store {
    /// `postgres://...`, `mysql://...` or `sqlite://PATH` (the file is created). Runs the
    /// migrations.
    pub async fn connect(url: &str) -> Result<Store> {
        Ok(Store {
            db: Db::connect(url, true).await?,
        })
    }

    /// [`Store::connect`] for a caller that retries what fails transiently, as a master
    /// does: Postgres connections are not pinged as they are taken from the pool, a round
    /// trip saved on every transaction (two a task). A connection that died while idle (a
    /// Postgres restart) then fails its first statement with a transient error, which the
    /// caller retries on another one, instead of being replaced unseen.
    pub async fn connect_retrying(url: &str) -> Result<Store> {
        Ok(Store {
            db: Db::connect(url, false).await?,
        })
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }
}
