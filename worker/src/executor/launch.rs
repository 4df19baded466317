//! Starting a task's process without copying the worker's address space.
//!
//! `fork` copies the page tables of the whole worker (in `shoal standalone` the master's
//! and the API's memory too) and marks every page copy-on-write, so a task start costs time
//! in proportion to the worker's size, and the worker's threads take page faults after it.
//! std's `Command` avoids that with `posix_spawn` (`clone(CLONE_VM | CLONE_VFORK)`) only
//! when nothing runs between fork and exec, and a task needs two such steps: its tenant's
//! ids and `PR_SET_PDEATHSIG`. So this module does what glibc's `posix_spawn` does, with
//! those steps: the child runs on a stack of its own inside the worker's memory while the
//! calling thread waits for it to exec, and it makes only system calls until then (no
//! allocation, no locks). bench/history/README.md has the measurements.
//!
//! The process is waited for through a pidfd, which becomes readable when it exits.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString, c_char, c_int, c_void};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::unix::AsyncFd;

/// The child's stack: it only makes a handful of system calls.
const CHILD_STACK: usize = 64 * 1024;

/// A process to start: the program, its arguments and environment, where it runs.
pub(crate) struct Launch<'a> {
    /// A path, or a name looked up in the worker's `PATH`.
    program: &'a OsStr,
    args: Vec<&'a OsStr>,
    /// What the task gets of the worker's environment.
    base: &'a TaskEnvironment,
    /// Added to (or replacing entries of) `base`.
    env: Vec<(&'a OsStr, &'a OsStr)>,
    cwd: &'a Path,
    /// Uid and gid to run as (a tenant), without supplementary groups.
    ids: Option<(u32, u32)>,
}

impl<'a> Launch<'a> {
    pub(crate) fn new(program: &'a OsStr, cwd: &'a Path, base: &'a TaskEnvironment) -> Self {
        Launch {
            program,
            args: Vec::new(),
            base,
            env: Vec::new(),
            cwd,
            ids: None,
        }
    }

    pub(crate) fn arg(&mut self, arg: &'a OsStr) -> &mut Self {
        self.args.push(arg);
        self
    }

    pub(crate) fn env(&mut self, key: &'a OsStr, value: &'a OsStr) -> &mut Self {
        self.env.push((key, value));
        self
    }

    pub(crate) fn ids(&mut self, uid: u32, gid: u32) -> &mut Self {
        self.ids = Some((uid, gid));
        self
    }

    /// Starts the process in a process group of its own, stdin `/dev/null`, stdout and
    /// stderr `output`, killed by the kernel when the calling thread ends (which for the
    /// worker's runtime threads is when the worker dies). Returns once it has exec'd.
    ///
    /// The death signal follows the *thread*: call this from a thread that lives as long
    /// as the worker, as the runtime's worker threads do, never from `spawn_blocking` or
    /// `block_in_place`, whose threads end when idle and would take the task with them.
    pub(crate) fn start(&self, output: &OwnedFd) -> io::Result<TaskChild> {
        let paths = candidates(self.program)
            .iter()
            .map(|p| c_string(p.as_os_str(), "program"))
            .collect::<io::Result<Vec<_>>>()?;
        if paths.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "not found in the worker's PATH",
            ));
        }
        let mut argv = vec![c_string(self.program, "program")?];
        for arg in &self.args {
            argv.push(c_string(arg, "argument")?);
        }
        let own_env = self.own_environment()?;
        let cwd = c_string(self.cwd.as_os_str(), "working directory")?;
        let path_ptrs = null_terminated(&paths);
        let argv_ptrs = null_terminated(&argv);
        let env_ptrs = environment(self.base, &own_env);
        let out = output.as_raw_fd();
        let child = Child {
            programs: path_ptrs.as_ptr(),
            argv: argv_ptrs.as_ptr(),
            envp: env_ptrs.as_ptr(),
            cwd: cwd.as_ptr(),
            stdio: [dev_null()?, out, out],
            // SAFETY: getuid has no preconditions.
            ids: self.ids.map(|(uid, gid)| Ids {
                uid,
                gid,
                // Only root may (and must) drop its supplementary groups, as std does.
                drop_groups: unsafe { libc::getuid() } == 0,
            }),
            worker: std::process::id() as libc::pid_t,
            failed_step: AtomicI32::new(0),
            errno: AtomicI32::new(0),
        };
        let pid = clone_vfork(&child)?;
        match Step::from(child.failed_step.load(Ordering::Acquire)) {
            None => TaskChild::new(pid),
            Some(step) => {
                let errno = child.errno.load(Ordering::Acquire);
                // The child exited: reap it.
                let mut status = 0;
                // SAFETY: waits for our own child, which has exited.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                let e = io::Error::from_raw_os_error(errno);
                Err(io::Error::new(e.kind(), format!("{}: {e}", step.name())))
            }
        }
    }

    /// This launch's variables as `KEY=VALUE`, by name (a later one replaces an earlier).
    fn own_environment(&self) -> io::Result<BTreeMap<&'a OsStr, CString>> {
        let mut own = BTreeMap::new();
        for (key, value) in &self.env {
            own.insert(*key, env_entry(key, value)?);
        }
        Ok(own)
    }
}

