//! Rewrites a parsed expression so that evaluating it charges its work to the budget
//! ([`super::budget`]) as it goes: each operand a function or operator reads, each element
//! a literal copies, each loop before it runs (its range, and its body once per element),
//! and the functions that can build more than they read through metered versions.
//!
//! What is left unwrapped does work independent of the sizes of values: `&&`, `||`,
//! `!`, `?:`, a field or an index looked up in its container, a loop's accumulator (the
//! loop's charges cover it), a namespace (`math` in `math.abs(x)`). Every node's own
//! evaluation is charged as a step (and the bytes of the names it looks up, once per
//! scope it tries) by the loop whose body holds it, or once for the whole expression.

use super::budget;
use cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue, operators};
use cel::common::types::CelInt;
use cel::{ExecutionError, IdedExpr};
use std::sync::Arc;

/// Functions called through a namespace (`math.abs(x)`, `strings.quote(s)`): the `cel`
/// crate picks them by these names before any variable, so their target is no operand.
/// A new one is not listed until priced here: its namespace is then read as a variable
/// and the call fails.
const NAMESPACED: &[&str] = &[
    "math.abs",
    "math.bitAnd",
    "math.bitNot",
    "math.bitOr",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.bitXor",
    "math.ceil",
    "math.floor",
    "math.isFinite",
    "math.isInf",
    "math.isNaN",
    "math.round",
    "math.sign",
    "math.sqrt",
    "math.trunc",
    "math.@max",
    "math.@min",
    "strings.quote",
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
];

/// Functions replaced by metered versions ([`super::strings`], [`super::pattern`]).
const METERED: &[&str] = &["replace", "join", "indexOf", "lastIndexOf", "matches"];

/// `e` as its expression was written: an error that names a metered function by the name
/// [`meter`] gave its call (`@replace`) names the function the expression calls
/// (`replace`). The rest is left as it is.
pub(super) fn as_written(e: ExecutionError) -> ExecutionError {
    match e {
        ExecutionError::NoSuchOverload(overload) => match written(overload.function()) {
            Some(name) => {
                let types = overload.argument_types().to_vec();
                if overload.is_member_function() {
                    ExecutionError::no_such_member_overload(name, types)
                } else {
                    ExecutionError::no_such_overload(name, types)
                }
            }
            None => ExecutionError::NoSuchOverload(overload),
        },
        ExecutionError::FunctionError { function, message } => match written(&function) {
            Some(name) => ExecutionError::function_error(name, message),
            None => ExecutionError::FunctionError { function, message },
        },
        // A method called as a function (`replace(s, a, b)`).
        ExecutionError::UndeclaredReference(function) => match written(&function) {
            Some(name) => ExecutionError::UndeclaredReference(Arc::new(name.to_string())),
            None => ExecutionError::UndeclaredReference(function),
        },
        e => e,
    }
}

/// The metered function `function` is the call of, if it is one.
fn written(function: &str) -> Option<&str> {
    let name = function.strip_prefix('@')?;
    METERED.contains(&name).then_some(name)
}

/// Rewrites `e`; gives the steps evaluating it once takes, loops' bodies aside.
/// `scopes` is how many scopes a name is looked up in (one per enclosing loop, plus the
/// variables).
pub(super) fn meter(e: &mut IdedExpr, scopes: u64) -> u64 {
    // Each dotted prefix of a name is tried in each scope.
    if let Some((segments, length)) = qualified(e) {
        return scopes * segments * (length + 1);
    }
    match &mut e.expr {
        // A field, or a function, is looked up by its name.
        Expr::Select(select) => 1 + select.field.len() as u64 + meter(&mut select.operand, scopes),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 1,
        Expr::List(list) => {
            let mut steps = 1;
            for element in &mut list.elements {
                steps += meter(element, scopes) + wrap(element, "@m", None);
            }
            steps
        }
        Expr::Map(map) => {
            let mut steps = 1;
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    for part in [&mut entry.key, &mut entry.value] {
                        steps += meter(part, scopes) + wrap(part, "@m", None);
                    }
                }
            }
            steps
        }
        Expr::Struct(s) => {
            let mut steps = 1;
            for entry in &mut s.entries {
                if let EntryExpr::StructField(field) = &mut entry.expr {
                    steps += meter(&mut field.value, scopes) + wrap(&mut field.value, "@m", None);
                }
            }
            steps
        }
        Expr::Comprehension(c) => {
            let steps = 1
                + meter(&mut c.iter_range, scopes)
                + meter(&mut c.accu_init, scopes)
                + meter(&mut c.result, scopes + 1);
            let body =
                1 + meter(&mut c.loop_cond, scopes + 1) + meter(&mut c.loop_step, scopes + 1);
            steps + wrap(&mut c.iter_range, "@loop", Some(body))
        }
        Expr::Call(call) => 1 + call.func_name.len() as u64 + call_steps(call, scopes),
    }
}

