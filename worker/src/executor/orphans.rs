//! Task processes must not outlive a worker that crashed: its masters run those attempts
//! again elsewhere, so a survivor would be a second copy.
//!
//! Two layers:
//!
//! * every task process gets `PR_SET_PDEATHSIG = SIGKILL` ([`super::launch`]): the kernel
//!   kills the task's direct child (bash, python) when the worker goes;
//! * what the task started in turn (a `sleep`, a `spark-submit`) is not covered by that, so
//!   while a script task runs, its process group is recorded in `data_dir/running/<n>.pgid`,
//!   and the file is emptied when the task ends ([`Records`]). A worker starting on that
//!   data dir finds the records its crashed predecessor left behind and kills those groups
//!   ([`kill_leftovers`]) before it serves.
//!
//! A record is one line: `<pgid> <starttime> <sid> <boot_id> <task>`, where `starttime` is
//! field 22 of `/proc/<pgid>/stat` (clock ticks since boot) of the group leader, `sid` its
//! session, `boot_id` the kernel's boot id (`-` if unreadable) and `task`
//! `<task_instance_id>_<attempt>`. Only `pgid` and `starttime` are required.
//!
//! Process ids are reused, so a recorded group is killed only when it is still the task's:
//!
//! * after a reboot (another boot id) nothing of it can be left: the record is dropped;
//! * if a process with pid `pgid` exists (alive, or a zombie nobody reaped), the group is
//!   the task's exactly when that process started at the recorded `starttime`;
//! * if it does not exist (the usual case after a crash: the leader died of PDEATHSIG and
//!   was reaped, its children live on in the group), the kernel did not reuse the number
//!   while any member of the task's group lived, so surviving members are the task's
//!   unless the whole group died and a new one took the number. Those members are killed
//!   only if every one of them is in the recorded session and started no earlier than the
//!   recorded leader did; a group of a later session is left alone.
//!
//! The window between the task's start and its record being written (a few syscalls) is
//! not covered: a grandchild started in it and surviving a crash in it stays.

use super::kill::kill_group;
use super::reuse::Reuse;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tracing::{info, warn};

/// File name suffix of a process group record.
const SUFFIX: &str = ".pgid";

/// What `/proc/<pid>/stat` says about one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) zombie: bool,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    /// Field 22: when the process started, in clock ticks since boot.
    pub(crate) starttime: u64,
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): field n is fields[n - 3].
    Some(ProcStat {
        zombie: fields.first()? == &"Z",
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        starttime: fields.get(19)?.parse().ok()?,
    })
}

/// The stat of process `pid`; None if there is no such process.
pub(crate) fn proc_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The kernel's boot id (empty if it cannot be read).
fn boot_id() -> &'static str {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    BOOT_ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}

/// A process group record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) pgid: i32,
    pub(crate) starttime: u64,
    pub(crate) session: Option<i32>,
    pub(crate) boot_id: Option<String>,
    /// `<task_instance_id>_<attempt>`.
    pub(crate) task: Option<String>,
}

impl Record {
    pub(crate) fn parse(text: &str) -> Option<Record> {
        let mut fields = text.split_whitespace();
        let pgid: i32 = fields.next()?.parse().ok()?;
        let starttime = fields.next()?.parse().ok()?;
        if pgid <= 1 {
            return None;
        }
        Some(Record {
            pgid,
            starttime,
            session: fields.next().and_then(|s| s.parse().ok()),
            boot_id: fields.next().filter(|b| *b != "-").map(str::to_string),
            task: fields.next().map(str::to_string),
        })
    }
}

/// The process group records of the script tasks running here: one file per task running
/// at once, `<n>.pgid`, written in place by a later task once emptied by the one before.
/// Creating and removing a file per task costs more than a short task's whole run on ext4
/// without a journal (each create scans the inodes removed in the last minutes).
pub(crate) struct Records {
    dir: PathBuf,
    /// Emptied record files.
    free: Reuse<RecordFile>,
}

/// The file of one running task's record.
pub(crate) struct RecordFile {
    file: File,
    path: PathBuf,
}

impl Records {
    pub(crate) fn new(dir: PathBuf) -> Records {
        Records {
            dir,
            free: Reuse::default(),
        }
    }

