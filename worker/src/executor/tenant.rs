//! Tenants: the OS user a workflow's shell and python tasks run as (DolphinScheduler's
//! tenant). The worker, running as root, starts the task's process with the tenant's uid
//! and gid (and no supplementary groups), its name and home in the environment, and the
//! task's work directory handed over to it.

use std::ffi::{CStr, CString};

/// An OS user a task runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tenant {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) home: String,
}

/// Which OS user a worker runs a script task as.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tenants {
    /// The tenant of tasks whose workflow names none (`--default-tenant`).
    pub(crate) default: Option<String>,
    /// Whether a task may run as the worker's own OS user (`--single-team`, or a
    /// standalone without auth): every user of this shoal may act as its admin.
    pub(crate) single_team: bool,
    /// Whether a tenant may be root (`--allow-root-tenant`).
    pub(crate) allow_root: bool,
}

impl Tenants {
    /// The tenant a task of a workflow naming `named` (empty: none) runs as; none: the
    /// worker's own user. Unless the worker serves a single team, a task never runs as the
    /// worker's own user, which can read the data dir, the server's keys and every other
    /// task's files. The error says what is wrong and how to fix it.
    pub(crate) fn of_task(&self, named: &str) -> Result<Option<Tenant>, String> {
        let name = Some(named).filter(|n| !n.is_empty());
        let Some(name) = name.or(self.default.as_deref()) else {
            if self.single_team {
                return Ok(None);
            }
            return Err(NO_TENANT.to_string());
        };
        let tenant = lookup(name, self.allow_root)?;
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        let root_allowed = tenant.uid == 0 && self.allow_root;
        if !self.single_team && tenant.uid == me && !root_allowed {
            return Err(format!(
                "tenant '{name}' is the OS user this worker runs as, which can read its data \
                 dir and keys: give the workflow (or --default-tenant) an unprivileged user of \
                 its own, or start the worker with --single-team if every user of this shoal \
                 may act as its admin"
            ));
        }
        Ok(Some(tenant))
    }
}

/// Why a task without a tenant does not run on a worker shared by several teams.
const NO_TENANT: &str = "the workflow names no tenant, and this worker does not run tasks as \
     its own OS user (which can read its data dir and the server's keys) since its users do \
     not all act as admins: give the workflow a `tenant:` (an unprivileged OS user), start \
     the worker with --default-tenant USER, or with --single-team if every user of this \
     shoal may act as its admin";

/// The tenant `name` on this machine, if this worker may run tasks as it. The error says
/// what is wrong and how to fix it.
fn lookup(name: &str, allow_root: bool) -> Result<Tenant, String> {
    let tenant = user(name)?.ok_or_else(|| {
        format!(
            "tenant '{name}' is not an OS user on this worker: create it on every worker of \
             the group (useradd {name}) or change the workflow's tenant"
        )
    })?;
    if tenant.uid == 0 && !allow_root {
        return Err(format!(
            "tenant '{name}' is root: this worker does not run tasks as root (start it with \
             --allow-root-tenant to allow it)"
        ));
    }
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    if me != 0 && me != tenant.uid {
        return Err(format!(
            "this worker runs as uid {me}, not root, so it cannot run tasks as tenant \
             '{name}': run the worker as root, or drop the workflow's tenant"
        ));
    }
    Ok(tenant)
}

/// The passwd entry of `name`, if there is one.
fn user(name: &str) -> Result<Option<Tenant>, String> {
    let cname = CString::new(name).map_err(|_| format!("tenant '{name}' contains a NUL byte"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: `pwd` is plain data that getpwnam_r fills in; its strings point into `buf`,
    // which outlives every read of them below.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if rc != 0 {
            let error = std::io::Error::from_raw_os_error(rc);
            return Err(format!("cannot look up tenant '{name}': {error}"));
        }
        if found.is_null() {
            return Ok(None);
        }
        Ok(Some(Tenant {
            name: name.to_string(),
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
            home: CStr::from_ptr(pwd.pw_dir).to_string_lossy().into_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_worker_runs_no_task_as_its_own_user() {
        let shared = Tenants::default();
        let e = shared.of_task("").unwrap_err();
        assert!(
            e.contains("--default-tenant") && e.contains("--single-team"),
            "{e}"
        );
        let e = shared.of_task("root").unwrap_err();
        assert!(e.contains("--allow-root-tenant"), "{e}");
        let nobody = Tenants {
            default: Some("nobody".into()),
            ..Tenants::default()
        };
        assert_eq!(nobody.of_task("").unwrap().unwrap().name, "nobody");
        let single = Tenants {
            single_team: true,
            ..Tenants::default()
        };
        assert_eq!(single.of_task("").unwrap(), None);
    }

    #[test]
    fn root_is_found_and_refused_unless_allowed_and_strangers_are_named() {
        let e = lookup("root", false).unwrap_err();
        assert!(e.contains("--allow-root-tenant"), "{e}");
        let root = user("root").unwrap().unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let e = lookup("no_such_user_here", false).unwrap_err();
        assert!(
            e.contains("'no_such_user_here' is not an OS user") && e.contains("useradd"),
            "{e}"
        );
    }
}
