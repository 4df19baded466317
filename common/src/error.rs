use crate::definition::DefinitionError;

/// Errors of the shared layer (store, registry, definitions).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("registry error: {0}")]
    Registry(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The request clashes with the current state (e.g. an action already pending).
    #[error("{0}")]
    Conflict(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The connection was lost during COMMIT: the writes may or may not be in the store.
    #[error("the database connection was lost while committing; the outcome is unknown: {0}")]
    CommitUnknown(sqlx::Error),
}

/// What a failed write means for a writer that would retry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The database is unreachable, busy or restarting: the same write may succeed later.
    Transient,
    /// It may have been applied: replaying it could write it twice.
    Unknown,
    /// The write itself is refused (a constraint, a value the schema rejects): retrying
    /// cannot help.
    Deterministic,
}

impl Error {
    pub fn failure(&self) -> Failure {
        match self {
            Error::CommitUnknown(_) => Failure::Unknown,
            Error::Database(e) => database_failure(e),
            Error::Registry(_) => Failure::Transient,
            _ => Failure::Deterministic,
        }
    }
}

fn database_failure(e: &sqlx::Error) -> Failure {
    use sqlx::Error as E;
    match e {
        E::Io(_) | E::Tls(_) | E::Protocol(_) | E::PoolTimedOut | E::PoolClosed => {
            Failure::Transient
        }
        E::WorkerCrashed => Failure::Transient,
        E::Database(db) => {
            let code = db.code().unwrap_or_default();
            let transient = if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // Busy or locked: primary codes 5 and 6 (extended codes keep them in the
                // low byte).
                code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
            } else if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                // MySQL/MariaDB: too many connections (1040), server shutdown (1053), lock
                // wait timeout (1205), deadlock (1213), connection killed (1927).
                matches!(my.number(), 1040 | 1053 | 1205 | 1213 | 1927)
            } else {
                // Postgres: connection exception (08), insufficient resources (53),
                // serialization failure and deadlock (40001, 40P01), a server restart or
                // shutdown (57P01-57P03), lock not available (55P03).
                code.starts_with("08")
                    || code.starts_with("53")
                    || matches!(
                        &*code,
                        "40001" | "40P01" | "57P01" | "57P02" | "57P03" | "55P03"
                    )
            };
            match transient {
                true => Failure::Transient,
                false => Failure::Deterministic,
            }
        }
        _ => Failure::Deterministic,
    }
}

impl From<etcd_client::Error> for Error {
    fn from(e: etcd_client::Error) -> Self {
        Error::Registry(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_connections_are_transient_and_a_lost_commit_is_unknown() {
        let io = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(Error::Database(io()).failure(), Failure::Transient);
        assert_eq!(
            Error::Database(sqlx::Error::PoolTimedOut).failure(),
            Failure::Transient
        );
        assert_eq!(Error::CommitUnknown(io()).failure(), Failure::Unknown);
        assert_eq!(
            Error::Database(sqlx::Error::RowNotFound).failure(),
            Failure::Deterministic
        );
        assert_eq!(Error::Invalid("x".into()).failure(), Failure::Deterministic);
    }
}
