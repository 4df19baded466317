//! DolphinScheduler `$[...]` time expressions (its `TimePlaceholderUtils`), evaluated against
//! the schedule time.
//!
//! Forms, with the schedule time `t`:
//! - a Java `SimpleDateFormat` pattern alone: `yyyyMMdd`, `yyyy-MM-dd HH:mm:ss`, … → `t` formatted;
//! - pattern `+`/`-` offset in days: `yyyyMMdd-1`, `yyyyMMdd+7*2`, `HHmmss+1/24` (an hour),
//!   `HHmmss-1/24/60` (a minute). As in DolphinScheduler the offset is the integer expression
//!   `60*24*(N)/…` minutes, so `1/24` is exactly 60 minutes;
//! - functions: `add_months(fmt,N)`, `this_day(fmt)`, `last_day(fmt)` (yesterday, as in
//!   DolphinScheduler), `month_first_day(fmt[,N months])`, `month_last_day(fmt[,N months])`,
//!   `week_first_day(fmt[,N weeks])` (Monday), `week_last_day(fmt[,N weeks])` (Sunday),
//!   `year_week(fmt[,first weekday 1=Mon..7=Sun])`, and the older `month_begin(fmt,N days)`,
//!   `month_end(fmt,N days)`, `week_begin(fmt,N days)`, `week_end(fmt,N days)`.
//!
//! Everything writes straight into the caller's output string; only errors allocate.

use std::borrow::Cow;
use std::fmt::Write as _;

use chrono::{Datelike, Months, NaiveDate, NaiveDateTime, TimeDelta, Timelike};

/// Why an expression could not be evaluated. The caller pairs it with the expression.
pub(super) type Reason = Cow<'static, str>;

/// Appends the value of the `$[expr]` body `expr` at schedule time `at` to `out`.
pub(super) fn eval(expr: &str, at: NaiveDateTime, out: &mut String) -> Result<(), Reason> {
    let e = expr.trim();
    if e.is_empty() {
        return Err("the expression is empty".into());
    }
    if let Some((name, args)) = call(e) {
        return eval_call(name, args, at, out);
    }
    let (fmt, at) = split_offset(e, at)?;
    format_java(fmt, at, out)
}

/// `name(args)` when `e` has that shape and `name` is a function (or looks like one: a name
/// with `_`, so that a misspelt function is reported rather than formatted as a pattern).
fn call(e: &str) -> Option<(&str, &str)> {
    let inner = e.strip_suffix(')')?;
    let open = inner.find('(')?;
    let name = inner[..open].trim_end();
    let is_ident = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    (is_ident && name.contains('_')).then(|| (name, &inner[open + 1..]))
}

fn eval_call(name: &str, args: &str, at: NaiveDateTime, out: &mut String) -> Result<(), Reason> {
    let (fmt, n) = match args.split_once(',') {
        Some((_, n)) if n.contains(',') => {
            return Err(format!("{name}(...) takes at most 2 arguments, got '{args}'").into());
        }
        Some((fmt, n)) => (fmt.trim(), Some(n.trim())),
        None => (args.trim(), None),
    };
    if fmt.is_empty() {
        return Err(format!("{name}(...) needs a date format as its first argument").into());
    }
    // `required`: DolphinScheduler rejects these without the number.
    let number = |required: bool| -> Result<i64, Reason> {
        match n {
            Some(n) => {
                Arith::eval(n).map_err(|r| format!("{name}(...): bad number '{n}': {r}").into())
            }
            None if required => {
                Err(format!("{name}(...) needs 2 arguments: {name}({fmt},N)").into())
            }
            None => Ok(0),
        }
    };
    let no_number = || -> Result<(), Reason> {
        match n {
            Some(_) => Err(format!("{name}(...) takes only the date format: {name}({fmt})").into()),
            None => Ok(()),
        }
    };
    let date = at.date();
    let target = match name {
        "add_months" => add_months(at, number(true)?)?,
        "this_day" => {
            no_number()?;
            at
        }
        "last_day" => {
            no_number()?;
            add_days(at, -1)?
        }
        "month_first_day" => add_months(with_date(at, first_of_month(date)), number(false)?)?,
        "month_last_day" => {
            let moved = add_months(at, number(false)?)?;
            with_date(at, last_of_month(moved.date())?)
        }
        "week_first_day" => add_days(with_date(at, monday(date)?), weeks(number(false)?)?)?,
        "week_last_day" => add_days(with_date(at, sunday(date)?), weeks(number(false)?)?)?,
        "month_begin" => add_days(with_date(at, first_of_month(date)), number(true)?)?,
        "month_end" => add_days(with_date(at, last_of_month(date)?), number(true)?)?,
        "week_begin" => add_days(with_date(at, monday(date)?), number(true)?)?,
        "week_end" => add_days(with_date(at, sunday(date)?), number(true)?)?,
        "year_week" => {
            let first = if n.is_some() { number(false)? } else { 1 };
            return year_week(fmt, date, first, out);
        }
        _ => return Err(format!("unknown function '{name}'").into()),
    };
    format_java(fmt, target, out)
}

