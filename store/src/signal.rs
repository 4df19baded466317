//! Waking masters when commands are written, and external workers' polls when tasks are
//! offered: LISTEN/NOTIFY on Postgres, an in-process signal on SQLite (standalone runs the
//! API and the master in one process), and on MySQL, which has no NOTIFY, the in-process
//! signal or a probe: a one-row query every few milliseconds whose answer changes with a
//! write of another process.

use sqlx::PgPool;
use sqlx::mysql::MySqlPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// The Postgres channel `insert_command` notifies.
pub(super) const COMMAND_CHANNEL: &str = "shoal_command";
/// The Postgres channel a commit that offers external tasks notifies.
pub(super) const EXTERNAL_CHANNEL: &str = "shoal_external";

/// What was written.
#[derive(Clone, Copy)]
pub(super) enum Written {
    Commands,
    /// External tasks offered.
    External,
}

impl Written {
    /// MySQL's probe of these writes: its answer changes when one happened (a command's
    /// id is never reused; an offer made or handed back changes the count of untaken ones).
    /// One index read, or a count of the few offers waiting.
    pub(super) fn probe(self) -> &'static str {
        match self {
            Written::Commands => "SELECT CAST(COALESCE(MAX(id), 0) AS SIGNED) FROM command",
            Written::External => {
                "SELECT CAST(COUNT(*) AS SIGNED) FROM external_task WHERE token_hash IS NULL"
            }
        }
    }

    pub(super) fn channel(self) -> &'static str {
        match self {
            Written::Commands => COMMAND_CHANNEL,
            Written::External => EXTERNAL_CHANNEL,
        }
    }

    /// Of the in-process signals of commands and of external offers, this one's.
    pub(super) fn pick<T>(self, commands: T, external: T) -> T {
        match self {
            Written::Commands => commands,
            Written::External => external,
        }
    }
}

/// Counts writes (of commands, or of external offers); a receiver remembers the count it last saw, so a write that
/// happens while nobody is waiting is still seen by the next `recv`.
#[derive(Default)]
pub(super) struct LocalSignal {
    generation: AtomicU64,
    notify: Notify,
}

impl LocalSignal {
    pub(super) fn wake(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// Wakes its holder when commands were written (NOTIFY `shoal_command` on Postgres, an
/// in-process signal on SQLite), or external tasks offered (`shoal_external`).
pub struct Signal {
    inner: Inner,
}

enum Inner {
    Postgres(PgListener),
    Local {
        signal: Arc<LocalSignal>,
        seen: u64,
        /// Other processes' writes are not signalled: also returns when this sees one.
        probe: Option<Probe>,
    },
}

/// A query run every `every` whose answer changes with a write (MySQL).
pub(super) struct Probe {
    pool: MySqlPool,
    sql: &'static str,
    every: Duration,
    /// The answer last seen; None before the first.
    last: Option<i64>,
}

impl Probe {
    pub(super) fn new(pool: MySqlPool, sql: &'static str, every: Duration) -> Probe {
        Probe {
            pool,
            sql,
            every,
            last: None,
        }
    }

    /// Returns once the answer differs from the one last seen (at once the first time),
    /// or the query failed (so that the caller looks at the table).
    async fn changed(&mut self) {
        loop {
            match sqlx::query_scalar::<_, i64>(self.sql)
                .fetch_one(&self.pool)
                .await
            {
                Ok(now) if self.last == Some(now) => {}
                Ok(now) => {
                    self.last = Some(now);
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "polling for other processes' writes failed");
                    // Keeps a persistent failure from turning the caller's loop busy.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    return;
                }
            }
            tokio::time::sleep(self.every).await;
        }
    }
}

impl Signal {
    /// LISTENs on `channel` over a connection of its own, never one of `pool`'s: a listener
    /// that fails mid-way (a Postgres restart, a cut link) can leave its connection
    /// listening, and such a connection back in the shared pool would fail every later
    /// statement that meets a notification ("unexpected message: NotificationResponse").
    pub(super) async fn postgres(
        pool: &PgPool,
        channel: &str,
    ) -> shoal_common::error::Result<Self> {
        let own = PgPoolOptions::new()
            .max_connections(1)
            .connect_lazy_with((*pool.connect_options()).clone());
        let mut listener = PgListener::connect_with(&own).await?;
        listener.listen(channel).await?;
        Ok(Signal {
            inner: Inner::Postgres(listener),
        })
    }

    pub(super) fn local(signal: Arc<LocalSignal>, probe: Option<Probe>) -> Self {
        let seen = signal.generation();
        Signal {
            inner: Inner::Local {
                signal,
                seen,
                probe,
            },
        }
    }

    /// Returns when a write may have happened since the last call. Cancellation-safe.
    pub async fn recv(&mut self) {
        match &mut self.inner {
            // Cancellation-safe: sqlx consumes a message only once it has been read whole.
            Inner::Postgres(listener) => match listener.try_recv().await {
                Ok(Some(_)) => {
                    // A burst of inserts sends one notification each; one wake-up covers them.
                    while listener.next_buffered().is_some() {}
                }
                // The connection dropped and notifications sent meanwhile are lost: return
                // so the caller looks at the table; the listener reconnects on the next call.
                Ok(None) => tracing::warn!("notification listener lost its connection"),
                Err(error) => {
                    tracing::warn!(%error, "notification listener failed");
                    // Keeps a persistent failure from turning the caller's loop into a busy loop.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
            Inner::Local {
                signal,
                seen,
                probe,
            } => loop {
                // Register interest before reading the counter, so a wake between the read
                // and the await is not missed. `seen` only moves on return: cancel-safe.
                let notified = signal.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let now = signal.generation();
                if now != *seen {
                    *seen = now;
                    return;
                }
                match probe {
                    // Cancellation-safe: `last` moves only once a changed answer is read.
                    Some(probe) => tokio::select! {
                        () = notified => {}
                        () = probe.changed() => return,
                    },
                    None => notified.await,
                }
            },
        }
    }
}