    /// Records a task's process group, just started as `pgid`. Returns the file to pass to
    /// [`Records::forget`] once the group is gone; None (after a warning) if it could not
    /// be written, in which case the task runs unrecorded.
    pub(crate) fn record(
        &self,
        task_instance_id: i64,
        attempt: i32,
        pgid: i32,
    ) -> Option<RecordFile> {
        // The leader is our unreaped child, so its stat is there even if it already exited.
        let Some(stat) = proc_stat(pgid) else {
            warn!(
                pgid,
                "cannot read the task process's start time; not recording it"
            );
            return None;
        };
        let record = self.take().map_err(|(path, e)| {
            warn!(path = %path.display(), error = %e, "cannot create a process group record file");
        });
        let record = record.ok()?;
        // `-` holds the place of a boot id that cannot be read.
        let boot = Some(boot_id()).filter(|b| !b.is_empty()).unwrap_or("-");
        let line = format!(
            "{pgid} {} {} {boot} {task_instance_id}_{attempt}\n",
            stat.starttime, stat.session,
        );
        // One small write into an empty file; no fsync: the record matters after a crash
        // of the worker, not of the machine (a reboot leaves no processes behind).
        match record.file.write_all_at(line.as_bytes(), 0) {
            Ok(()) => Some(record),
            Err(e) => {
                warn!(path = %record.path.display(), error = %e, "cannot record the task's process group");
                self.forget(record);
                None
            }
        }
    }

    /// Empties a record once its group was killed and reaped, for a later task.
    pub(crate) fn forget(&self, record: RecordFile) {
        match record.file.set_len(0) {
            Ok(()) => self.free.put(record),
            // Not used again: at the next start the record is found and judged.
            Err(e) => {
                warn!(path = %record.path.display(), error = %e, "cannot empty the task's process group record")
            }
        }
    }

    /// An empty record file: a free one, else a new one.
    fn take(&self) -> Result<RecordFile, (PathBuf, std::io::Error)> {
        let n = match self.free.take() {
            Ok(record) => return Ok(record),
            Err(n) => n,
        };
        let path = self.dir.join(format!("{n}{SUFFIX}"));
        let file = File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path);
        match file {
            Ok(file) => Ok(RecordFile { file, path }),
            Err(e) => Err((path, e)),
        }
    }
}

/// What to do with one record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The group is the task's and still has `processes` processes: kill it.
    Kill { processes: usize },
    /// Nothing of the group is left.
    Gone,
    /// The id now belongs to something else; leave it alone.
    Reused(&'static str),
}

/// Decides about one record. `leader` is the stat of pid `pgid` (None if there is no such
/// process) and `members` the stats of every process whose group is `pgid`.
pub(crate) fn judge(
    rec: &Record,
    current_boot: &str,
    leader: Option<ProcStat>,
    members: &[ProcStat],
) -> Verdict {
    if let Some(boot) = &rec.boot_id
        && !current_boot.is_empty()
        && boot != current_boot
    {
        return Verdict::Gone;
    }
    let living = members.iter().filter(|m| !m.zombie).count();
    match leader {
        Some(leader) if leader.starttime != rec.starttime => {
            Verdict::Reused("another process has the group's id now")
        }
        Some(_) if living == 0 => Verdict::Gone,
        Some(_) => Verdict::Kill { processes: living },
        None if living == 0 => Verdict::Gone,
        None => match rec.session {
            None => Verdict::Reused("leader gone and no session recorded"),
            Some(sid)
                if members
                    .iter()
                    .all(|m| m.session == sid && m.starttime >= rec.starttime) =>
            {
                Verdict::Kill { processes: living }
            }
            Some(_) => Verdict::Reused("the group's processes are not the task's"),
        },
    }
}

/// Every process of group `pgid`, from a scan of `/proc`.
fn group_members(pgid: i32) -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .filter(|s| s.pgrp == pgid)
        .collect()
}