/// Splits `fmt±offset` the way DolphinScheduler does: at the last `+` if there is one, else
/// at the last `-`, and only when a digit follows it (so `yyyy-MM-dd` stays a pattern).
fn split_offset(e: &str, at: NaiveDateTime) -> Result<(&str, NaiveDateTime), Reason> {
    let (idx, negative) = match (e.rfind('+'), e.rfind('-')) {
        (Some(i), _) => (i, false),
        (None, Some(i)) => (i, true),
        (None, None) => return Ok((e, at)),
    };
    let operand = &e[idx + 1..];
    match operand.bytes().next() {
        Some(b) if b.is_ascii_digit() => {}
        Some(_) => return Ok((e, at)),
        None => {
            return Err(format!(
                "nothing after the trailing '{}': write e.g. {}{}1",
                &e[idx..],
                &e[..idx],
                &e[idx..]
            )
            .into());
        }
    }
    let minutes = offset_minutes(operand)
        .map_err(|r| Reason::from(format!("bad offset '{operand}': {r}")))?;
    let minutes = if negative { -minutes } else { minutes };
    let moved = TimeDelta::try_minutes(minutes)
        .and_then(|d| at.checked_add_signed(d))
        .ok_or("the offset moves the date out of range")?;
    Ok((&e[..idx], moved))
}

/// DolphinScheduler's offset in minutes: `60*24*(head)tail` where `head` is the operand up to
/// its first `/`, evaluated in integer arithmetic (`1/24` → 60, `1/24/60` → 1, `7*2` → 20160).
fn offset_minutes(operand: &str) -> Result<i64, Reason> {
    let (head, tail) = operand.split_at(operand.find('/').unwrap_or(operand.len()));
    let days = Arith::eval(head)?;
    let mut p = Arith::new(tail);
    let first = p.term_from(days.checked_mul(24 * 60).ok_or(OVERFLOW)?)?;
    let v = p.expr_from(first)?;
    p.end()?;
    Ok(v)
}

const OVERFLOW: &str = "number out of range";