/// The environment the child gets: `base`, less what `own` replaces, then `own`.
fn environment<'e>(
    base: &'e TaskEnvironment,
    own: &'e BTreeMap<&OsStr, CString>,
) -> Vec<*const c_char> {
    base.entries
        .iter()
        .filter(|(key, _)| !own.contains_key(key.as_os_str()))
        .map(|(_, entry)| entry.as_ptr())
        .chain(own.values().map(|entry| entry.as_ptr()))
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The variables of the worker's environment every task gets, besides its own: what
/// programs need to find each other, their user's files and language. Nothing else of the
/// worker's reaches a task (not shoal's `SHOAL_*` token and keys, nor the credentials its
/// service manager or cloud gave it), as systemd and CI runners start a job from nothing.
/// `LC_*` (every locale category) passes too.
pub const PASSED: [&str; 10] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
];

/// The part of a task's environment taken from the worker's: [`PASSED`], and the names an
/// operator passes on too (`--task-env`). Read once, when the worker starts: nothing in
/// the worker changes its environment, and reading it for every task start is work on the
/// hot path.
pub(crate) struct TaskEnvironment {
    entries: BTreeMap<OsString, CString>,
}

impl TaskEnvironment {
    /// The worker's own variables a task gets; `extra` are further names to pass on. A
    /// name of shoal's own (`SHOAL_...`) is refused: those hold its token and keys.
    pub(crate) fn of_worker(extra: &[String]) -> Result<TaskEnvironment, String> {
        if let Some(name) = extra.iter().find(|n| n.starts_with("SHOAL_")) {
            return Err(format!(
                "--task-env {name}: shoal's own variables (SHOAL_...) never reach tasks; \
                 give the task what it needs as a parameter or a project secret"
            ));
        }
        let passed = |key: &str| {
            PASSED.contains(&key) || key.starts_with("LC_") || extra.iter().any(|n| n == key)
        };
        let entries = std::env::vars_os()
            .filter(|(key, _)| key.to_str().is_some_and(passed))
            .filter_map(|(key, value)| Some((key.clone(), env_entry(&key, &value).ok()?)))
            .collect();
        Ok(TaskEnvironment { entries })
    }

    /// The variables as (name, value), for a helper program started with std's `Command`.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.entries.iter().map(|(key, entry)| {
            let value = &entry.as_bytes()[key.len() + 1..];
            (key.as_os_str(), OsStr::from_bytes(value))
        })
    }
}

/// `KEY=VALUE`; an error naming the variable if either holds a NUL byte.
fn env_entry(key: &OsStr, value: &OsStr) -> io::Result<CString> {
    let mut entry = key.as_bytes().to_vec();
    entry.push(b'=');
    entry.extend_from_slice(value.as_bytes());
    CString::new(entry).map_err(|_| {
        invalid(format!(
            "environment variable {} holds a NUL byte",
            key.to_string_lossy()
        ))
    })
}

