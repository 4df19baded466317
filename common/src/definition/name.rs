//! The names a definition gives projects, workflows, tasks and what they refer to.
//!
//! Two kinds: *names* are labels people read and write in their own language (projects,
//! workflows, tasks, triggers, task groups, alert channels), so any script's letters and
//! digits; *identifiers* end up where only ASCII is safe (shell variables, OS user names,
//! HTTP Basic credentials, what outside programs send), so ASCII only.

use unicode_normalization::UnicodeNormalization;

/// Longest name, in characters (not bytes: a Chinese character is three bytes).
pub const MAX_NAME_CHARS: usize = 128;

/// `s` in Unicode Normalization Form C, so that a name typed with a decomposed accent
/// (`e` + U+0301) is the same name as one typed with the composed `é`.
pub fn normalize(s: &str) -> String {
    s.nfc().collect()
}

/// A name of a project, workflow, task, trigger, task group or channel: 1-128 letters or
/// digits of any script, `_`, `-` or `.`, not starting with `.` or `-` (so no name is `.`
/// or `..`, a path step, or looks like a flag), in NFC ([`normalize`] first).
pub fn valid_name(s: &str) -> bool {
    name_problem(s).is_none()
}

/// What is wrong with `s` as a name ([`valid_name`]), said so a user can fix it.
pub fn name_problem(s: &str) -> Option<String> {
    let count = s.chars().count();
    if count == 0 {
        return Some("a name may not be empty".into());
    }
    if count > MAX_NAME_CHARS {
        return Some(format!(
            "it has {count} characters, at most {MAX_NAME_CHARS} are allowed"
        ));
    }
    if s.starts_with(['.', '-']) {
        return Some("a name may not start with '.' or '-'".into());
    }
    // Before the characters: a decomposed accent is a combining mark, not a letter.
    if s.nfc().ne(s.chars()) {
        return Some("it is not in Unicode NFC form".into());
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        let what = match c {
            ' ' => "a space".to_string(),
            '/' => "'/'".to_string(),
            c if c.is_control() => format!("the control character U+{:04X}", u32::from(c)),
            c if c.is_whitespace() => format!("the space character U+{:04X}", u32::from(c)),
            c => format!("'{c}' (U+{:04X})", u32::from(c)),
        };
        return Some(format!(
            "it contains {what}; use letters and digits of any script, '_', '-' or '.'"
        ));
    }
    None
}

/// An identifier: a [`valid_name`] of ASCII letters, digits, `_`, `-` and `.` only. For
/// secrets (exported as `SHOAL_SECRET_<NAME>`), users and tokens (HTTP Basic credentials
/// are not reliably UTF-8), queues, events and external workers (named by programs).
pub fn valid_identifier(s: &str) -> bool {
    s.is_ascii() && valid_name(s)
}

/// An OS user name a tenant may have (what `useradd` takes by default).
pub(super) fn valid_tenant(s: &str) -> bool {
    s.len() <= 32 && valid_identifier(s) && !s.contains('.')
}

/// Why `s` is refused where a name or identifier is expected: [`name_problem`], or, for a
/// valid name, that only ASCII is allowed there.
pub fn explain(s: &str) -> String {
    name_problem(s).unwrap_or_else(|| "use ASCII letters, digits, '_', '-' or '.' here".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_any_script_are_valid() {
        for name in [
            "条件节点测试工作流",
            "多sql节点流程",
            "前置sql节点",
            "データ取り込み",
            "café_été",
            "Ελληνικά-1.2",
            "отчёт_2026",
            "_x",
            "a",
            "١٢٣",
        ] {
            assert!(valid_name(name), "{name}: {:?}", name_problem(name));
            assert_eq!(normalize(name), name, "already NFC");
        }
        assert!(valid_name(&"名".repeat(MAX_NAME_CHARS)));
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        for (name, says) in [
            ("", "empty"),
            (".", "start with '.'"),
            ("..", "start with '.'"),
            ("-f", "start with '.' or '-'"),
            ("a b", "a space"),
            ("a/b", "'/'"),
            ("工作流/子", "'/'"),
            ("a\u{7}b", "control character U+0007"),
            ("a\tb", "control character U+0009"),
            ("a\u{3000}b", "space character U+3000"),
            ("a\u{200B}b", "U+200B"),
            ("a:b", "':' (U+003A)"),
            ("cafe\u{301}", "NFC"),
        ] {
            let problem = name_problem(name).unwrap_or_default();
            assert!(problem.contains(says), "{name:?}: {problem}");
            assert!(!valid_name(name), "{name:?}");
        }
        let long = "名".repeat(MAX_NAME_CHARS + 1);
        assert!(name_problem(&long).unwrap().contains("129 characters"));
    }

    #[test]
    fn a_decomposed_accent_normalizes_to_the_composed_name() {
        let decomposed = "cafe\u{301}";
        let composed = "caf\u{e9}";
        assert_ne!(decomposed, composed);
        assert_eq!(normalize(decomposed), composed);
        assert!(valid_name(&normalize(decomposed)));
        // Japanese voiced kana: か + combining dakuten is が.
        assert_eq!(normalize("\u{304B}\u{3099}"), "\u{304C}");
    }

    #[test]
    fn identifiers_stay_ascii() {
        assert!(valid_identifier("db_password"));
        assert!(!valid_identifier("密码"));
        assert!(!valid_tenant("ünal"));
        assert!(explain("密码").contains("ASCII"));
        assert!(explain("a b").contains("space"));
    }
}