/// Integer arithmetic: `+ - * /`, parentheses, unary signs (DolphinScheduler's `calculate`).
struct Arith<'a> {
    s: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> Arith<'a> {
    /// Deep enough for any real expression, shallow enough that a hostile text cannot
    /// exhaust the master's stack.
    const MAX_DEPTH: u32 = 32;

    fn new(s: &'a str) -> Self {
        Arith {
            s: s.as_bytes(),
            i: 0,
            depth: 0,
        }
    }

    fn eval(s: &str) -> Result<i64, Reason> {
        let mut p = Arith::new(s);
        let v = p.expr()?;
        p.end()?;
        Ok(v)
    }

    fn peek(&mut self) -> Option<u8> {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
        self.s.get(self.i).copied()
    }

    fn end(&mut self) -> Result<(), Reason> {
        match self.peek() {
            None => Ok(()),
            Some(c) => Err(format!("unexpected '{}'", c as char).into()),
        }
    }

    fn expr(&mut self) -> Result<i64, Reason> {
        let t = self.term()?;
        self.expr_from(t)
    }

    fn expr_from(&mut self, mut v: i64) -> Result<i64, Reason> {
        loop {
            match self.peek() {
                Some(b'+') => {
                    self.i += 1;
                    v = v.checked_add(self.term()?).ok_or(OVERFLOW)?;
                }
                Some(b'-') => {
                    self.i += 1;
                    v = v.checked_sub(self.term()?).ok_or(OVERFLOW)?;
                }
                _ => return Ok(v),
            }
        }
    }

    fn term(&mut self) -> Result<i64, Reason> {
        let f = self.factor()?;
        self.term_from(f)
    }

    fn term_from(&mut self, mut v: i64) -> Result<i64, Reason> {
        loop {
            match self.peek() {
                Some(b'*') => {
                    self.i += 1;
                    v = v.checked_mul(self.factor()?).ok_or(OVERFLOW)?;
                }
                Some(b'/') => {
                    self.i += 1;
                    let d = self.factor()?;
                    if d == 0 {
                        return Err("division by zero".into());
                    }
                    v = v.checked_div(d).ok_or(OVERFLOW)?;
                }
                _ => return Ok(v),
            }
        }
    }

    fn factor(&mut self) -> Result<i64, Reason> {
        self.depth += 1;
        if self.depth > Self::MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        let v = match self.peek() {
            Some(b'-') => {
                self.i += 1;
                self.factor()?.checked_neg().ok_or(OVERFLOW)?
            }
            Some(b'+') => {
                self.i += 1;
                self.factor()?
            }
            Some(b'(') => {
                self.i += 1;
                let v = self.expr()?;
                if self.peek() != Some(b')') {
                    return Err("missing ')'".into());
                }
                self.i += 1;
                v
            }
            Some(c) if c.is_ascii_digit() => {
                let mut v: i64 = 0;
                while let Some(&c) = self.s.get(self.i).filter(|c| c.is_ascii_digit()) {
                    v = v
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(i64::from(c - b'0')))
                        .ok_or(OVERFLOW)?;
                    self.i += 1;
                }
                v
            }
            Some(c) => return Err(format!("expected a number, found '{}'", c as char).into()),
            None => return Err("expected a number".into()),
        };
        self.depth -= 1;
        Ok(v)
    }
}

fn add_days(at: NaiveDateTime, days: i64) -> Result<NaiveDateTime, Reason> {
    TimeDelta::try_days(days)
        .and_then(|d| at.checked_add_signed(d))
        .ok_or_else(|| "the date moves out of range".into())
}

fn weeks(n: i64) -> Result<i64, Reason> {
    n.checked_mul(7).ok_or_else(|| OVERFLOW.into())
}

/// Adds months, clamping the day to the target month's last day (Jan 31 + 1 → Feb 28/29).
fn add_months(at: NaiveDateTime, n: i64) -> Result<NaiveDateTime, Reason> {
    let months = u32::try_from(n.unsigned_abs()).map(Months::new).ok();
    let moved = if n >= 0 {
        months.and_then(|m| at.checked_add_months(m))
    } else {
        months.and_then(|m| at.checked_sub_months(m))
    };
    moved.ok_or_else(|| "the date moves out of range".into())
}

/// `at` on another day, same time of day (DolphinScheduler keeps the time too).
fn with_date(at: NaiveDateTime, date: NaiveDate) -> NaiveDateTime {
    date.and_time(at.time())
}

fn first_of_month(d: NaiveDate) -> NaiveDate {
    d.with_day(1).unwrap_or(d)
}

fn last_of_month(d: NaiveDate) -> Result<NaiveDate, Reason> {
    first_of_month(d)
        .checked_add_months(Months::new(1))
        .and_then(|d| d.pred_opt())
        .ok_or_else(|| "the date moves out of range".into())
}

fn monday(d: NaiveDate) -> Result<NaiveDate, Reason> {
    let back = i64::from(d.weekday().num_days_from_monday());
    d.checked_sub_signed(TimeDelta::days(back))
        .ok_or_else(|| "the date moves out of range".into())
}

fn sunday(d: NaiveDate) -> Result<NaiveDate, Reason> {
    monday(d)?
        .checked_add_signed(TimeDelta::days(6))
        .ok_or_else(|| "the date moves out of range".into())
}

