//! Waking masters when commands are written, and external workers' polls when tasks are
//! offered: LISTEN/NOTIFY on Postgres, an in-process signal on SQLite (standalone runs the
//! API and the master in one process), and on MySQL, which has no NOTIFY, the in-process
//! signal or a short poll, whichever comes first.

use sqlx::PgPool;
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
        /// Also returns after this long: other processes' writes are not signalled.
        poll: Option<Duration>,
    },
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

    pub(super) fn local(signal: Arc<LocalSignal>, poll: Option<Duration>) -> Self {
        let seen = signal.generation();
        Signal {
            inner: Inner::Local { signal, seen, poll },
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
            Inner::Local { signal, seen, poll } => loop {
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
                match poll {
                    Some(every) => {
                        if tokio::time::timeout(*every, notified).await.is_err() {
                            return;
                        }
                    }
                    None => notified.await,
                }
            },
        }
    }
}
