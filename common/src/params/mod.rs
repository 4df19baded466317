//! DolphinScheduler-compatible parameter expansion of a task's text.
//!
//! - `${name}` is replaced by the parameter's value. A value may itself hold `$[...]` time
//!   expressions (a global param `dt: $[yyyyMMdd-1]`); those are evaluated too. Nothing else in
//!   a value is expanded: a `${other}` inside a value stays as written (one level, no loops).
//! - `${setValue(...)}` is kept (the output convention tasks print); a `${name}` inside it is
//!   expanded like any other.
//! - `$[...]` is a time expression relative to the schedule time (forms: `params/time.rs`).
//! - A `$` not starting a closed `${...}` / `$[...]` is plain text (`$HOME`, `$1`, `$((1+2))`).

mod guard;
mod shell;
mod sql;
mod time;

pub use guard::{
    Guard, Lang, Outside, Refused, Source, env_name, environment, is_plain, is_value_var,
};

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{Datelike, NaiveDateTime, Timelike};

/// What the expansion of one task's text needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Every parameter visible to the task, built-ins included (see [`builtins`]).
    pub params: &'a BTreeMap<String, String>,
    /// The instant `$[...]` expressions are relative to: the schedule time of a scheduled or
    /// backfill run, the start time of a manual run.
    pub schedule_time: NaiveDateTime,
}

/// The short list of time-expression forms, for error messages.
const SUPPORTED_TIME_FORMS: &str = "$[yyyyMMdd], $[yyyy-MM-dd HH:mm:ss] (letters yyyy yy MM dd HH mm ss), \
     $[yyyyMMdd-1] (days), $[HHmmss+1/24] (hours), $[HHmmss-1/24/60] (minutes), \
     $[add_months(yyyyMMdd,-1)], $[this_day(yyyy-MM-dd)], $[last_day(yyyy-MM-dd)] (yesterday), \
     $[month_first_day(yyyyMMdd,-1)], $[month_last_day(yyyyMMdd,-1)], \
     $[week_first_day(yyyyMMdd,0)], $[week_last_day(yyyyMMdd,0)], $[year_week(yyyy-MM-dd)]";

/// Why a text could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A `${name}` whose name no parameter source defines.
    #[error(
        "undefined parameter ${{{0}}}: define it in the workflow's params, the task's params or pass it at start with --param {0}=VALUE (a sub-workflow's run gets only what its parent task passes in its params)"
    )]
    UndefinedParam(String),
    /// A `$[expr]` that is not a valid time expression.
    #[error("bad time expression $[{expr}]: {reason}. Supported forms: {forms}", forms = SUPPORTED_TIME_FORMS)]
    BadExpression { expr: String, reason: String },
    /// An outside value that cannot go where the text uses it without becoming code.
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// Expands `text`: `${name}` from `ctx.params` (time expressions in the value evaluated),
/// `$[...]` against `ctx.schedule_time`, `${setValue(...)}` kept.
pub fn expand(text: &str, ctx: &Context) -> Result<String, ExpandError> {
    expand_with(text, ctx, None)
}

/// Expands `text` that runs as code of `guard.lang`: like [`expand`], but a value from
/// outside the definition goes in as data (see [`Guard`]).
pub fn expand_guarded(text: &str, ctx: &Context, guard: &Guard) -> Result<String, ExpandError> {
    expand_with(text, ctx, Some(guard))
}

fn expand_with(text: &str, ctx: &Context, guard: Option<&Guard>) -> Result<String, ExpandError> {
    let Some(first) = text.find('$') else {
        return Ok(text.to_owned());
    };
    let mut out = String::with_capacity(text.len() + 32);
    out.push_str(&text[..first]);
    let mut scanner = guard.map(|g| guard::Scanner::new(g.lang));
    let mut read = 0;
    for piece in Pieces::new(&text[first..]) {
        match piece {
            Piece::Text(s) | Piece::SetValue(s) => out.push_str(s),
            Piece::Param { name, .. } => {
                let value = ctx
                    .params
                    .get(name)
                    .ok_or_else(|| ExpandError::UndefinedParam(name.to_owned()))?;
                let outside = guard.and_then(|g| Some((g, *g.outside.get(name)?)));
                match (outside, scanner.as_mut()) {
                    (Some((guard, source)), Some(scanner)) => {
                        let data = evaluate(value, name, ctx)?;
                        // What is placed is read next, with the text after it.
                        scanner.read(&out[read..]);
                        read = out.len();
                        scanner.place(guard, name, source, &data, &mut out)?;
                    }
                    _ => push_value(value, name, ctx, &mut out)?,
                }
            }
            Piece::Time(expr) => time::eval(expr, ctx.schedule_time, &mut out).map_err(|r| {
                ExpandError::BadExpression {
                    expr: expr.to_owned(),
                    reason: r.into_owned(),
                }
            })?,
        }
    }
    Ok(out)
}

/// The value `value` of parameter `name` as `${name}` stands for it: its `$[...]` evaluated,
/// nothing else expanded.
pub fn evaluate(value: &str, name: &str, ctx: &Context) -> Result<String, ExpandError> {
    let mut out = String::new();
    push_value(value, name, ctx, &mut out)?;
    Ok(out)
}