/// Where `program` may be: itself if it holds a `/`, else each file of that name in the
/// worker's `PATH`, in order. The child tries them in turn, as the shell does, so that one a
/// tenant may not run is passed over.
pub(crate) fn candidates(program: &OsStr) -> Vec<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return vec![PathBuf::from(program)];
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .filter(|candidate| candidate.is_file())
        .collect()
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn c_string(s: &OsStr, what: &str) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        invalid(format!(
            "the {what} {} holds a NUL byte",
            s.to_string_lossy()
        ))
    })
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// `/dev/null`, opened once (close-on-exec; each child dup2s it to its stdin).
fn dev_null() -> io::Result<RawFd> {
    static NULL: OnceLock<File> = OnceLock::new();
    if let Some(f) = NULL.get() {
        return Ok(f.as_raw_fd());
    }
    let file = File::open("/dev/null")?;
    Ok(NULL.get_or_init(|| file).as_raw_fd())
}

/// What the child does before exec, in order; the one that failed is reported.
#[derive(Clone, Copy)]
#[repr(i32)]
enum Step {
    Stdio = 1,
    Ids,
    Chdir,
    ProcessGroup,
    DeathSignal,
    Exec,
}

impl Step {
    fn from(code: i32) -> Option<Step> {
        [
            Step::Stdio,
            Step::Ids,
            Step::Chdir,
            Step::ProcessGroup,
            Step::DeathSignal,
            Step::Exec,
        ]
        .into_iter()
        .find(|s| *s as i32 == code)
    }

    fn name(self) -> &'static str {
        match self {
            Step::Stdio => "cannot set up stdin/stdout/stderr",
            Step::Ids => "cannot take the tenant's user and group ids",
            Step::Chdir => "cannot enter the work directory",
            Step::ProcessGroup => "cannot make a process group",
            Step::DeathSignal => "cannot tie the process to the worker's life",
            Step::Exec => "cannot execute the program",
        }
    }
}

/// Everything the child reads, prepared by the parent; and where it reports a failure.
struct Child {
    /// Paths to exec, tried in turn.
    programs: *const *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdio: [RawFd; 3],
    ids: Option<Ids>,
    worker: libc::pid_t,
    failed_step: AtomicI32,
    errno: AtomicI32,
}

struct Ids {
    uid: u32,
    gid: u32,
    drop_groups: bool,
}

/// Clones a child that shares the calling thread's memory and runs [`child_main`] on a
/// stack of its own; the call returns when the child has exec'd or exited.
fn clone_vfork(child: &Child) -> io::Result<libc::pid_t> {
    let mut stack = vec![0u8; CHILD_STACK];
    // SAFETY: the stack outlives the child's use of it (CLONE_VFORK suspends this thread
    // until the child execs or exits); its top is aligned down to 16 bytes as the ABI asks.
    // All signals are blocked around the clone so that no handler of the worker runs in the
    // child before it reset them; the mask is restored in both.
    unsafe {
        let top = stack.as_mut_ptr().add(CHILD_STACK);
        let top = top.sub(top as usize % 16);
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (child as *const Child).cast_mut().cast(),
        );
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 { Err(error) } else { Ok(pid) }
    }
}

