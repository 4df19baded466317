//! A data dir is shoal's alone: it holds the store (`shoal.db`), the key of the project
//! secrets, task logs, scripts with the secrets they were given, and the outbox journal.
//!
//! What shoal makes there it makes private at creation (files 0600, directories 0700), and
//! at every start it tightens what an older version left open. Two directories stay
//! traversable by others, never listable (0711): the data dir itself and `work`, through
//! which a tenant's task reaches its own work directory (0700, handed to the tenant).

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Directories of a data dir and their modes.
const DIRS: [(&str, u32); 3] = [("logs", 0o700), ("running", 0o700), ("work", 0o711)];
/// Files of a data dir (a standalone's and a worker's), readable by shoal's user alone.
const FILES: [&str; 6] = [
    "shoal.db",
    "shoal.db-wal",
    "shoal.db-shm",
    "secret.key",
    "outbox.journal",
    "worker.lock",
];
const DATA_DIR_MODE: u32 = 0o711;
const FILE_MODE: u32 = 0o600;

/// Creates `data_dir` and its directories with their modes, and tightens those and the
/// files of [`FILES`] that are there already. Nothing else in it is touched (a data dir
/// may be a directory with other files of the operator's).
pub fn prepare(data_dir: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DATA_DIR_MODE)
        .create(data_dir)?;
    fs::set_permissions(data_dir, Permissions::from_mode(DATA_DIR_MODE))?;
    for (name, mode) in DIRS {
        let dir = data_dir.join(name);
        DirBuilder::new().recursive(true).mode(mode).create(&dir)?;
        fs::set_permissions(&dir, Permissions::from_mode(mode))?;
    }
    for name in FILES {
        let path = data_dir.join(name);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o077 != 0 => {
                fs::set_permissions(&path, Permissions::from_mode(FILE_MODE))?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates the file at `path` (0600) if it is missing, so that what opens it later (SQLite
/// creating its database, which it would make 0644, and its `-wal` and `-shm` after it)
/// finds it private.
pub fn create_private_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_data_dir_is_made_private_and_an_old_one_tightened() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        fs::create_dir(&data).unwrap();
        fs::set_permissions(&data, Permissions::from_mode(0o755)).unwrap();
        for name in ["secret.key", "notes.txt"] {
            fs::write(data.join(name), "x").unwrap();
            fs::set_permissions(data.join(name), Permissions::from_mode(0o644)).unwrap();
        }
        prepare(&data).unwrap();
        assert_eq!(mode(&data), 0o711);
        assert_eq!(mode(&data.join("logs")), 0o700);
        assert_eq!(mode(&data.join("running")), 0o700);
        assert_eq!(mode(&data.join("work")), 0o711);
        assert_eq!(mode(&data.join("secret.key")), 0o600);
        assert_eq!(mode(&data.join("notes.txt")), 0o644, "not shoal's");
        create_private_file(&data.join("shoal.db")).unwrap();
        assert_eq!(mode(&data.join("shoal.db")), 0o600);
    }
}
