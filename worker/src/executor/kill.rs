//! Stopping a task: SIGKILL to its whole process group, and a cancellation signal for
//! tasks that run in the worker itself (http, sql).
//!
//! A stop can arrive before the process exists (the task was just accepted), while it runs,
//! or after it exited. [`KillSwitch`] makes the first two cases work: the request is
//! remembered, and whichever of `stop` and `attach` comes second sends the signal.
//!
//! A task is stopped for one of three reasons: a kill request (from a master), its timeout
//! with strategy `fail`, or the worker abandoning the attempt (its registry lease was lost,
//! or shutdown's grace period ran out: the masters run the attempt again elsewhere). Of the
//! first two the first one wins; abandoning overrides both, because nothing is reported for
//! an abandoned attempt. The runner only sees "stopped" and the executor turns the reason
//! into KILLED, FAILURE or silence.

use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use tokio_util::sync::CancellationToken;

/// Why a task was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// A kill request: the task ends KILLED.
    Killed,
    /// Its timeout passed with strategy `fail`: the task ends FAILURE.
    TimedOut,
    /// The worker gave the attempt up: no terminal event is reported.
    Abandoned,
}

const RUNNING: u8 = 0;
const KILLED: u8 = 1;
const TIMED_OUT: u8 = 2;
const ABANDONED: u8 = 3;

/// Stop state of one task attempt.
#[derive(Default)]
pub(crate) struct KillSwitch {
    reason: AtomicU8,
    /// Process group id of the running process; 0 when there is none.
    pgid: AtomicI32,
    /// Cancelled on the first stop; in-process runners select on it.
    cancel: CancellationToken,
}

impl KillSwitch {
    /// Asks for the task to be killed; kills its process group now if it has one.
    pub(crate) fn request(&self) {
        self.stop(StopReason::Killed);
    }

    /// Stops the task for `reason` unless it was already stopped (the first reason stays),
    /// except that [`StopReason::Abandoned`] replaces any earlier reason.
    pub(crate) fn stop(&self, reason: StopReason) {
        let first = |code| {
            let _ = self
                .reason
                .compare_exchange(RUNNING, code, Ordering::SeqCst, Ordering::SeqCst);
        };
        match reason {
            StopReason::Killed => first(KILLED),
            StopReason::TimedOut => first(TIMED_OUT),
            StopReason::Abandoned => self.reason.store(ABANDONED, Ordering::SeqCst),
        }
        self.cancel.cancel();
        let pgid = self.pgid.load(Ordering::SeqCst);
        if pgid > 0 {
            kill_group(pgid);
        }
    }

    /// True once the task was stopped for any reason.
    pub(crate) fn requested(&self) -> bool {
        self.reason().is_some()
    }

    pub(crate) fn reason(&self) -> Option<StopReason> {
        match self.reason.load(Ordering::SeqCst) {
            KILLED => Some(StopReason::Killed),
            TIMED_OUT => Some(StopReason::TimedOut),
            ABANDONED => Some(StopReason::Abandoned),
            _ => None,
        }
    }

    /// Resolves once the task is stopped. Cancellation-safe.
    pub(crate) async fn stopped(&self) {
        self.cancel.cancelled().await
    }

    /// Records the process group of the started process; kills it at once if a stop was
    /// requested before it started.
    pub(crate) fn attach(&self, pgid: i32) {
        self.pgid.store(pgid, Ordering::SeqCst);
        if self.requested() {
            kill_group(pgid);
        }
    }

    /// Forgets the process group before the process is reaped, so that a late kill cannot
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
        assert_eq!(k.reason(), Some(StopReason::Killed));
    }

    #[test]
    fn the_first_stop_reason_wins() {
        let k = KillSwitch::default();
        k.stop(StopReason::TimedOut);
        k.request();
        assert_eq!(k.reason(), Some(StopReason::TimedOut));
    }

    #[test]
    fn abandoning_overrides_and_sticks() {
        let k = KillSwitch::default();
        k.request();
        k.stop(StopReason::Abandoned);
        assert_eq!(k.reason(), Some(StopReason::Abandoned));
        k.stop(StopReason::TimedOut);
        k.request();
        assert_eq!(k.reason(), Some(StopReason::Abandoned));
    }

    #[tokio::test]
    async fn stop_wakes_in_process_runners() {
        let k = std::sync::Arc::new(KillSwitch::default());
        let waiter = tokio::spawn({
            let k = k.clone();
            async move { k.stopped().await }
        });
        k.request();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("stopped() resolves")
            .unwrap();
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
