//! A small disk of a test's own: a tmpfs of a few MiB mounted on a directory (which needs
//! root, as the test machines and CI run), that the test can fill up and free again.
//! Unmounted (lazily, whatever still has files open on it) when dropped.

use crate::text;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB on `dir` (created if missing; what it held is hidden
    /// until the unmount).
    pub fn mount(dir: &Path, mib: u32) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount must be installed");
        assert!(
            out.status.success(),
            "a small disk needs `mount -t tmpfs` (run the tests as root, as CI does): {}",
            text(&out.stderr)
        );
        SmallDisk {
            dir: dir.to_path_buf(),
        }
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Writes a file until the disk has no byte left.
    pub fn fill(&self) {
        let mut f = std::fs::File::create(self.filler()).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        // Whole chunks, then single bytes: a write that fits part of a chunk is a short
        // write that write_all retries, ending in the error too.
        while f.write_all(&chunk).is_ok() {}
        while f.write_all(&[0]).is_ok() {}
    }

    /// Removes what [`SmallDisk::fill`] wrote.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
    }
}
