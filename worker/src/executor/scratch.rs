//! Work directories of script tasks: `data_dir/work/<n>`, one per task running at once,
//! emptied when its task ends and then given to a later task. Creating and removing a
//! directory and a script per task costs more than a short task's whole run on ext4 without
//! a journal (each create scans the inodes removed in the last minutes); so the directory
//! stays, and so does the script file, rewritten in place by the next task.
//!
//! A tenant's task gets its directory handed over (owner; its script too). When it ends,
//! the directory is the worker's again (owner, mode 0755) before it is emptied, so that a
//! process the task left behind cannot put anything in it for the next task; emptying keeps
//! only a script that is a plain file of the worker's own with no other link.

use super::reuse::Reuse;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tracing::warn;

/// Script file names kept between tasks (see [`super::process::Program`]).
const SCRIPTS: [&str; 2] = ["task.sh", "task.py"];

pub(crate) struct Scratch {
    root: PathBuf,
    /// Emptied directories.
    free: Reuse<PathBuf>,
}

impl Scratch {
    pub(crate) fn new(root: PathBuf) -> Scratch {
        Scratch {
            root,
            free: Reuse::default(),
        }
    }

    /// An empty work directory (but for a script of the worker's from an earlier task).
    pub(crate) fn take(&self) -> Result<PathBuf, String> {
        let n = match self.free.take() {
            Ok(dir) => return Ok(dir),
            Err(n) => n,
        };
        let dir = self.root.join(n.to_string());
        let made = match fs::create_dir(&dir) {
            // Left by a previous run of the worker.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => empty(&dir),
            made => made,
        };
        made.map(|()| dir.clone())
            .map_err(|e| format!("cannot create work directory {}: {e}", dir.display()))
    }

    /// Empties the directory of a task that ended and keeps it for a later one (call it on
    /// a blocking thread: a task may leave much behind). One that cannot be emptied is
    /// not used again.
    pub(crate) fn give_back(&self, dir: PathBuf) {
        match empty(&dir) {
            Ok(()) => self.free.put(dir),
            Err(e) => {
                warn!(path = %dir.display(), error = %e, "cannot empty a task work directory; not using it again")
            }
        }
    }
}

/// Takes `dir` back from a tenant (if it was handed over) and removes what is in it but a
/// script of the worker's own.
fn empty(dir: &Path) -> io::Result<()> {
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let meta = fs::symlink_metadata(dir)?;
    if meta.uid() != uid || meta.gid() != gid {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        // Of the entry itself, not what a symlink points to.
        let meta = entry.metadata()?;
        let ours = meta.file_type().is_file() && meta.uid() == uid && meta.nlink() == 1;
        if ours && SCRIPTS.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        if meta.is_dir() {
            fs::remove_dir_all(entry.path())?;
        } else {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_comes_back_empty_but_for_the_worker_s_script() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(root.path().to_path_buf());
        let first = scratch.take().unwrap();
        let second = scratch.take().unwrap();
        assert_ne!(first, second, "two running tasks share no directory");

        fs::write(first.join("task.sh"), "true\n").unwrap();
        fs::write(first.join("out.csv"), "x").unwrap();
        fs::create_dir_all(first.join("tmp/deep")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", first.join("task.py")).unwrap();
        let script_inode = fs::metadata(first.join("task.sh")).unwrap().ino();
        scratch.give_back(first.clone());

        let again = scratch.take().unwrap();
        assert_eq!(again, first, "an emptied directory is used again");
        let left: Vec<_> = fs::read_dir(&again)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["task.sh"], "a symlink named like a script goes too");
        assert_eq!(
            fs::metadata(again.join("task.sh")).unwrap().ino(),
            script_inode
        );
        assert!(fs::metadata("/etc/passwd").is_ok());
    }

    #[test]
    fn a_script_with_a_second_link_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(root.path().to_path_buf());
        let dir = scratch.take().unwrap();
        fs::write(dir.join("task.sh"), "true\n").unwrap();
        fs::hard_link(dir.join("task.sh"), root.path().join("elsewhere")).unwrap();
        scratch.give_back(dir.clone());
        assert!(!dir.join("task.sh").exists());
        assert!(root.path().join("elsewhere").exists());
    }

    #[test]
    fn a_directory_left_by_a_previous_run_is_emptied_before_use() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("1/old")).unwrap();
        let dir = Scratch::new(root.path().to_path_buf()).take().unwrap();
        assert_eq!(dir, root.path().join("1"));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    }
}
