//! Killing a task: SIGKILL to its whole process group.
//!
//! A kill can arrive before the process exists (the task was just accepted), while it runs,
//! or after it exited. [`KillSwitch`] makes the first two cases work: the request is
//! remembered, and whichever of `request` and `attach` comes second sends the signal.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Kill state of one task attempt.
#[derive(Default)]
pub(crate) struct KillSwitch {
    requested: AtomicBool,
    /// Process group id of the running process; 0 when there is none.
    pgid: AtomicI32,
}

impl KillSwitch {
    /// Asks for the task to be killed; kills its process group now if it has one.
    pub(crate) fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        let pgid = self.pgid.load(Ordering::SeqCst);
        if pgid > 0 {
            kill_group(pgid);
        }
    }

    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Records the process group of the started process; kills it at once if a kill was
    /// requested before it started.
    pub(crate) fn attach(&self, pgid: i32) {
        self.pgid.store(pgid, Ordering::SeqCst);
        if self.requested() {
            kill_group(pgid);
        }
    }

    /// Forgets the process group once the process is reaped, so that a late kill cannot
    /// hit a process that reused the id.
    pub(crate) fn detach(&self) {
        self.pgid.store(0, Ordering::SeqCst);
    }
}

/// Sends SIGKILL to every process of group `pgid`. A group that is already gone is fine.
pub(crate) fn kill_group(pgid: i32) {
    if pgid <= 0 {
        return;
    }
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid addresses a group.
    let rc = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, error = %err, "cannot kill process group");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_before_start_is_remembered() {
        let k = KillSwitch::default();
        assert!(!k.requested());
        k.request();
        assert!(k.requested());
    }

    #[test]
    fn kill_reaches_the_whole_group() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("bash")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let k = KillSwitch::default();
        k.attach(child.id() as i32);
        k.request();
        let status = child.wait().unwrap();
        assert!(!status.success());
        k.detach();
        // A second request after detach must not signal anything.
        k.request();
    }
}
