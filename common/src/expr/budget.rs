//! The work one evaluation may do, charged while it runs.
//!
//! CEL has no unbounded loop, but a short expression can still ask for years of CPU or
//! terabytes (nested `all`/`exists`, `s.replace('', s)` repeated). The evaluator cannot be
//! interrupted, so [`super::meter`] routes every operand, loop and growing function of
//! an expression through the functions below, which charge what they are about to read,
//! copy or build to the evaluation's budget and fail once it is spent. What is charged is
//! measured on the actual values, so nothing is predicted: the bound holds whatever the
//! expression does.
//!
//! Units: a byte of a string, one scalar, list element or map entry, or one node of the
//! expression evaluated.

use cel::common::types::{CelBytes, CelInt, CelList, CelMap, CelMapKey, CelOptional, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Most units one evaluation may spend: about 100 ms of the master and a few hundred MiB
/// at worst (a list element is one unit but 50–100 bytes in the evaluator).
pub(super) const MAX_STEPS: u64 = 5_000_000;

/// Bound on the text of one printed scalar: a double prints without an exponent (up to
/// 309 digits before the point, or 323 zeros after it).
pub(super) const PRINTED_SCALAR: u64 = 330;

/// A `matches` pattern compiled once per evaluation, and a bound on its program's size.
pub(super) struct Compiled {
    pub(super) regex: regex::Regex,
    pub(super) size: usize,
}

/// What one evaluation has left, and why it was refused if it was.
struct State {
    left: u64,
    refusal: Option<String>,
    /// `matches` patterns compiled so far: each is compiled (and charged) once.
    regexes: HashMap<String, Rc<Compiled>>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Runs `f` (one evaluation) with a fresh budget: `Err` is the refusal, if the budget ran
/// out or a pattern was refused, which wins over whatever `f` gave (`||` and `&&` swallow
/// errors, so an expression could otherwise succeed past its budget).
pub(super) fn metered<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let fresh = State {
        left: MAX_STEPS,
        refusal: None,
        regexes: HashMap::new(),
    };
    let outer = STATE.with(|s| s.borrow_mut().replace(fresh));
    let result = f();
    let state = STATE.with(|s| std::mem::replace(&mut *s.borrow_mut(), outer));
    match state.and_then(|s| s.refusal) {
        Some(refusal) => Err(refusal),
        None => Ok(result),
    }
}

/// Charges `units`; fails, and records the refusal, once the budget is spent.
pub(super) fn charge(units: u64) -> Result<(), ExecutionError> {
    STATE.with(|s| {
        let mut state = s.borrow_mut();
        let Some(state) = state.as_mut() else {
            return Err(refuse_with(
                None,
                "an expression ran outside its budget".into(),
            ));
        };
        match state.left.checked_sub(units) {
            Some(left) if state.refusal.is_none() => {
                state.left = left;
                Ok(())
            }
            _ => Err(refuse_with(
                Some(state),
                format!(
                    "this expression takes more than {MAX_STEPS:.0e} steps to evaluate: loop \
                     (map, filter, all, exists) over fewer items, nest fewer loops, or build \
                     smaller strings"
                ),
            )),
        }
    })
}

/// Refuses the evaluation with `why`, whatever it gives.
pub(super) fn refuse(why: String) -> ExecutionError {
    STATE.with(|s| refuse_with(s.borrow_mut().as_mut(), why))
}

fn refuse_with(state: Option<&mut State>, why: String) -> ExecutionError {
    if let Some(state) = state {
        state.left = 0;
        state.refusal.get_or_insert_with(|| why.clone());
    }
    ExecutionError::function_error("budget", why)
}

/// The pattern compiled for this evaluation, compiling (and charging) it the first time.
pub(super) fn regex(
    pattern: &str,
    compile: impl FnOnce(&str) -> Result<Compiled, ExecutionError>,
) -> Result<Rc<Compiled>, ExecutionError> {
    let cached = STATE.with(|s| {
        let state = s.borrow();
        state.as_ref()?.regexes.get(pattern).cloned()
    });
    if let Some(compiled) = cached {
        return Ok(compiled);
    }
    let compiled = Rc::new(compile(pattern)?);
    STATE.with(|s| {
        if let Some(state) = s.borrow_mut().as_mut() {
            state.regexes.insert(pattern.to_string(), compiled.clone());
        }
    });
    Ok(compiled)
}

/// Units in `v`, counted no further than `limit` (a larger value is refused anyway).
pub(super) fn size(v: &dyn Val, limit: u64) -> u64 {
    if let Some(s) = v.downcast_ref::<CelString>() {
        s.inner().len() as u64
    } else if let Some(b) = v.downcast_ref::<CelBytes>() {
        b.inner().len() as u64
    } else if let Some(list) = v.downcast_ref::<CelList>() {
        sum(list.inner().iter().map(|x| &**x), limit)
    } else if let Some(map) = v.downcast_ref::<CelMap>() {
        let mut total = map.inner().len() as u64;
        for (k, v) in map.inner() {
            if total > limit {
                break;
            }
            total += key_size(k) + size(&**v, limit.saturating_sub(total));
        }
        total
    } else if let Some(o) = v.downcast_ref::<CelOptional>() {
        1 + o.inner().map_or(0, |v| size(v, limit))
    } else {
        1
    }
}

fn sum<'a>(items: impl Iterator<Item = &'a dyn Val>, limit: u64) -> u64 {
    let mut total = 1;
    for item in items {
        if total > limit {
            break;
        }
        total += 1 + size(item, limit.saturating_sub(total));
    }
    total
}

