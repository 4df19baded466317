//! An upper bound on what evaluating an expression can cost, checked before it runs.
//!
//! CEL has no unbounded loop, but it can still ask for more than a master has: each
//! nested `map`/`filter`/`all`/`exists` multiplies the work by its list's length, and
//! each `replace` can multiply a string's length (`s.replace('', s)`), so a short
//! expression can ask for years of CPU or terabytes of memory. The evaluator cannot be
//! interrupted, so the bound is computed from the parsed expression and the sizes of the
//! values it reads, and an expression over [`MAX_COST`] is refused instead of run.
//!
//! Sizes are in units: a byte of a string, or one scalar, list element or map entry.
//! Where a function's result is not modelled below, it is taken to be no larger than its
//! operands together and to cost reading them, which holds for the rest of the standard
//! library and of the strings and math extensions (comparisons, `size`, `substring`,
//! `trim`, conversions between numbers, ...). The bound is generous, not tight: `string()`
//! of anything counts as a printed double per unit.

use super::Vars;
use cel::Value;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::objects::Key;
use std::collections::HashMap;

/// Most units of work (values built, bytes copied, nodes visited) an expression may need;
/// a few hundred milliseconds and tens of MiB of the master at worst.
pub(super) const MAX_COST: f64 = 5e6;

/// Where sizes and costs stop growing, so that no product of them overflows into
/// infinity (and `inf - inf` into NaN): far above [`MAX_COST`], so still refused.
const CAP: f64 = 1e30;

/// Bound on the text of one printed scalar: a double prints without an exponent (up to
/// 309 digits before the point, `%f` up to 100 after it).
const PRINTED_SCALAR: f64 = 420.0;

/// Work charged for compiling a `matches` pattern that is given (and small, see
/// [`REGEX_SIZE_LIMIT`]), and for one computed while the expression runs.
const REGEX_COMPILE: f64 = 1e4;
const REGEX_COMPILE_UNKNOWN: f64 = 1e6;

/// Largest compiled program a given `matches` pattern may have (the regex crate's own
/// limit is 10 MiB, whose compile takes most of a second: `\w{200}`).
const REGEX_SIZE_LIMIT: usize = 256 << 10;

/// What a value can amount to.
#[derive(Clone, Copy, Debug)]
struct Est {
    /// Units in the whole value.
    size: f64,
    /// Elements (or keys) an iteration over it visits.
    items: f64,
    /// Units in the largest element (or key).
    item: f64,
    /// Characters of its text (`string()`, a format's `%s`).
    printed: f64,
}

impl Est {
    fn scalar() -> Self {
        Est::flat(1.0)
    }

    /// A value nothing more is known of than its size.
    fn flat(size: f64) -> Self {
        let size = capped(size);
        Est {
            size,
            items: size,
            item: size,
            printed: capped(size * PRINTED_SCALAR),
        }
    }

    /// `self` with `printed` characters of text.
    fn printing(self, printed: f64) -> Self {
        Est {
            printed: capped(printed),
            ..self
        }
    }
}

fn capped(x: f64) -> f64 {
    if x.is_nan() { CAP } else { x.min(CAP) }
}

/// Refuses `expr` if evaluating it with `vars` could cost more than [`MAX_COST`].
/// Variables it names that `vars` lacks count as scalars: when an expression is checked
/// on its own, before any run, only what its text itself builds is bounded.
pub(super) fn check(expr: &IdedExpr, vars: &Vars) -> Result<(), String> {
    let mut walk = Walk {
        vars,
        bound: Vec::new(),
        cost: 0.0,
        refusal: None,
        measured: HashMap::new(),
    };
    walk.est(expr);
    if let Some(refusal) = walk.refusal {
        return Err(refusal);
    }
    // Never NaN: every sum and product is `capped`.
    if walk.cost > MAX_COST {
        return Err(format!(
            "this expression could take about {:.0e} steps to evaluate, more than the \
             {MAX_COST:.0e} allowed: loop (map, filter, all, exists) over fewer items, nest \
             fewer loops, or build smaller strings",
            walk.cost
        ));
    }
    Ok(())
}

struct Walk<'v> {
    vars: &'v Vars,
    /// Comprehension variables in scope, innermost last.
    bound: Vec<Bound<'v>>,
    cost: f64,
    /// Why the expression is refused whatever it costs.
    refusal: Option<String>,
    /// Sizes of the given values measured so far, by address: a value named many times
    /// is walked once.
    measured: HashMap<*const Value, Est>,
}