/// Appends the value of parameter `name`, its `$[...]` evaluated and nothing else expanded.
fn push_value(value: &str, name: &str, ctx: &Context, out: &mut String) -> Result<(), ExpandError> {
    if !value.contains("$[") {
        out.push_str(value);
        return Ok(());
    }
    let first = value.find('$').unwrap_or(0);
    out.push_str(&value[..first]);
    for piece in Pieces::new(&value[first..]) {
        match piece {
            Piece::Time(expr) => time::eval(expr, ctx.schedule_time, out).map_err(|r| {
                ExpandError::BadExpression {
                    expr: expr.to_owned(),
                    reason: format!("{r} (in the value of parameter ${{{name}}})"),
                }
            })?,
            // A `${...}` in a value is kept as written: one level only.
            Piece::Text(s) | Piece::SetValue(s) | Piece::Param { raw: s, .. } => out.push_str(s),
        }
    }
    Ok(())
}

/// The `${name}` names `text` refers to, each once, in order of first use; not
/// `${setValue(...)}`, not `$[...]`. For checking at submit time that every one is defined.
pub fn references(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let Some(first) = text.find('$') else {
        return names;
    };
    for piece in Pieces::new(&text[first..]) {
        if let Piece::Param { name, .. } = piece
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_owned());
        }
    }
    names
}

/// DolphinScheduler's built-in parameters for one task instance:
/// `system.datetime` (the schedule time, `yyyyMMddHHmmss`), `system.biz.date` (the day before
/// the schedule day, `yyyyMMdd`), `system.biz.curdate` (the schedule day, `yyyyMMdd`),
/// `system.workflow.instance.id`, `system.task.instance.id`.
pub fn builtins(
    workflow_instance_id: i64,
    task_instance_id: i64,
    schedule_time: NaiveDateTime,
) -> BTreeMap<String, String> {
    let day = |d: chrono::NaiveDate| format!("{:04}{:02}{:02}", d.year(), d.month(), d.day());
    let t = schedule_time;
    let biz = t.date().pred_opt().unwrap_or(t.date());
    let mut datetime = day(t.date());
    let _ = write!(
        datetime,
        "{:02}{:02}{:02}",
        t.hour(),
        t.minute(),
        t.second()
    );
    BTreeMap::from([
        ("system.datetime".to_owned(), datetime),
        ("system.biz.date".to_owned(), day(biz)),
        ("system.biz.curdate".to_owned(), day(t.date())),
        (
            "system.workflow.instance.id".to_owned(),
            workflow_instance_id.to_string(),
        ),
        (
            "system.task.instance.id".to_owned(),
            task_instance_id.to_string(),
        ),
    ])
}

const SET_VALUE: &str = "setValue(";

/// One piece of a text being expanded.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    /// Copied as is.
    Text(&'a str),
    /// `${name}`: the trimmed name, and the whole placeholder as written.
    Param { name: &'a str, raw: &'a str },
    /// The opener of `${setValue(...)}`: copied as is.
    SetValue(&'a str),
    /// `$[expr]`: the expression between the brackets.
    Time(&'a str),
}

/// Splits a text into [`Piece`]s without allocating. A `${` / `$[` with no closing `}` / `]`
/// after it is text.
struct Pieces<'a> {
    rest: &'a str,
    /// No `}` / `]` left in `rest`: later openers are text, and are not searched again (keeps a
    /// text full of unclosed openers linear).
    no_brace: bool,
    no_bracket: bool,
}

impl<'a> Pieces<'a> {
    fn new(text: &'a str) -> Self {
        Pieces {
            rest: text,
            no_brace: false,
            no_bracket: false,
        }
    }

    /// The placeholder `s` (starting with `$`) opens, and its length.
    fn placeholder(&mut self, s: &'a str) -> Option<(Piece<'a>, usize)> {
        let (close, no_close) = match s.as_bytes().get(1) {
            Some(b'{') => ('}', &mut self.no_brace),
            Some(b'[') => (']', &mut self.no_bracket),
            _ => return None,
        };
        if *no_close {
            return None;
        }
        let Some(end) = s[2..].find(close) else {
            *no_close = true;
            return None;
        };
        let inner = &s[2..2 + end];
        let len = end + 3;
        if close == ']' {
            return Some((Piece::Time(inner), len));
        }
        let name = inner.trim();
        if let Some(at) = inner.find(SET_VALUE)
            && inner[..at].trim().is_empty()
        {
            // Only the opener is kept as written: the `${...}` inside are expanded
            // (`${setValue(n=${item})}`), as DolphinScheduler does.
            let opener = 2 + at + SET_VALUE.len();
            return Some((Piece::SetValue(&s[..opener]), opener));
        }
        Some((
            Piece::Param {
                name,
                raw: &s[..len],
            },
            len,
        ))
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        let s = self.rest;
        if s.is_empty() {
            return None;
        }
        let end = if s.as_bytes()[0] == b'$' {
            if let Some((piece, len)) = self.placeholder(s) {
                self.rest = &s[len..];
                return Some(piece);
            }
            // A `$` opening nothing: text up to the next `$`.
            s[1..].find('$').map_or(s.len(), |i| i + 1)
        } else {
            s.find('$').unwrap_or(s.len())
        };
        self.rest = &s[end..];
        Some(Piece::Text(&s[..end]))
    }
}

#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod tests;
