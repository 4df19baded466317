//! Free space of the worker's data dir. Below `--min-free-disk` the worker takes no new
//! task: its script, its log and its journal record might not fit, and a task that cannot
//! write its script fails. Refused dispatches go to other workers of the group (the master
//! rests a refusing worker briefly and offers it again), so a full disk delays tasks
//! instead of failing them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::{info, warn};

pub(crate) struct DiskCheck {
    dir: PathBuf,
    /// Bytes; 0 turns the check off.
    min_free: u64,
    /// Whether the last check refused, so that a change is logged once.
    short: AtomicBool,
}

impl DiskCheck {
    pub(crate) fn new(dir: PathBuf, min_free: u64) -> DiskCheck {
        DiskCheck {
            dir,
            min_free,
            short: AtomicBool::new(false),
        }
    }

    /// Why no new task may start here now, or None. One `statvfs` call.
    pub(crate) fn refusal(&self) -> Option<String> {
        if self.min_free == 0 {
            return None;
        }
        let reason = match free_bytes(&self.dir) {
            Ok(free) if free >= self.min_free => None,
            Ok(free) => Some(format!(
                "disk nearly full: {} has {} free, less than --min-free-disk {}; free some space or lower the setting",
                self.dir.display(),
                size(free),
                size(self.min_free)
            )),
            Err(e) => Some(format!(
                "cannot read the free space of {}: {e}",
                self.dir.display()
            )),
        };
        let was_short = self.short.swap(reason.is_some(), Ordering::Relaxed);
        match (&reason, was_short) {
            (Some(why), false) => warn!(reason = %why, "taking no new task"),
            (None, true) => {
                info!(dir = %self.dir.display(), "disk space is back; taking tasks again")
            }
            _ => {}
        }
        reason
    }
}

/// Bytes an unprivileged process may still write on the file system of `path`.
fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("path contains a NUL byte"))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a pointer to writable memory of the right type.
    if unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded, so it filled the struct.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// `n` bytes in the largest binary unit that keeps it at least 1.
fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_with_room_is_accepted_and_a_threshold_above_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(free_bytes(dir.path()).unwrap() > 0);
        assert_eq!(DiskCheck::new(dir.path().into(), 0).refusal(), None);
        assert_eq!(DiskCheck::new(dir.path().into(), 1).refusal(), None);
        let why = DiskCheck::new(dir.path().into(), u64::MAX)
            .refusal()
            .unwrap();
        assert!(why.contains("less than --min-free-disk"), "{why}");
        let gone = DiskCheck::new(dir.path().join("missing"), 1)
            .refusal()
            .unwrap();
        assert!(gone.contains("cannot read the free space"), "{gone}");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(100 << 20), "100.0 MiB");
        assert_eq!(size(3 << 29), "1.5 GiB");
    }
}
