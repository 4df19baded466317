//! `matches`, with its compile and its matching charged to the evaluation's budget.
//!
//! The `cel` crate compiles the pattern at every call with the regex crate's default
//! limit (10 MiB of program, most of a second: `\w{200}`). Here a pattern is compiled
//! once per evaluation, within [`SIZE_LIMIT`], and charged for the bytes its compiles
//! built and the characters their case folding walked ([`case_fold`]); matching is
//! charged its compiled states for each byte of text, the regex crate's worst case.

mod case_fold;

use super::budget::{self, Compiled, MAX_STEPS};
use cel::common::types::{CelBool, CelString};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError};

/// Largest compiled program a pattern may have, and largest cache its matching may fill.
const SIZE_LIMIT: usize = 64 << 10;

/// Work charged per byte compiled (the regex crate: ~0.67 s for 10 MiB, so about three
/// units a byte), plus a floor; and per byte of text matched, its states at worst (a
/// state takes a dozen bytes or more).
const COMPILE_MIN: u64 = 1_000;
const COMPILE_PER_BYTE: u64 = 3;
const BYTES_PER_STATE: u64 = 16;

/// Work charged per character whose case a compile folds: about 4 ns each in a release
/// build (`(?i)\p{Any}`, 1.1 million characters, compiles in 4.3 ms).
const FOLD_PER_CHAR: f64 = 0.25;

/// Most compiles [`compile`] tries: limits doubling from 1 KiB to [`SIZE_LIMIT`].
const COMPILE_TRIES: f64 = 7.0;

/// `text.matches(pattern)` and `matches(text, pattern)`.
fn matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = |i: usize| args.get(i).and_then(|a| a.downcast_ref::<CelString>());
    let (Some(text), Some(pattern)) = (text(0), text(1)) else {
        return Err(ExecutionError::function_error(
            "matches",
            "takes two strings",
        ));
    };
    let compiled = budget::regex(pattern.inner(), compile)?;
    let states = (compiled.size as u64) / BYTES_PER_STATE;
    budget::charge((text.inner().len() as u64 + 1).saturating_mul(states))?;
    let found = compiled.regex.is_match(text.inner());
    Ok(CowVal::owned(CelBool::from(found)))
}

/// Compiles `pattern` within [`SIZE_LIMIT`], charging each try; refuses a pattern that is
/// invalid, larger, or folds more than a budget's worth of characters.
fn compile(pattern: &str) -> Result<Compiled, ExecutionError> {
    let invalid = || {
        budget::refuse(format!(
            "the pattern '{pattern}' is invalid or too large for matches() (it compiles to \
             more than {SIZE_LIMIT} bytes); write a simpler one"
        ))
    };
    let folded = case_fold::folded_chars(pattern).ok_or_else(invalid)?;
    // Refused before any compile: each try would fold as much.
    let fold = folded * FOLD_PER_CHAR;
    if fold * COMPILE_TRIES > MAX_STEPS as f64 {
        return Err(budget::refuse(format!(
            "the pattern '{pattern}' folds the case of {folded} characters at each compile \
             (case-insensitive classes); name the cases instead ([A-Za-z]) or drop (?i)"
        )));
    }
    let mut limit = 1 << 10;
    loop {
        budget::charge(COMPILE_MIN + limit as u64 * COMPILE_PER_BYTE + fold as u64)?;
        // Its lazy DFA's cache is bounded as its program is: many patterns stay small.
        let built = regex::RegexBuilder::new(pattern)
            .size_limit(limit)
            .dfa_size_limit(SIZE_LIMIT)
            .build();
        match built {
            Ok(regex) => return Ok(Compiled { regex, size: limit }),
            Err(regex::Error::CompiledTooBig(_)) if limit < SIZE_LIMIT => limit *= 2,
            Err(_) => return Err(invalid()),
        }
    }
}

/// Registers `matches` under the name [`super::meter`] gives its calls.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    use cel::common::types::STRING_TYPE;
    let strings = vec![STRING_TYPE, STRING_TYPE];
    env.add_overload("@matches", "@matches", strings, matches)?;
    env.add_member_overload(
        "@matches",
        "@string.matches",
        STRING_TYPE,
        vec![STRING_TYPE],
        matches,
    )
}
