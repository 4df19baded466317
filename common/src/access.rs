//! Who may do what: project roles, and API tokens (generated, shown once, kept as a hash).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;
use utoipa::ToSchema;

/// A user's role in a project; each from `Viewer` on includes the ones before it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[schema(as = ProjectRole)]
pub enum Role {
    /// Takes, heartbeats, logs and completes the project's external tasks, and nothing
    /// else (no reads: a worker service's token). Operators and up may do the same.
    Worker,
    /// Reads the project: workflows, runs, task logs, schedules, backfills.
    Viewer,
    /// + start, stop, pause, resume, rerun, resubmit, backfill.
    Operator,
    /// + workflow definitions and schedules.
    Editor,
    /// + members; may delete the project.
    Admin,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Worker,
        Role::Viewer,
        Role::Operator,
        Role::Editor,
        Role::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    /// Whether it may work on the project's external tasks.
    pub fn works_external_tasks(self) -> bool {
        self == Role::Worker || self >= Role::Operator
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                format!("unknown role '{s}': use worker, viewer, operator, editor or admin")
            })
    }
}

/// What every token starts with, so a leaked one is recognisable (secret scanners).
pub const TOKEN_PREFIX: &str = "shoal_";

/// `n` random bytes as hex, from the kernel's generator.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// A new API token: 256 random bits.
pub fn new_token() -> std::io::Result<String> {
    Ok(format!("{TOKEN_PREFIX}{}", random_hex(32)?))
}

/// What the store keeps of a token. A token has 256 random bits, so an unsalted SHA-256
/// cannot be reversed, and a lookup by hash needs no constant-time comparison.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_include_the_ones_below() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Editor);
        assert!(Role::Editor < Role::Admin);
        // A worker reads nothing: every read needs Viewer.
        assert!(Role::Worker < Role::Viewer);
        let works: Vec<Role> = Role::ALL
            .into_iter()
            .filter(|r| r.works_external_tasks())
            .collect();
        assert_eq!(
            works,
            [Role::Worker, Role::Operator, Role::Editor, Role::Admin]
        );
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert!(
            "owner"
                .parse::<Role>()
                .unwrap_err()
                .contains("viewer, operator")
        );
    }

    #[test]
    fn tokens_are_random_and_kept_as_their_hash() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_ne!(token_hash(&a), token_hash(&b));
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
