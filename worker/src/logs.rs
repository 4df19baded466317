//! Task log files: where they live and how they are read back.
//!
//! A log path is built from the integer ids only
//! (`logs/<workflow_instance_id>/<task_instance_id>_<attempt>.log`), so no request can name
//! a file outside the log directory.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes returned by a read when the caller asks for 0 (no limit given).
pub(crate) const DEFAULT_READ_LIMIT: u32 = 1024 * 1024;
/// Upper bound for one read, well under gRPC's default 4 MiB message limit.
pub(crate) const MAX_READ_LIMIT: u32 = 2 * 1024 * 1024;

/// The directory holding the logs of one workflow instance.
pub(crate) fn instance_dir(logs: &Path, workflow_instance_id: i64) -> PathBuf {
    logs.join(workflow_instance_id.to_string())
}

/// The log file of one task attempt.
pub(crate) fn log_path(
    logs: &Path,
    workflow_instance_id: i64,
    task_instance_id: i64,
    attempt: i32,
) -> PathBuf {
    instance_dir(logs, workflow_instance_id).join(format!("{task_instance_id}_{attempt}.log"))
}

/// Most bytes of a log sent with the attempt's end for the master to keep (its last ones).
pub(crate) const KEPT_BYTES: u64 = 256 * 1024;

/// Deletes the log directories of instances (`logs/<instance>/`) in which nothing was
/// written for longer than `keep` (the newest modification time of the directory and its
/// logs) and no attempt of `running` (task instance id, attempt) has its log; returns how
/// many went.
pub(crate) fn prune(
    logs: &Path,
    keep: std::time::Duration,
    running: &HashSet<(i64, i32)>,
) -> std::io::Result<usize> {
    let idle = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|idle| idle > keep)
    };
    let mut removed = 0;
    for entry in std::fs::read_dir(logs)? {
        let dir = entry?.path();
        if !dir.is_dir() || !idle(&dir) {
            continue;
        }
        let mut expired = true;
        for log in std::fs::read_dir(&dir)? {
            let log = log?.path();
            let attempt = log
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.split_once('_'))
                .and_then(|(t, a)| Some((t.parse().ok()?, a.parse().ok()?)));
            if !idle(&log) || attempt.is_some_and(|a| running.contains(&a)) {
                expired = false;
                break;
            }
        }
        if expired && std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Deletes expired log directories (see [`prune`]) once an hour, or as often as a tenth of
/// `keep` when that is shorter, until `stop`; `running` tells the attempts running now.
pub(crate) async fn prune_every(
    logs: PathBuf,
    keep: std::time::Duration,
    running: impl Fn() -> HashSet<(i64, i32)>,
    stop: tokio_util::sync::CancellationToken,
) {
    let every = (keep / 10).min(std::time::Duration::from_secs(3600));
    loop {
        let (dir, busy) = (logs.clone(), running());
        match tokio::task::spawn_blocking(move || prune(&dir, keep, &busy)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(directories = n, "deleted expired task logs"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot delete expired task logs"),
            Err(e) => tracing::warn!(error = %e, "log pruning failed"),
        }
        // Both arms are cancellation-safe: a token and a sleep.
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Reads up to `limit` bytes (0 = [`DEFAULT_READ_LIMIT`], capped at [`MAX_READ_LIMIT`])
/// starting at `offset`. `None` when the log does not exist; an offset past the end gives
/// an empty read.
pub(crate) async fn read(
    path: PathBuf,
    offset: u64,
    limit: u32,
) -> std::io::Result<Option<Vec<u8>>> {
    let limit = match limit {
        0 => DEFAULT_READ_LIMIT,
        n => n.min(MAX_READ_LIMIT),
    };
    tokio::task::spawn_blocking(move || {
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(offset))?;
        let mut content = Vec::with_capacity((limit as usize).min(64 * 1024));
        file.take(u64::from(limit)).read_to_end(&mut content)?;
        Ok(Some(content))
    })
    .await
    .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_built_from_ids_only() {
        let p = log_path(Path::new("/data/logs"), 7, 42, 2);
        assert_eq!(p, Path::new("/data/logs/7/42_2.log"));
        let p = log_path(Path::new("/data/logs"), -1, -2, -3);
        assert_eq!(p, Path::new("/data/logs/-1/-2_-3.log"));
    }

    #[test]
    fn only_log_directories_idle_past_the_retention_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let age = |path: PathBuf| {
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
            let file = std::fs::File::open(path).unwrap();
            file.set_modified(old).unwrap();
        };
        for instance in [1, 2, 3] {
            let path = log_path(dir.path(), instance, instance * 10, 1);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"x").unwrap();
            age(instance_dir(dir.path(), instance));
        }
        // Instance 2's log was written lately; instance 3's attempt still runs.
        for instance in [1, 3] {
            age(log_path(dir.path(), instance, instance * 10, 1));
        }
        let running = HashSet::from([(30, 1)]);
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(prune(dir.path(), hour, &running).unwrap(), 1);
        assert!(!instance_dir(dir.path(), 1).exists());
        assert!(log_path(dir.path(), 2, 20, 1).exists());
        assert!(log_path(dir.path(), 3, 30, 1).exists());
    }

    #[tokio::test]
    async fn reads_windows_and_reports_missing_logs() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_path(dir.path(), 1, 2, 1);
        assert_eq!(read(path.clone(), 0, 0).await.unwrap(), None);

        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"hello world").unwrap();
        assert_eq!(
            read(path.clone(), 0, 0).await.unwrap().unwrap(),
            b"hello world"
        );
        assert_eq!(read(path.clone(), 6, 3).await.unwrap().unwrap(), b"wor");
        assert_eq!(read(path.clone(), 6, 100).await.unwrap().unwrap(), b"world");
        assert_eq!(read(path.clone(), 100, 10).await.unwrap().unwrap(), b"");
    }
}
