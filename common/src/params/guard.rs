//! Values from outside a definition are data: how such a value goes into a text that runs as
//! code (a shell or python script, a SQL query) without becoming code.
//!
//! A value the definition's editor wrote (its `params`, built-ins, `$[...]`) is pasted as
//! written. A value from outside (a start parameter, an output, a secret, ...) that is
//! [plain](is_plain) is pasted too, so `${dt}` works as in DolphinScheduler. Any other outside
//! value is placed by the language of the text:
//! - shell: a reference to the environment variable that holds it (bash never parses the
//!   result of an expansion), quoted for where it stands ([`super::shell`]); inside
//!   arithmetic, where bash would evaluate it, the task fails;
//! - python: the task fails, saying which environment variable holds the value raw;
//! - sql: inside a quoted literal it is escaped for it; elsewhere only a number or a name
//!   may go, anything else fails the task ([`super::sql`]).

use super::shell::{self, Shell};
use super::sql::Sql;
use std::collections::BTreeMap;
use std::fmt;

/// Where a value from outside the definition comes from (said in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Given at start: by a user, a schedule, a webhook's mapping, a parent run.
    Start,
    /// Handed on by an upstream task (printed, completed, called back, passed on).
    Output,
    /// The failure a catch handler receives (`${error.message}`, ...).
    Failure,
    /// An element of a foreach list.
    Item,
    /// A project secret (`${secret.NAME}`).
    Secret,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Start => "a start parameter",
            Source::Output => "an upstream task's output",
            Source::Failure => "the failure this handler catches",
            Source::Item => "a foreach element",
            Source::Secret => "a project secret",
        })
    }
}

/// The parameters whose values come from outside the definition, and from where; a name
/// not in it is the definition's own (or a built-in).
pub type Outside = BTreeMap<String, Source>;

/// The language of a text a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Not code (a URL, a header, a message): every value is pasted.
    Text,
    /// Text of a Kubernetes object, where the kubelet expands `$(NAME)` (in a container's
    /// command, args and env values): an outside value's `$` is doubled, which the
    /// kubelet reads back as one `$`, so a value cannot read another variable.
    KubeText,
    Shell,
    Python,
    Sql,
}

/// How outside values go into one text: its language, which values are outside, and the
/// environment variable that holds each value (see [`environment`]).
#[derive(Debug, Clone, Copy)]
pub struct Guard<'a> {
    pub lang: Lang,
    pub outside: &'a Outside,
    /// Parameter name -> the environment variable the task gets its value in.
    pub env: &'a BTreeMap<String, String>,
}

/// Whether an outside value may be pasted as it is: letters and digits of any script and
/// `_ - . , : / @ + = %` (dates, times, ids, names, paths, lists), nothing a shell, python
/// or SQL gives a meaning (no space, quote, `$`, backtick, bracket, `;`, `|`, `&`, `*`, `\`,
/// newline, ...).
pub fn is_plain(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_alphanumeric() || "_-.,:/@+=%".contains(c))
}

/// The environment variable a parameter's value is exported in: `SHOAL_PARAM_` and the
/// name with each character other than an ASCII letter, digit or `_` made `_`
/// (`system.biz.date` -> `SHOAL_PARAM_system_biz_date`); a secret's is `SHOAL_SECRET_NAME`.
pub fn env_name(param: &str) -> String {
    let (prefix, name) = match param.strip_prefix(SECRET) {
        Some(secret) => (SECRET_VAR, secret),
        None => (PARAM_VAR, param),
    };
    let mangled = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' });
    prefix.chars().chain(mangled).collect()
}

const SECRET: &str = "secret.";
const PARAM_VAR: &str = "SHOAL_PARAM_";
const SECRET_VAR: &str = "SHOAL_SECRET_";

/// Whether environment variable `var` is one [`env_name`] makes: what a container or pod
/// is given of a task's environment (the variables a guarded script refers to).
pub fn is_value_var(var: &str) -> bool {
    var.starts_with(PARAM_VAR) || var.starts_with(SECRET_VAR)
}