/// A comprehension's variable: what it can hold, and the elements it takes in turn when
/// its loop runs over a given list (so that `r.id` is measured on the rows, not bounded
/// by the largest row).
struct Bound<'v> {
    name: &'v str,
    est: Est,
    elements: Option<&'v [Value]>,
}

/// One step of a path into a given value: a field (`.rows`, `['a-b']`) or a list index.
enum Step<'e> {
    Field(&'e str),
    Index(i64),
}

impl<'v> Walk<'v> {
    /// The estimate of `e`'s value; adds what computing it costs to `self.cost`: one unit
    /// per node, plus the size of every value built and of every operand a call reads.
    /// Past [`MAX_COST`] the walk stops: the answer is a refusal already.
    fn est(&mut self, e: &'v IdedExpr) -> Est {
        if self.cost > MAX_COST {
            return Est::scalar();
        }
        self.charge(1.0);
        if let Some(est) = self.on_elements(e) {
            return est;
        }
        if let Some(value) = self.known(e) {
            return *self
                .measured
                .entry(value as *const Value)
                .or_insert_with(|| measure(value));
        }
        match &e.expr {
            Expr::Literal(lit) => match lit {
                LiteralValue::String(s) => Est::flat(s.len() as f64),
                LiteralValue::Bytes(b) => Est::flat(b.len() as f64),
                _ => Est::scalar(),
            },
            Expr::Ident(name) => self.bound_var(name).map_or_else(Est::scalar, |b| b.est),
            Expr::Select(select) => self.est(&select.operand),
            Expr::List(list) => {
                let items: Vec<Est> = list.elements.iter().map(|x| self.est(x)).collect();
                self.built(collection(&items))
            }
            Expr::Map(map) => {
                let mut keys = Vec::new();
                let mut size = 0.0;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        let key = self.est(&entry.key);
                        size += key.size + self.est(&entry.value).size;
                        keys.push(key);
                    }
                }
                self.built(
                    Est {
                        size: capped(size + keys.len() as f64),
                        ..collection(&keys)
                    }
                    .printing(size * PRINTED_SCALAR),
                )
            }
            // No struct type is registered: it fails at once.
            Expr::Struct(_) | Expr::Unspecified => Est::scalar(),
            Expr::Call(call) => {
                let operands: Vec<Est> = call
                    .target
                    .iter()
                    .map(|t| &**t)
                    .chain(&call.args)
                    .map(|x| self.est(x))
                    .collect();
                let read = operands.iter().map(|x| x.size).sum::<f64>();
                let work = match call.func_name.as_str() {
                    // A needle compared at every position of the haystack.
                    "indexOf" | "lastIndexOf" => {
                        (size_of(&operands, 0) + 1.0) * (size_of(&operands, 1) + 1.0)
                    }
                    "matches" => self.regex_work(call.args.last(), &operands),
                    _ => read,
                };
                self.charge(work);
                self.built(call_result(&call.func_name, &operands))
            }
            Expr::Comprehension(c) => {
                let range = self.est(&c.iter_range);
                let elements = match self.known(&c.iter_range) {
                    Some(Value::List(items)) => Some(items.as_slice()),
                    _ => None,
                };
                let init = self.est(&c.accu_init);
                // Each element is copied into the loop's variable.
                self.charge(range.size);
                let scope = self.bound.len();
                self.bound.push(Bound {
                    name: &c.iter_var,
                    est: Est::flat(range.item),
                    elements,
                });
                // The macros' steps add a bounded amount to the accumulator each time
                // (`acc + [f(x)]`, `acc && p(x)`, `p(x) ? acc + 1 : acc`): one pass with the
                // initial accumulator gives that amount and the cost of one iteration.
                self.bound.push(Bound {
                    name: &c.accu_var,
                    est: init,
                    elements: None,
                });
                let before = self.cost;
                self.est(&c.loop_cond);
                let step = self.est(&c.loop_step);
                let per_iteration = self.cost - before;
                self.cost = capped(before + per_iteration * range.items);
                let grows = (step.size - init.size).max(0.0);
                let accumulated = Est::flat(init.size + grows * range.items);
                let accumulated = Est {
                    items: capped(init.items + range.items),
                    item: init.item.max(grows),
                    ..accumulated
                };
                self.bound.pop();
                self.bound.push(Bound {
                    name: &c.accu_var,
                    est: accumulated,
                    elements: None,
                });
                let result = self.est(&c.result);
                self.bound.truncate(scope);
                result
            }
        }
    }

    fn charge(&mut self, units: f64) {
        self.cost = capped(self.cost + units);
    }

    /// Charges for building `est`'s value.
    fn built(&mut self, est: Est) -> Est {
        self.charge(est.size);
        est
    }

    /// The comprehension variable `name`, innermost first.
    fn bound_var(&self, name: &str) -> Option<&Bound<'v>> {
        self.bound.iter().rev().find(|b| b.name == name)
    }

    /// A path into a loop's variable over a given list (`r.id`): the largest value it
    /// names in any element.
    fn on_elements(&self, e: &IdedExpr) -> Option<Est> {
        let (root, steps) = path(e)?;
        let elements = self.bound_var(root)?.elements?;
        if steps.is_empty() {
            return None;
        }
        let (mut size, mut printed) = (0.0f64, 0.0f64);
        for value in elements
            .iter()
            .filter_map(|element| follow(element, &steps))
        {
            let est = measure(value);
            size = size.max(est.size);
            printed = printed.max(est.printed);
        }
        Some(Est::flat(size).printing(printed))
    }

    /// The given value that a path such as `outputs.load.rows[0]` names, so that it is
    /// measured rather than bounded by the whole map it is in. Resolved as the evaluator
    /// resolves names: a loop's variable first, then the longest dotted name that is a
    /// variable (a parameter may be called `a.b`), and `.name` from the top.
    fn known(&self, e: &IdedExpr) -> Option<&'v Value> {
        let (root, steps) = path(e)?;
        let (absolute, root) = match root.strip_prefix('.') {
            Some(root) => (true, root),
            None => (false, root),
        };
        if !absolute && self.bound_var(root).is_some() {
            return None;
        }
        let fields = steps
            .iter()
            .take_while(|s| matches!(s, Step::Field(_)))
            .count();
        (0..=fields).rev().find_map(|dotted| {
            let mut name = root.to_string();
            for step in &steps[..dotted] {
                if let Step::Field(field) = step {
                    name.push('.');
                    name.push_str(field);
                }
            }
            follow(self.vars.values.get(&name)?, &steps[dotted..])
        })
    }

    /// What a `matches` call costs: compiling its pattern (refused when the pattern is
    /// given and compiles too large) and matching, pattern times text at worst.
    fn regex_work(&mut self, pattern: Option<&IdedExpr>, operands: &[Est]) -> f64 {
        let given = pattern.and_then(|p| match &p.expr {
            Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_string()),
            _ => match self.known(p)? {
                Value::String(s) => Some(s.to_string()),
                _ => None,
            },
        });
        let compile = match given {
            Some(pattern) => {
                let small = regex::RegexBuilder::new(&pattern)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build();
                if let Err(e) = small {
                    self.refusal.get_or_insert(format!(
                        "the pattern '{pattern}' is too large or invalid for matches(): {e}"
                    ));
                }
                REGEX_COMPILE
            }
            None => REGEX_COMPILE_UNKNOWN,
        };
        compile + (size_of(operands, 0) + 1.0) * (size_of(operands, 1) + 1.0)
    }
}

