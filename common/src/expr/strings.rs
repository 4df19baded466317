//! The strings extension's functions whose work is not bounded by what they read, with
//! that work charged first: `replace` and `join` can build far more than they are given
//! (`s.replace('', s)`), and the `cel` crate's `indexOf`/`lastIndexOf` compare the needle
//! at every position (length × length). The results are the extension's, code points
//! counted as it counts them.

use super::budget::charge;
use cel::common::types::{CelInt, CelList, CelString, LIST_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError};

type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn text<'a>(args: &'a [CowVal], i: usize, function: &str) -> Result<&'a str, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(CelString::inner)
        .ok_or_else(|| ExecutionError::function_error(function, "expects a string"))
}

fn int(args: &[CowVal], i: usize) -> Option<i64> {
    Some(*args.get(i)?.downcast_ref::<CelInt>()?.inner())
}

fn owned<'b, 'v>(s: String) -> Out<'b, 'v> {
    Ok(CowVal::owned(CelString::from(s)))
}

/// `s.replace(from, to)`, `s.replace(from, to, n)` (the first `n`, all when negative):
/// charged the length of its result, counted before it is built.
fn replace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (s, from, to) = (
        text(&args, 0, "replace")?,
        text(&args, 1, "replace")?,
        text(&args, 2, "replace")?,
    );
    let limit = int(&args, 3).and_then(|n| usize::try_from(n).ok());
    // An empty `from` matches at every character boundary.
    let found = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    };
    let count = limit.map_or(found, |n| n.min(found)) as u64;
    charge(s.len() as u64 + count.saturating_mul(to.len() as u64))?;
    owned(match limit {
        Some(n) => s.replacen(from, to, n),
        None => s.replace(from, to),
    })
}

/// `list.join()`, `list.join(sep)`: charged the length of its result.
fn join<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let sep = if args.len() > 1 {
        text(&args, 1, "join")?
    } else {
        ""
    };
    let list = args.first().and_then(|a| a.downcast_ref::<CelList>());
    let list = list.ok_or_else(|| ExecutionError::function_error("join", "expects a list"))?;
    let parts = (list.inner().iter())
        .map(|item| item.downcast_ref::<CelString>().map(CelString::inner))
        .collect::<Option<Vec<&str>>>()
        .ok_or_else(|| ExecutionError::function_error("join", "joins only strings"))?;
    let length = parts.iter().map(|p| p.len() as u64).sum::<u64>();
    charge(length + (parts.len() as u64).saturating_mul(sep.len() as u64))?;
    owned(parts.join(sep))
}

fn out_of_range(function: &str, idx: i64) -> ExecutionError {
    ExecutionError::function_error(function, format!("index out of range: {idx}"))
}

/// The byte offset of the code point `chars` into `s` (its end past the last).
fn byte_of(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map_or(s.len(), |(i, _)| i)
}

/// `s.indexOf(needle)`, `s.indexOf(needle, offset)`: in code points; -1 when absent.
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (s, needle) = (text(&args, 0, "indexOf")?, text(&args, 1, "indexOf")?);
    let len = s.chars().count() as i64;
    let offset = match int(&args, 2) {
        None => 0,
        Some(o) if o < 0 => return Err(out_of_range("indexOf", o)),
        Some(o) if needle.is_empty() => return Ok(CowVal::owned(CelInt::from(o.min(len)))),
        Some(o) if o >= len => return Err(out_of_range("indexOf", o)),
        Some(o) => o,
    };
    let start = byte_of(s, offset as usize);
    let found = s[start..].find(needle).map_or(-1, |at| {
        offset + s[start..start + at].chars().count() as i64
    });
    Ok(CowVal::owned(CelInt::from(found)))
}

/// `s.lastIndexOf(needle)`, `s.lastIndexOf(needle, offset)`: the last occurrence starting
/// at or before `offset`, in code points; -1 when absent.
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (s, needle) = (
        text(&args, 0, "lastIndexOf")?,
        text(&args, 1, "lastIndexOf")?,
    );
    let len = s.chars().count() as i64;
    let offset = match int(&args, 2) {
        None => len,
        Some(o) if o < 0 => return Err(out_of_range("lastIndexOf", o)),
        Some(o) if needle.is_empty() => return Ok(CowVal::owned(CelInt::from(o.min(len)))),
        Some(o) if o >= len => return Err(out_of_range("lastIndexOf", o)),
        Some(o) => o,
    };
    let needle_len = needle.chars().count() as i64;
    if needle_len > len {
        return Ok(CowVal::owned(CelInt::from(-1)));
    }
    // Matches may start at `last` at most, so end within its needle's length.
    let last = offset.min(len - needle_len);
    let mut end = (byte_of(s, last as usize) + needle.len()).min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let found = s[..end]
        .rfind(needle)
        .map_or(-1, |at| s[..at].chars().count() as i64);
    Ok(CowVal::owned(CelInt::from(found)))
}

/// Registers the functions under the names [`super::meter`] gives their calls.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    use cel::common::types::INT_TYPE;
    let (s, s_s, s_s_i) = (
        || STRING_TYPE,
        || vec![STRING_TYPE, STRING_TYPE],
        || vec![STRING_TYPE, STRING_TYPE, INT_TYPE],
    );
    env.add_member_overload("@replace", "@replace", s(), s_s(), replace)?;
    env.add_member_overload("@replace", "@replace_n", s(), s_s_i(), replace)?;
    env.add_member_overload("@join", "@join", LIST_TYPE, vec![], join)?;
    env.add_member_overload("@join", "@join_sep", LIST_TYPE, vec![s()], join)?;
    for (name, f) in [
        ("@indexOf", index_of as cel::common::functions::Function),
        ("@lastIndexOf", last_index_of),
    ] {
        env.add_member_overload(name, name, s(), vec![s()], f)?;
        let offset = format!("{name}_offset");
        env.add_member_overload(name, &offset, s(), vec![s(), INT_TYPE], f)?;
    }
    Ok(())
}