/// The environment a task's values are exported in: every value as [`env_name`] (two names
/// that become the same variable: the one that is already an identifier wins, else the
/// first), and a value also under its own name when that is an identifier and, for an
/// outside value, holds a lowercase letter and is not a proxy setting (an outside value
/// never sets `PATH`, `BASH_ENV`, `PS4`, `LD_PRELOAD`, `http_proxy`, ...).
/// Returns the variables, and for each parameter the variable of its own.
pub fn environment(
    values: &BTreeMap<String, String>,
    outside: &Outside,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut vars = BTreeMap::new();
    let mut names = BTreeMap::new();
    let identifiers_first = values
        .iter()
        .filter(|(k, _)| is_identifier(k))
        .chain(values.iter().filter(|(k, _)| !is_identifier(k)));
    for (name, value) in identifiers_first {
        let var = env_name(name);
        if !vars.contains_key(&var) {
            vars.insert(var.clone(), value.clone());
            names.insert(name.clone(), var);
        }
    }
    for (name, value) in values {
        let own = is_identifier(name)
            && (!outside.contains_key(name)
                || (name.chars().any(|c| c.is_ascii_lowercase())
                    && !name.to_ascii_lowercase().ends_with("_proxy")));
        if own && !vars.contains_key(name) {
            vars.insert(name.clone(), value.clone());
        }
    }
    (vars, names)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Why an outside value could not go into a text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter ${{{name}}} comes from {from} and {reason}")]
pub struct Refused {
    pub name: String,
    pub from: Source,
    pub reason: String,
}

/// Where the text being expanded stands, to place a value there.
pub(super) enum Scanner {
    None,
    Shell(Shell),
    Sql(Sql),
}

impl Scanner {
    pub(super) fn new(lang: Lang) -> Self {
        match lang {
            Lang::Shell => Scanner::Shell(Shell::default()),
            Lang::Sql => Scanner::Sql(Sql::default()),
            Lang::Text | Lang::KubeText | Lang::Python => Scanner::None,
        }
    }

    /// Reads `text`, which follows what was read so far.
    pub(super) fn read(&mut self, text: &str) {
        match self {
            Scanner::None => {}
            Scanner::Shell(s) => s.read(text),
            Scanner::Sql(s) => s.read(text),
        }
    }

    /// Appends the outside value `value` of parameter `name` where the text read so far
    /// ends, as data.
    pub(super) fn place(
        &self,
        guard: &Guard,
        name: &str,
        source: Source,
        value: &str,
        out: &mut String,
    ) -> Result<(), Refused> {
        let refused = |reason: String| Refused {
            name: name.to_owned(),
            from: source,
            reason,
        };
        let var = || guard.env.get(name).map(String::as_str);
        let not_plain = "holds characters other than letters, digits and _-.,:/@+=%";
        match self {
            Scanner::None if guard.lang == Lang::KubeText => {
                out.push_str(&value.replace('$', "$$"))
            }
            Scanner::None if guard.lang == Lang::Text || is_plain(value) => out.push_str(value),
            Scanner::None => {
                let read = match var() {
                    Some(var) => format!("read it raw with os.environ[\"{var}\"]"),
                    None => no_variable(name),
                };
                return Err(refused(format!(
                    "{not_plain}, so it is not pasted into python code: {read}"
                )));
            }
            Scanner::Shell(_) if is_plain(value) => out.push_str(value),
            Scanner::Shell(s) => {
                let Some(var) = var() else {
                    return Err(refused(format!("{not_plain}: {}", no_variable(name))));
                };
                shell::reference(s.at(), var, out)
                    .map_err(|why| refused(format!("{not_plain} and {why}")))?;
            }
            Scanner::Sql(s) => s.place(value, out).map_err(refused)?,
        }
        Ok(())
    }
}

fn no_variable(name: &str) -> String {
    format!(
        "it has no environment variable of its own ({} holds another parameter's value): rename it",
        env_name(name)
    )
}