/// The value `steps` lead to from `value`, if there is one.
fn follow<'a>(mut value: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    for step in steps {
        value = match (value, step) {
            (Value::Map(map), Step::Field(field)) => map.map.get(&Key::from(*field))?,
            (Value::Map(map), Step::Index(i)) => map.map.get(&Key::from(*i))?,
            (Value::List(items), Step::Index(i)) => items.get(usize::try_from(*i).ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// `e` as a root name and the steps after it, if it is such a path.
fn path(e: &IdedExpr) -> Option<(&str, Vec<Step<'_>>)> {
    match &e.expr {
        Expr::Ident(name) => Some((name, Vec::new())),
        Expr::Select(select) if !select.test => {
            let (root, mut steps) = path(&select.operand)?;
            steps.push(Step::Field(&select.field));
            Some((root, steps))
        }
        Expr::Call(call) if call.func_name == operators::INDEX && call.args.len() == 2 => {
            let (root, mut steps) = path(&call.args[0])?;
            steps.push(match &call.args[1].expr {
                Expr::Literal(LiteralValue::String(s)) => Step::Field(s.inner()),
                Expr::Literal(LiteralValue::Int(i)) => Step::Index(*i.inner()),
                _ => return None,
            });
            Some((root, steps))
        }
        _ => None,
    }
}

fn size_of(operands: &[Est], i: usize) -> f64 {
    operands.get(i).map_or(0.0, |x| x.size)
}

/// A list's estimate from its elements'.
fn collection(items: &[Est]) -> Est {
    let n = items.len() as f64;
    Est {
        size: capped(items.iter().map(|x| x.size).sum::<f64>() + n),
        items: n,
        item: items.iter().map(|x| x.size).fold(0.0, f64::max),
        // Brackets, and a comma and a space after each.
        printed: capped(items.iter().map(|x| x.printed).sum::<f64>() + 2.0 * n + 2.0),
    }
}

/// Functions whose result is a number or a boolean, whatever they read.
const SCALAR: &[&str] = &[
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::NOT_STRICTLY_FALSE,
    operators::IN,
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "indexOf",
    "lastIndexOf",
    "int",
    "uint",
    "double",
];

/// What calling `function` on `operands` (its target first) can give.
fn call_result(function: &str, operands: &[Est]) -> Est {
    let total = operands.iter().map(|x| x.size).sum::<f64>();
    let operand = |i: usize| size_of(operands, i);
    let printed = |i: usize| operands.get(i).map_or(0.0, |x| x.printed);
    match function {
        _ if SCALAR.contains(&function) => Est::scalar(),
        operators::ADD => Est {
            size: capped(total),
            items: capped(operands.iter().map(|x| x.items).sum()),
            item: operands.iter().map(|x| x.item).fold(0.0, f64::max),
            printed: capped(operands.iter().map(|x| x.printed).sum()),
        },
        // One branch or the other, not both.
        operators::CONDITIONAL => {
            let branch = |i: usize| operands.get(i).copied().unwrap_or_else(Est::scalar);
            let (a, b) = (branch(1), branch(2));
            Est::flat(a.size.max(b.size)).printing(a.printed.max(b.printed))
        }
        // An element of a list or a value of a map: at most the whole.
        operators::INDEX | operators::OPT_INDEX => Est::flat(operand(0)),
        // `s.replace(old, new)`: every byte of `s` (and its end) can become `new`.
        "replace" => Est::flat((operand(0) + 1.0) * (operand(2) + 1.0)),
        // `list.join(sep)`: a separator between each two elements.
        "join" => Est::flat(operand(0) + operands.first().map_or(0.0, |x| x.items) * operand(1)),
        // `s.split(sep)`: at most one piece per byte, each at most `s`.
        "split" => Est {
            items: capped(operand(0) + 1.0),
            item: operand(0),
            ..Est::flat(2.0 * operand(0) + 1.0)
        },
        // The format's text, and each argument printed once (a verb takes one).
        "format" => Est::flat(operand(0) + printed(1)),
        "string" => Est::flat(printed(0)),
        // A byte escaped as `\u0001` at worst.
        "quote" => Est::flat(6.0 * operand(0) + 2.0),
        "bytes" => Est::flat(operand(0) + printed(0)),
        _ => Est::flat(total),
    }
}

/// The size of a given value.
fn measure(value: &Value) -> Est {
    match value {
        // In a list it is printed quoted, with escapes.
        Value::String(s) => Est::flat(s.len() as f64).printing(2.0 * s.len() as f64 + 2.0),
        Value::Bytes(b) => Est::flat(b.len() as f64).printing(4.0 * b.len() as f64 + 3.0),
        Value::Int(i) => Est::scalar().printing(i.to_string().len() as f64),
        Value::UInt(u) => Est::scalar().printing(u.to_string().len() as f64 + 1.0),
        Value::Float(f) => Est::scalar().printing(f.to_string().len() as f64),
        Value::Bool(_) | Value::Null => Est::scalar().printing(5.0),
        Value::List(items) => collection(&items.iter().map(measure).collect::<Vec<_>>()),
        Value::Map(map) => {
            let keys: Vec<Est> = map
                .map
                .keys()
                .map(|k| match k {
                    Key::String(s) => {
                        Est::flat(s.len() as f64).printing(2.0 * s.len() as f64 + 2.0)
                    }
                    _ => Est::scalar().printing(21.0),
                })
                .collect();
            let values: Vec<Est> = map.map.values().map(measure).collect();
            let sum = |f: fn(&Est) -> f64| keys.iter().chain(&values).map(f).sum::<f64>();
            Est {
                size: capped(sum(|x| x.size) + keys.len() as f64),
                ..collection(&keys)
            }
            // Braces, and `: ` and `, ` for each entry.
            .printing(sum(|x| x.printed) + 4.0 * keys.len() as f64 + 2.0)
        }
        _ => Est::scalar(),
    }
}