/// The child between clone and exec: system calls only, each checked; a failure is written
/// into [`Child`] (shared memory) before the child exits with 127.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Child` the parent keeps alive while it is suspended; every
    // pointer in it is to memory the parent prepared and does not touch meanwhile. The
    // calls are async-signal-safe and allocate nothing.
    unsafe {
        let child = &*(arg as *const Child);
        let fail = |step: Step| -> c_int {
            child
                .errno
                .store(*libc::__errno_location(), Ordering::Release);
            child.failed_step.store(step as i32, Ordering::Release);
            libc::_exit(127)
        };
        for (target, fd) in child.stdio.into_iter().enumerate() {
            let target = target as c_int;
            // dup2 onto itself would keep close-on-exec set.
            let ok = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(fd, target) == target
            };
            if !ok {
                return fail(Step::Stdio);
            }
        }
        if let Some(ids) = &child.ids {
            // Raw system calls: glibc's wrappers would try to change the ids of every
            // thread of the worker, whose memory this child shares.
            let no_groups = std::ptr::null::<libc::gid_t>();
            if (ids.drop_groups && libc::syscall(libc::SYS_setgroups, 0, no_groups) != 0)
                || libc::syscall(libc::SYS_setgid, ids.gid) != 0
                || libc::syscall(libc::SYS_setuid, ids.uid) != 0
            {
                return fail(Step::Ids);
            }
        }
        if libc::chdir(child.cwd) != 0 {
            return fail(Step::Chdir);
        }
        if libc::setpgid(0, 0) != 0 {
            return fail(Step::ProcessGroup);
        }
        // After the ids: changing them clears the death signal.
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) != 0
        {
            return fail(Step::DeathSignal);
        }
        // The worker died before the prctl: the signal will never come.
        if libc::getppid() != child.worker {
            *libc::__errno_location() = libc::ESRCH;
            return fail(Step::DeathSignal);
        }
        // Handlers of the worker are code in its memory: back to the defaults (exec would
        // do it too, but a signal may come between the unblocking and the exec). SIGPIPE,
        // which Rust ignores, is a task's default too, as std's Command makes it.
        let mut action: libc::sigaction = std::mem::zeroed();
        for signal in 1..=libc::SIGRTMAX() {
            if libc::sigaction(signal, std::ptr::null(), &mut action) == 0
                && (action.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
                && action.sa_sigaction != libc::SIG_DFL
            {
                action.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // As execvp: on to the next path where this one is missing or may not be run, and
        // "permission denied" if any was there but could not be run.
        let mut denied = false;
        let mut program = child.programs;
        while !(*program).is_null() {
            libc::execve(*program, child.argv, child.envp);
            match *libc::__errno_location() {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR => {}
                _ => return fail(Step::Exec),
            }
            program = program.add(1);
        }
        if denied {
            *libc::__errno_location() = libc::EACCES;
        }
        fail(Step::Exec)
    }
}

/// A started task process, waited for through its pidfd. Dropped before it was waited
/// for, it is reaped by a thread of its own once it exits.
pub(crate) struct TaskChild {
    pid: libc::pid_t,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
}

impl TaskChild {
    fn new(pid: libc::pid_t) -> io::Result<TaskChild> {
        let pidfd = pidfd(pid).inspect_err(|_| {
            // SAFETY: our own child, which cannot be waited for without its pidfd: stop it.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        })?;
        Ok(TaskChild {
            pid,
            pidfd,
            status: None,
        })
    }

    pub(crate) fn id(&self) -> i32 {
        self.pid
    }

    /// Waits until the process has exited, leaving it unreaped: until [`TaskChild::reap`]
    /// its id, which is its process group's too, cannot be taken by another process.
    /// Cancellation-safe.
    pub(crate) async fn exited(&mut self) -> io::Result<()> {
        while !self.has_exited()? {
            self.pidfd.readable().await?.clear_ready();
        }
        Ok(())
    }

    fn has_exited(&self) -> io::Result<bool> {
        if self.status.is_some() {
            return Ok(true);
        }
        // SAFETY: a zeroed siginfo is valid; waitid fills it in or leaves si_pid 0.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            if libc::waitid(libc::P_PID, self.pid as libc::id_t, &mut info, flags) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(info.si_pid() != 0)
        }
    }

    /// Reaps the process once it has [exited](TaskChild::exited): its exit status.
    pub(crate) fn reap(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let mut raw = 0;
        // SAFETY: waits for our own child.
        if unsafe { libc::waitpid(self.pid, &mut raw, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        Ok(status)
    }
}

/// A pidfd of `pid`, registered with the runtime (it reads as ready once `pid` exits).
fn pidfd(pid: libc::pid_t) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("pidfd_open: {e}")));
    }
    // SAFETY: a new descriptor, owned from here on; the AsyncFd owns it for its lifetime.
    unsafe {
        let fd = <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as RawFd);
        Ok(AsyncFd::register_with_interest(
            fd,
            tokio::io::Interest::READABLE,
        )?)
    }
}

