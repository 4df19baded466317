//! Work directories of script tasks: `data_dir/work/<n>`, one per task running at once,
//! emptied when its task ends and then given to a later task. Creating and removing a
//! directory and a script per task costs more than a short task's whole run on ext4 without
//! a journal (each create scans the inodes removed in the last minutes); so the directory
//! stays, and so does the script file, rewritten in place by the next task.
//!
//! A tenant's task gets its directory handed over (owner; its script too). Such a directory
//! is removed when the task ends, not used again: what the tenant set on it (a default ACL)
//! or left running could reach the next task's files. A directory is kept only while the
//! worker's own tasks use it, and of its files only a script that is a plain file of the
//! worker's, with no other link and no access for others.

use super::process::{PYTHON_SCRIPT, SHELL_SCRIPT};
use super::reuse::Reuse;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tracing::warn;

/// Script file names kept between tasks.
const SCRIPTS: [&str; 2] = [SHELL_SCRIPT, PYTHON_SCRIPT];

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
        loop {
            let n = match self.free.take() {
                Ok(dir) => return Ok(dir),
                Err(n) => n,
            };
            let dir = self.root.join(n.to_string());
            // Its task's alone (or its tenant's, once handed over).
            let created = fs::DirBuilder::new().mode(0o700).create(&dir);
            match created {
                Ok(()) => return Ok(dir),
                // Someone else's: on to the next number (leftovers of an earlier run of the
                // worker are cleared when it starts, see `clear`).
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    warn!(path = %dir.display(), "work directory already there; not using it");
                }
                Err(e) => {
                    return Err(format!(
                        "cannot create work directory {}: {e}",
                        dir.display()
                    ));
                }
            }
        }
    }

    /// Empties the directory of a task that ended and keeps it for a later one, or removes
    /// it (a tenant had it); call it on a blocking thread: a task may leave much behind.
    pub(crate) fn give_back(&self, dir: PathBuf) {
        match tidy(&dir) {
            Ok(true) => self.free.put(dir),
            Ok(false) => {}
            Err(e) => {
                warn!(path = %dir.display(), error = %e, "cannot empty a task work directory; not using it again")
            }
        }
    }
}

/// Removes what the worker's earlier runs left in `root` (their tasks' processes were
/// killed before, see [`super::kill_leftovers`]).
pub(crate) fn clear(root: &Path) -> io::Result<()> {
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            fs::remove_dir_all(entry.path())?;
        } else {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Empties `dir` but for a script of the worker's own; true if it can serve again, false
/// if it was removed because a tenant had it.
fn tidy(dir: &Path) -> io::Result<bool> {
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let meta = fs::symlink_metadata(dir)?;
    if meta.uid() != uid || meta.gid() != gid {
        // Out of the tenant's reach before it is removed.
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        fs::remove_dir_all(dir)?;
        return Ok(false);
    }
    if meta.mode() & 0o7777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        // Of the entry itself, not what a symlink points to.
        let meta = entry.metadata()?;
        let ours = meta.file_type().is_file()
            && meta.uid() == uid
            && meta.nlink() == 1
            && meta.mode() & 0o077 == 0;
        if ours && SCRIPTS.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        if meta.is_dir() {
            fs::remove_dir_all(entry.path())?;
        } else {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(true)
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

        write_private(&first.join("task.sh"));
        fs::write(first.join("out.csv"), "x").unwrap();
        // Readable by others: not kept.
        fs::write(first.join("task.py"), "print()").unwrap();
        fs::create_dir_all(first.join("tmp/deep")).unwrap();
        let script_inode = fs::metadata(first.join("task.sh")).unwrap().ino();
        scratch.give_back(first.clone());

        let again = scratch.take().unwrap();
        assert_eq!(again, first, "an emptied directory is used again");
        let left: Vec<_> = fs::read_dir(&again)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["task.sh"]);
        assert_eq!(
            fs::metadata(again.join("task.sh")).unwrap().ino(),
            script_inode
        );
    }

    #[test]
    fn a_symlink_named_like_a_script_goes_and_its_target_stays() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(root.path().to_path_buf());
        let dir = scratch.take().unwrap();
        let target = root.path().join("target");
        write_private(&target);
        std::os::unix::fs::symlink(&target, dir.join("task.sh")).unwrap();
        scratch.give_back(dir.clone());
        assert!(fs::symlink_metadata(dir.join("task.sh")).is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "true\n");
    }

    fn write_private(path: &Path) {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"true\n").unwrap();
    }

    #[test]
    fn a_script_with_a_second_link_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(root.path().to_path_buf());
        let dir = scratch.take().unwrap();
        write_private(&dir.join("task.sh"));
        fs::hard_link(dir.join("task.sh"), root.path().join("elsewhere")).unwrap();
        scratch.give_back(dir.clone());
        assert!(!dir.join("task.sh").exists());
        assert!(root.path().join("elsewhere").exists());
    }

    #[test]
    fn leftovers_are_cleared_and_a_taken_number_is_passed_over() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("1/old")).unwrap();
        fs::write(root.path().join("stray"), "").unwrap();
        let scratch = Scratch::new(root.path().to_path_buf());
        assert_eq!(scratch.take().unwrap(), root.path().join("2"));
        clear(root.path()).unwrap();
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0);
    }
}