/// Kills the process groups recorded in `dir` by a previous run of this worker and empties
/// the folder. Returns the number of groups killed.
pub(crate) fn kill_leftovers(dir: &Path) -> std::io::Result<usize> {
    let mut killed = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path).ok();
        // An emptied record: its task ended.
        if name.ends_with(SUFFIX) && text.as_deref().is_none_or(|t| !t.is_empty()) {
            match text.as_deref().and_then(Record::parse) {
                None => warn!(file = %name, "unreadable process group record; removing it"),
                Some(rec) => {
                    let task = rec.task.as_deref().unwrap_or(&name);
                    let verdict = judge(
                        &rec,
                        boot_id(),
                        proc_stat(rec.pgid),
                        &group_members(rec.pgid),
                    );
                    match verdict {
                        Verdict::Kill { processes } => {
                            kill_group(rec.pgid);
                            killed += 1;
                            warn!(
                                task = %task,
                                pgid = rec.pgid,
                                processes,
                                "killed processes left over by a previous run of this worker"
                            );
                        }
                        Verdict::Gone => {
                            info!(task = %task, pgid = rec.pgid, "task processes of a previous run already gone")
                        }
                        Verdict::Reused(why) => {
                            info!(task = %task, pgid = rec.pgid, reason = why, "process group id reused; not killing it")
                        }
                    }
                }
            }
        }
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if let Err(e) = removed {
            warn!(path = %path.display(), error = %e, "cannot remove a leftover record");
        }
    }
    Ok(killed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pgrp: i32, session: i32, starttime: u64) -> ProcStat {
        ProcStat {
            zombie: false,
            pgrp,
            session,
            starttime,
        }
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let text = "4242 (we ird) name)) S 1 4242 4200 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
        assert_eq!(parse_stat(text), Some(stat(4242, 4200, 987654)));
        let z = "7 (sh) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(parse_stat(z).unwrap().zombie);
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn our_own_stat_is_readable() {
        let me = std::process::id() as i32;
        let s = proc_stat(me).expect("own stat");
        assert!(s.starttime > 0);
        // SAFETY: getpgrp/getsid have no preconditions.
        assert_eq!(s.pgrp, unsafe { libc::getpgrp() });
        assert_eq!(s.session, unsafe { libc::getsid(0) });
    }

    #[test]
    fn records_parse_with_optional_fields() {
        assert_eq!(
            Record::parse("100 555\n"),
            Some(Record {
                pgid: 100,
                starttime: 555,
                session: None,
                boot_id: None,
                task: None,
            })
        );
        let unknown_boot = Record::parse("100 555 90 - 7_2").unwrap();
        assert_eq!(unknown_boot.boot_id, None);
        assert_eq!(unknown_boot.task.as_deref(), Some("7_2"));
        let full = Record::parse("100 555 90 abc-def 7_2").unwrap();
        assert_eq!(full.session, Some(90));
        assert_eq!(full.boot_id.as_deref(), Some("abc-def"));
        assert_eq!(full.task.as_deref(), Some("7_2"));
        for bad in ["", "100", "x 5", "100 y", "1 5", "-3 5", "0 5"] {
            assert_eq!(Record::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn verdicts() {
        let rec = Record {
            pgid: 100,
            starttime: 500,
            session: Some(90),
            boot_id: Some("boot".into()),
            task: None,
        };
        let leader = stat(100, 90, 500);
        let child = stat(100, 90, 510);
        // The leader is the task's: kill the group.
        assert_eq!(
            judge(&rec, "boot", Some(leader), &[leader, child]),
            Verdict::Kill { processes: 2 }
        );
        // Another boot: nothing is left of it.
        assert_eq!(judge(&rec, "other", Some(leader), &[leader]), Verdict::Gone);
        // A process with the same id but another start time: reused.
        let stranger = stat(100, 90, 900);
        assert!(matches!(
            judge(&rec, "boot", Some(stranger), &[stranger]),
            Verdict::Reused(_)
        ));
        // Leader gone (died of PDEATHSIG), its child lives on in the group: kill.
        assert_eq!(
            judge(&rec, "boot", None, &[child]),
            Verdict::Kill { processes: 1 }
        );
        // ... unless the members are of another session or older than the leader was.
        assert!(matches!(
            judge(&rec, "boot", None, &[stat(100, 91, 510)]),
            Verdict::Reused(_)
        ));
        assert!(matches!(
            judge(&rec, "boot", None, &[stat(100, 90, 499)]),
            Verdict::Reused(_)
        ));
        // ... and without a recorded session nothing is killed.
        let bare = Record {
            session: None,
            boot_id: None,
            ..rec.clone()
        };
        assert!(matches!(
            judge(&bare, "boot", None, &[child]),
            Verdict::Reused(_)
        ));
        // Only zombies (or nothing) left: gone.
        let zombie = ProcStat {
            zombie: true,
            ..leader
        };
        assert_eq!(judge(&rec, "boot", Some(zombie), &[zombie]), Verdict::Gone);
        assert_eq!(judge(&rec, "boot", None, &[]), Verdict::Gone);
    }

    #[test]
    fn record_files_are_written_emptied_and_used_again() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path().to_path_buf());
        let me = std::process::id() as i32;
        let first = records.record(7, 2, me).expect("recorded");
        let second = records.record(8, 1, me).expect("recorded");
        assert_ne!(first.path, second.path, "one file per running task");
        let rec = Record::parse(&std::fs::read_to_string(&first.path).unwrap()).unwrap();
        let own = proc_stat(me).unwrap();
        assert_eq!(rec.pgid, me);
        assert_eq!(rec.starttime, own.starttime);
        assert_eq!(rec.session, Some(own.session));
        assert_eq!(rec.boot_id.as_deref(), Some(boot_id()));
        assert_eq!(rec.task.as_deref(), Some("7_2"));

        let path = first.path.clone();
        records.forget(first);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        let third = records.record(9, 3, me).expect("recorded");
        assert_eq!(third.path, path, "an emptied file is used again");
        let rec = Record::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(rec.task.as_deref(), Some("9_3"));
    }

    #[test]
    fn emptied_records_are_cleared_at_start_without_killing_anything() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path().to_path_buf());
        let me = std::process::id() as i32;
        let record = records.record(7, 2, me).expect("recorded");
        records.forget(record);
        assert_eq!(kill_leftovers(dir.path()).unwrap(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
