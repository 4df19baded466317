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
}

impl From<etcd_client::Error> for Error {
    fn from(e: etcd_client::Error) -> Self {
        Error::Registry(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
