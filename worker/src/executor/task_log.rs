//! The log of one task attempt: masked, appended to its file as it comes, and its end kept
//! in memory as well. The end travels with the attempt's event for the master to keep
//! ([`super::super::logs::KEPT_BYTES`]), so it is there even when the file could not be
//! written (a full disk) and costs no reading back of the file.

use crate::logs::KEPT_BYTES;
use shoal_common::mask::Mask;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use tracing::warn;

pub(crate) struct TaskLog {
    /// None when the file could not be created: the log is then kept in memory only.
    file: Option<File>,
    mask: Mask,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The log's last bytes (between [`KEPT_BYTES`] and twice that once it is longer).
    end: Vec<u8>,
    /// Every byte the log was given, written to its file or not.
    size: u64,
    /// Set once a write to the file failed (reported once).
    file_failed: bool,
}

impl TaskLog {
    /// Opens (creating it and its directory) the log of one attempt for appending. A file
    /// that cannot be created does not fail the task: the log is then kept in memory, and
    /// says why in its first line.
    pub(crate) fn open(path: &Path, mask: Mask) -> TaskLog {
        // The worker's alone: a log holds whatever the task printed.
        let open = || {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
        };
        // The directory (one per run) is there for every task of a run but its first:
        // made only when the file cannot be, not checked for each task.
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| open()),
            opened => opened,
        };
        let (file, failed) = match file {
            Ok(f) => (Some(f), None),
            Err(e) => (None, Some(e)),
        };
        let log = TaskLog {
            file,
            mask,
            kept: Mutex::default(),
        };
        if let Some(e) = failed {
            warn!(path = %path.display(), error = %e, "cannot create the task log file; keeping its end in memory");
            log.note(&format!(
                "cannot create the log file {}: {e}; only the last {} KiB of this log are kept",
                path.display(),
                KEPT_BYTES / 1024
            ));
        }
        log
    }

    pub(crate) fn mask(&self) -> &Mask {
        &self.mask
    }

    /// Appends a worker note.
    pub(crate) fn note(&self, message: &str) {
        let line = format!("[shoal] {}\n", self.mask.text(message));
        self.append(line.as_bytes());
    }

    /// Appends `bytes`, masked.
    pub(crate) fn write(&self, bytes: &[u8]) {
        self.append(&self.mask.bytes(bytes));
    }

    /// Appends bytes already masked (output copied in pieces through a
    /// [`shoal_common::mask::MaskStream`]). A file that cannot be written is not worth failing
    /// the task: the end is kept all the same.
    pub(crate) fn append(&self, bytes: &[u8]) {
        let mut kept = self.kept.lock().expect("task log lock");
        if let Some(mut file) = self.file.as_ref()
            && !kept.file_failed
            && let Err(e) = file.write_all(bytes)
        {
            kept.file_failed = true;
            warn!(error = %e, "cannot write the task log file; keeping its end in memory");
        }
        kept.size += bytes.len() as u64;
        kept.end.extend_from_slice(bytes);
        let limit = KEPT_BYTES as usize;
        if kept.end.len() > 2 * limit {
            let cut = kept.end.len() - limit;
            kept.end.drain(..cut);
        }
    }

    /// The log's last `max` bytes (at most [`KEPT_BYTES`]) and its whole size.
    pub(crate) fn end(&self, max: u64) -> (Vec<u8>, u64) {
        let kept = self.kept.lock().expect("task log lock");
        let from = kept.end.len().saturating_sub(max.min(KEPT_BYTES) as usize);
        (kept.end[from..].to_vec(), kept.size)
    }

    /// The log's whole size so far.
    pub(crate) fn size(&self) -> u64 {
        self.kept.lock().expect("task log lock").size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_is_kept_whole_short_and_bounded_long() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1/2_1.log");
        let log = TaskLog::open(&path, Mask::new(&["hunter2".into()]));
        log.write(b"pw=hunter2\n");
        log.note("done");
        assert_eq!(
            log.end(KEPT_BYTES),
            (b"pw=***\n[shoal] done\n".to_vec(), 20)
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"pw=***\n[shoal] done\n");

        let chunk = vec![b'x'; 100 * 1024];
        for _ in 0..10 {
            log.append(&chunk);
        }
        log.append(b"last");
        let (end, size) = log.end(KEPT_BYTES);
        assert_eq!(size, 20 + 10 * 100 * 1024 + 4);
        assert_eq!(end.len() as u64, KEPT_BYTES);
        assert!(end.ends_with(b"xlast"));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    }

    #[test]
    fn a_log_whose_file_cannot_be_created_is_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the log's directory should be.
        std::fs::write(dir.path().join("1"), b"").unwrap();
        let log = TaskLog::open(&dir.path().join("1/2_1.log"), Mask::default());
        log.write(b"still here\n");
        let (end, _) = log.end(KEPT_BYTES);
        let text = String::from_utf8(end).unwrap();
        assert!(
            text.starts_with("[shoal] cannot create the log file"),
            "{text}"
        );
        assert!(text.ends_with("still here\n"), "{text}");
    }
}
