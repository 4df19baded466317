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

/// The tenant `name` on this machine, if this worker may run tasks as it. The error says
/// what is wrong and how to fix it.
pub(crate) fn lookup(name: &str, allow_root: bool) -> Result<Tenant, String> {
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
