//! The names a definition gives projects, workflows, tasks and what they refer to.

/// A name of a project, workflow, task, group or channel. It may not start with '.' or
/// '-', so no name is `..` or looks like a flag.
pub fn valid_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// An OS user name a tenant may have (what `useradd` takes by default).
pub(super) fn valid_tenant(s: &str) -> bool {
    s.len() <= 32 && valid_name(s) && !s.contains('.')
}
