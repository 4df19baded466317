//! The one store API over Postgres (cluster) and SQLite (standalone).
//!
//! Statements are built once with sea-query and rendered for the backend in use; values
//! are always bound. Migrations in `sql/postgres` and `sql/sqlite` run in `connect`.
//! The methods live by subject: `definitions`, `commands` (intake and claim), `instances`
//! (the master's write batch and the run-state reads), `schedules` (cron schedules and
//! their fires), `backfills`, `serial` (execution types), `task_groups` (slots shared
//! across workflows), `alerts` (channels and the outbox).

mod alerts;
mod backfills;
mod children;
mod codec;
mod commands;
mod db;
mod definitions;
mod failover;
mod instances;
mod model;
mod schedules;
mod schema;
mod serial;
mod signal;
mod task_groups;

pub use alerts::{ALERT_FAILED, ALERT_PENDING, ALERT_SENT, Delivery};
pub use backfills::{BackfillRow, BackfillRunRow, NewBackfill};
pub use commands::recovery_allowed;
pub use model::*;
pub use schedules::{FIRE_MEMORY_MS, ScheduleRow, ScheduleSpec};
pub use signal::CommandSignal;

use crate::error::Result;
use db::Db;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// Cheap to clone: clones share the pools (and, on SQLite, the command signal).
#[derive(Clone)]
pub struct Store {
    db: Db,
}

impl Store {
    /// `postgres://...` or `sqlite://PATH` (the file is created). Runs the migrations.
    pub async fn connect(url: &str) -> Result<Store> {
        Ok(Store {
            db: Db::connect(url).await?,
        })
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }
}