impl Drop for TaskChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        if matches!(self.has_exited(), Ok(true)) {
            let _ = self.reap();
        } else {
            let pid = self.pid;
            // SAFETY: a blocking wait for our own child, on a thread of its own.
            let _ = std::thread::Builder::new()
                .name("reap-task".into())
                .spawn(move || unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (File, OwnedFd) {
        let (r, w) = std::io::pipe().unwrap();
        (File::from(OwnedFd::from(r)), OwnedFd::from(w))
    }

    fn output(mut reader: File) -> String {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut reader, &mut s).unwrap();
        s
    }

    #[tokio::test]
    async fn a_started_process_gets_its_args_env_cwd_stdin_and_own_group() {
        let dir = tempfile::tempdir().unwrap();
        let (reader, writer) = pipe();
        let base = TaskEnvironment::of_worker(&[]).unwrap();
        let mut launch = Launch::new(OsStr::new("sh"), dir.path(), &base);
        launch
            .arg(OsStr::new("-c"))
            .arg(OsStr::new(
                "echo \"$0|$X|$(pwd)|$(cut -d' ' -f5 /proc/$$/stat)|$$|$PATH\" >&2; \
                 grep SigIgn /proc/$$/status | cut -f2; read line; echo \"stdin:$line\"; exit 3",
            ))
            .arg(OsStr::new("first"))
            .env(OsStr::new("X"), OsStr::new("z"))
            .env(OsStr::new("X"), OsStr::new("y"))
            // One of the worker's own, replaced.
            .env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
        let mut child = launch.start(&writer).unwrap();
        drop(writer);
        child.exited().await.unwrap();
        let pid = child.id();
        assert!(
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok(),
            "unreaped until reap"
        );
        let status = child.reap().unwrap();
        assert_eq!(status.code(), Some(3));
        let text = output(reader);
        let lines: Vec<&str> = text.lines().collect();
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(
            lines[0],
            format!("first|y|{}|{pid}|{pid}|/usr/bin:/bin", cwd.display())
        );
        // Rust ignores SIGPIPE; a task must not inherit that.
        let ignored = u64::from_str_radix(lines[1], 16).unwrap();
        assert_eq!(
            ignored & (1 << (libc::SIGPIPE - 1)),
            0,
            "SigIgn {}",
            lines[1]
        );
        assert_eq!(lines[2], "stdin:", "stdin is /dev/null");
    }

    #[test]
    fn a_program_that_cannot_run_is_an_error_naming_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let (_, writer) = pipe();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let base = TaskEnvironment::of_worker(&[]).unwrap();
        let missing = Launch::new(OsStr::new("/nonexistent/bin"), dir.path(), &base)
            .start(&writer)
            .err()
            .unwrap();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert!(
            missing
                .to_string()
                .starts_with("cannot execute the program"),
            "{missing}"
        );
        let gone = dir.path().join("gone");
        let no_dir = Launch::new(OsStr::new("/bin/true"), &gone, &base)
            .start(&writer)
            .err()
            .unwrap();
        assert!(
            no_dir
                .to_string()
                .starts_with("cannot enter the work directory"),
            "{no_dir}"
        );
        let nul = Launch::new(OsStr::new("/bin/true"), dir.path(), &base)
            .env(OsStr::new("A"), OsStr::from_bytes(b"x\0y"))
            .start(&writer)
            .err()
            .unwrap();
        assert_eq!(nul.to_string(), "environment variable A holds a NUL byte");
    }

    #[test]
    fn shoal_s_own_variables_cannot_be_passed_on_to_tasks() {
        let e = TaskEnvironment::of_worker(&["JAVA_HOME".into(), "SHOAL_TOKEN".into()])
            .err()
            .unwrap();
        assert!(e.starts_with("--task-env SHOAL_TOKEN: shoal's own"), "{e}");
    }
}