/// `yyyyww` / `yyyy-ww` (when the format has a `-`): week of the year, weeks starting on
/// `first` (1 = Monday … 7 = Sunday), week 1 being the first with at least 4 days in the year
/// (ISO 8601 when `first` is Monday). The year is the week's year, so 2024-12-30 is `2025-01`
/// (DolphinScheduler prints the calendar year there, `2024-01`, which is a bug).
fn year_week(fmt: &str, d: NaiveDate, first: i64, out: &mut String) -> Result<(), Reason> {
    if !(1..=7).contains(&first) {
        return Err(format!(
            "year_week's second argument is the first day of the week, 1 (Monday) to 7 (Sunday), not {first}"
        )
        .into());
    }
    let first0 = (first - 1) as u32; // days from Monday
    let back = (d.weekday().num_days_from_monday() + 7 - first0) % 7;
    // The week belongs to the year holding its 4th day (and so at least 4 of its days).
    let mid = d
        .checked_sub_signed(TimeDelta::days(i64::from(back)))
        .and_then(|start| start.checked_add_signed(TimeDelta::days(3)))
        .ok_or("the date moves out of range")?;
    let week = (mid.ordinal0() / 7) + 1;
    let sep = if fmt.contains('-') { "-" } else { "" };
    let _ = write!(out, "{:04}{sep}{week:02}", mid.year());
    Ok(())
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Formats `at` with a Java `SimpleDateFormat` pattern: `y M d H h m s S E a D u`, runs of a
/// letter give the width (`yy` is the 2-digit year, `MMM`/`MMMM` month names, `E`…`EEE`
/// short and `EEEE` long day names), `'...'` quotes literal text (`''` is a quote), any other
/// non-letter is literal.
fn format_java(fmt: &str, at: NaiveDateTime, out: &mut String) -> Result<(), Reason> {
    let b = fmt.as_bytes();
    let mut i = 0;
    let mut fields = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\'' {
            if b.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            // Quoted text up to the closing quote; `''` inside is a quote.
            i += 1;
            loop {
                let Some(q) = fmt[i..].find('\'') else {
                    return Err(format!("unterminated quote in the format '{fmt}'").into());
                };
                out.push_str(&fmt[i..i + q]);
                i += q + 1;
                if b.get(i) == Some(&b'\'') {
                    out.push('\'');
                    i += 1;
                } else {
                    break;
                }
            }
        } else if c.is_ascii_alphabetic() {
            let n = b[i..].iter().take_while(|&&x| x == c).count();
            field(c, n, at, out).ok_or_else(|| {
                Reason::from(format!(
                    "'{}' is not a supported date/time letter (use yyyy yy MM dd HH mm ss, \
                     quote literal text as '...')",
                    &fmt[i..i + n]
                ))
            })?;
            fields += 1;
            i += n;
        } else {
            let start = i;
            while i < b.len() && !b[i].is_ascii_alphabetic() && b[i] != b'\'' {
                i += 1;
            }
            out.push_str(&fmt[start..i]);
        }
    }
    if fields == 0 {
        return Err(format!(
            "'{fmt}' has no date/time letters (yyyy MM dd HH mm ss); \
             for shell arithmetic use $((...)), not $[...]"
        )
        .into());
    }
    Ok(())
}

/// Writes one run of `n` pattern letters `c`; `None` for an unsupported letter.
fn field(c: u8, n: usize, at: NaiveDateTime, out: &mut String) -> Option<()> {
    let num = |out: &mut String, v: u32| {
        let _ = write!(out, "{v:0n$}");
    };
    match c {
        b'y' if n == 2 => num(out, at.year().rem_euclid(100) as u32),
        b'y' => {
            let _ = write!(out, "{:0n$}", at.year());
        }
        b'M' if n >= 4 => out.push_str(MONTHS[at.month0() as usize]),
        b'M' if n == 3 => out.push_str(&MONTHS[at.month0() as usize][..3]),
        b'M' => num(out, at.month()),
        b'd' => num(out, at.day()),
        b'D' => num(out, at.ordinal()),
        b'H' => num(out, at.hour()),
        b'h' => num(out, at.hour12().1),
        b'm' => num(out, at.minute()),
        b's' => num(out, at.second()),
        b'S' => num(out, at.nanosecond() % 1_000_000_000 / 1_000_000),
        b'E' => {
            let name = WEEKDAYS[at.weekday().num_days_from_monday() as usize];
            out.push_str(if n >= 4 { name } else { &name[..3] });
        }
        b'a' => out.push_str(if at.hour12().0 { "PM" } else { "AM" }),
        b'u' => num(out, at.weekday().number_from_monday()),
        _ => return None,
    }
    Some(())
}