fn call_steps(call: &mut CallExpr, scopes: u64) -> u64 {
    let mut steps = 0;
    for arg in &mut call.args {
        steps += meter(arg, scopes);
    }
    let function = call.func_name.trim_start_matches('.').to_string();
    let namespaced = call.target.as_deref().and_then(|t| namespace(t, &function));
    match (&mut call.target, namespaced) {
        (Some(_), Some(name)) => {
            // `strings.quote(s)` writes at most six characters for each byte of `s`.
            let weight = (name == "strings.quote").then_some(6);
            return steps
                + call
                    .args
                    .iter_mut()
                    .map(|a| wrap(a, "@m", weight))
                    .sum::<u64>();
        }
        (Some(target), None) => {
            let how = if function == "format" {
                "@format"
            } else {
                "@m"
            };
            steps += meter(target, scopes) + wrap(target, how, None);
        }
        (None, _) => {}
    }
    if METERED.contains(&function.as_str()) {
        call.func_name = format!("@{function}");
    }
    match function.as_str() {
        operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::LOGICAL_NOT
        | operators::CONDITIONAL
        | operators::NOT_STRICTLY_FALSE
        | operators::OPT_SELECT => {}
        // The container is looked up, not read; the key is hashed.
        operators::INDEX | operators::OPT_INDEX => {
            if let Some(key) = call.args.get_mut(1) {
                steps += wrap(key, "@m", None);
            }
        }
        // A loop's `@result + [x]` appends in place: `x` is charged as the list's element.
        operators::ADD if call.args.first().is_some_and(accumulator) => {}
        // What their arguments print as is what they build.
        "format" | "string" => {
            steps += call
                .args
                .iter_mut()
                .map(|a| wrap(a, "@printed", None))
                .sum::<u64>();
        }
        _ => {
            steps += call
                .args
                .iter_mut()
                .map(|a| wrap(a, "@m", None))
                .sum::<u64>()
        }
    }
    steps
}

/// The function a call on `target` names through its namespace, if it does.
fn namespace(target: &IdedExpr, function: &str) -> Option<&'static str> {
    let Expr::Ident(root) = &target.expr else {
        return None;
    };
    let name = format!("{}.{function}", root.trim_start_matches('.'));
    NAMESPACED.iter().copied().find(|n| *n == name)
}

/// A loop's accumulator, which only the macros' own steps can name.
fn accumulator(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Ident(name) if name.starts_with('@'))
}

/// Segments and length of the dotted name `e` spells (`a.b.c`), if it spells one.
fn qualified(e: &IdedExpr) -> Option<(u64, u64)> {
    match &e.expr {
        Expr::Ident(name) => Some((1, name.len() as u64)),
        Expr::Select(select) if !select.test => {
            let (segments, length) = qualified(&select.operand)?;
            Some((segments + 1, length + 1 + select.field.len() as u64))
        }
        _ => None,
    }
}

/// Replaces `e` with `function(e)`, or `function(e, weight)`; gives 0. A literal is left
/// as it is: what the function would charge for it is known, and given instead.
fn wrap(e: &mut IdedExpr, function: &str, weight: Option<u64>) -> u64 {
    if let Expr::Literal(literal) = &e.expr {
        let text = match literal {
            LiteralValue::String(s) => Some(s.inner()),
            _ => None,
        };
        let size = match literal {
            LiteralValue::String(s) => s.inner().len() as u64,
            LiteralValue::Bytes(b) => b.inner().len() as u64,
            _ => 1,
        };
        return match function {
            "@format" => size + text.map_or(0, budget::format_extra),
            "@printed" if text.is_some() => 4 * size + 3,
            "@printed" => budget::PRINTED_SCALAR,
            _ => size * weight.unwrap_or(1),
        };
    }
    if accumulator(e) {
        return 0;
    }
    let inner = std::mem::replace(
        e,
        IdedExpr {
            id: e.id,
            expr: Expr::Unspecified,
        },
    );
    let mut args = vec![inner];
    if let Some(weight) = weight {
        let weight = i64::try_from(weight).unwrap_or(i64::MAX);
        args.push(IdedExpr {
            id: e.id,
            expr: Expr::Literal(LiteralValue::Int(CelInt::from(weight))),
        });
    }
    e.expr = Expr::Call(CallExpr {
        func_name: function.to_string(),
        target: None,
        args,
    });
    0
}