fn key_size(k: &CelMapKey) -> u64 {
    match k {
        CelMapKey::String(s) => s.inner().len() as u64,
        _ => 1,
    }
}

/// Characters `v` prints as (`string(v)`, a format's `%s`): quoted and escaped at worst.
fn printed(v: &dyn Val, limit: u64) -> u64 {
    if let Some(list) = v.downcast_ref::<CelList>() {
        let mut total = 2;
        for item in list.inner() {
            if total > limit {
                break;
            }
            total += 2 + printed(&**item, limit.saturating_sub(total));
        }
        total
    } else if let Some(map) = v.downcast_ref::<CelMap>() {
        let mut total = 2;
        for (k, v) in map.inner() {
            if total > limit {
                break;
            }
            total += 4 + 2 * key_size(k) + 2 + printed(&**v, limit.saturating_sub(total));
        }
        total
    } else if v.downcast_ref::<CelString>().is_some() || v.downcast_ref::<CelBytes>().is_some() {
        4 * size(v, limit) + 3
    } else if let Some(o) = v.downcast_ref::<CelOptional>() {
        PRINTED_SCALAR + o.inner().map_or(0, |v| printed(v, limit))
    } else {
        PRINTED_SCALAR
    }
}

fn remaining() -> u64 {
    STATE.with(|s| s.borrow().as_ref().map_or(0, |s| s.left))
}

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// `@m(x)`, `@m(x, weight)`: charges reading `x` (`weight` times) and gives it back as is.
fn operand<'b, 'v>(mut args: Args<'b, 'v>) -> Out<'b, 'v> {
    let weight = match args.get(1).and_then(|w| w.downcast_ref::<CelInt>()) {
        Some(w) => u64::try_from(*w.inner()).unwrap_or(u64::MAX),
        None => 1,
    };
    let value = args.swap_remove(0);
    charge(size(value.as_ref(), remaining()).saturating_mul(weight))?;
    Ok(value)
}

/// `@loop(range, body)`: charges a comprehension for its range and for evaluating its body
/// (`body` units) once per element, before it starts.
fn each<'b, 'v>(mut args: Args<'b, 'v>) -> Out<'b, 'v> {
    let body = args.get(1).and_then(|w| w.downcast_ref::<CelInt>());
    let body = body.map_or(1, |w| u64::try_from(*w.inner()).unwrap_or(u64::MAX));
    let range = args.swap_remove(0);
    let items = if let Some(list) = range.downcast_ref::<CelList>() {
        list.inner().len()
    } else if let Some(map) = range.downcast_ref::<CelMap>() {
        map.inner().len()
    } else {
        0
    };
    charge(size(range.as_ref(), remaining()))?;
    charge((items as u64).saturating_mul(body))?;
    Ok(range)
}

/// `@printed(x)`: charges the text `x` prints as (`string(x)`, a format's arguments).
fn print<'b, 'v>(mut args: Args<'b, 'v>) -> Out<'b, 'v> {
    let value = args.swap_remove(0);
    charge(printed(value.as_ref(), remaining()))?;
    Ok(value)
}

/// `@format(f)`: charges a format string for the text its verbs may add to their
/// arguments' (`%.100f` prints 100 digits after the point, `%b` an int's 64 bits).
fn format_verbs<'b, 'v>(mut args: Args<'b, 'v>) -> Out<'b, 'v> {
    let value = args.swap_remove(0);
    if let Some(format) = value.downcast_ref::<CelString>() {
        charge(format.inner().len() as u64 + format_extra(format.inner()))?;
    }
    Ok(value)
}

pub(super) fn format_extra(format: &str) -> u64 {
    let mut extra = 0;
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        let digits = rest
            .strip_prefix('.')
            .map(|r| r.chars().take_while(char::is_ascii_digit).count());
        let precision = digits.and_then(|n| rest[1..1 + n].parse::<u64>().ok());
        rest = &rest[digits.map_or(0, |n| n + 1)..];
        let verb = rest.chars().next();
        extra += match verb {
            Some('f' | 'e') => precision.unwrap_or(6).saturating_add(PRINTED_SCALAR),
            Some('b') => 64,
            Some('d' | 'o' | 'x' | 'X') => 24,
            _ => 0,
        };
        rest = &rest[verb.map_or(0, char::len_utf8)..];
    }
    extra
}

/// Registers the metering functions on `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    use cel::common::types::{DYN_TYPE, INT_TYPE};
    env.add_overload("@m", "@m", vec![DYN_TYPE], operand)?;
    env.add_overload("@m", "@m_weighted", vec![DYN_TYPE, INT_TYPE], operand)?;
    env.add_overload("@loop", "@loop", vec![DYN_TYPE, INT_TYPE], each)?;
    env.add_overload("@printed", "@printed", vec![DYN_TYPE], print)?;
    env.add_overload("@format", "@format", vec![DYN_TYPE], format_verbs)?;
    Ok(())
}
