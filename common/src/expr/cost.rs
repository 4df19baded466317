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
//! Every estimate is an upper bound; where a function's result is not modelled below, it
//! is assumed to be no larger than its operands together, which holds for the standard
//! library and the strings and math extensions (comparisons, `size`, `substring`,
//! `trim`, conversions between numbers, ...).

use super::Vars;
use cel::Value;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::objects::Key;

/// Most units of work (values built, bytes copied, nodes visited) an expression may need;
/// a few hundred milliseconds and tens of MiB of the master at worst.
pub(super) const MAX_COST: f64 = 5e6;

/// Bound on the text of one printed value, per unit of its size: a double prints as up
/// to 24 characters, a list adds brackets, commas and quotes.
const PRINTED_PER_UNIT: f64 = 32.0;

/// What a value can amount to.
#[derive(Clone, Copy, Debug)]
struct Est {
    /// Units in the whole value.
    size: f64,
    /// Elements (or keys) an iteration over it visits.
    items: f64,
    /// Units in the largest element (or key).
    item: f64,
}

impl Est {
    fn scalar() -> Self {
        Est::flat(1.0)
    }

    /// A value nothing more is known of than its size.
    fn flat(size: f64) -> Self {
        Est {
            size,
            items: size,
            item: size,
        }
    }
}

/// Refuses `expr` if evaluating it with `vars` could cost more than [`MAX_COST`].
/// Variables it names that `vars` lacks count as scalars: when an expression is checked
/// on its own, before any run, only what its text itself builds is bounded.
pub(super) fn check(expr: &IdedExpr, vars: &Vars) -> Result<(), String> {
    let mut walk = Walk {
        vars,
        bound: Vec::new(),
        cost: 0.0,
    };
    walk.est(expr);
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
    bound: Vec<(&'v str, Est)>,
    cost: f64,
}

impl<'v> Walk<'v> {
    /// The estimate of `e`'s value; adds what computing it costs to `self.cost`: one unit
    /// per node, plus the size of every value built and of every operand a call reads.
    fn est(&mut self, e: &'v IdedExpr) -> Est {
        self.cost += 1.0;
        match &e.expr {
            Expr::Literal(lit) => match lit {
                LiteralValue::String(s) => Est::flat(s.len() as f64),
                LiteralValue::Bytes(b) => Est::flat(b.len() as f64),
                _ => Est::scalar(),
            },
            Expr::Ident(name) => match self.known(e) {
                Some(value) => measure(value),
                None => self.bound_var(name).unwrap_or_else(Est::scalar),
            },
            Expr::Select(select) => match self.known(e) {
                Some(value) => measure(value),
                None => self.est(&select.operand),
            },
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
                self.built(Est {
                    size: size + keys.len() as f64,
                    ..collection(&keys)
                })
            }
            Expr::Struct(strct) => {
                let mut size = 0.0;
                for entry in &strct.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        size += self.est(&field.value).size + 1.0;
                    }
                }
                self.built(Est::flat(size))
            }
            Expr::Call(call) => {
                let operands: Vec<Est> = call
                    .target
                    .iter()
                    .map(|t| &**t)
                    .chain(&call.args)
                    .map(|x| self.est(x))
                    .collect();
                self.cost += operands.iter().map(|x| x.size).sum::<f64>();
                self.built(call_result(&call.func_name, &operands))
            }
            Expr::Comprehension(c) => {
                let range = self.est(&c.iter_range);
                let init = self.est(&c.accu_init);
                let element = Est::flat(range.item);
                let scope = self.bound.len();
                self.bound.push((&c.iter_var, element));
                if let Some(var2) = &c.iter_var2 {
                    self.bound.push((var2, Est::flat(range.size)));
                }
                // The macros' steps add a bounded amount to the accumulator each time
                // (`acc + [f(x)]`, `acc && p(x)`, `p(x) ? acc + 1 : acc`): one pass with the
                // initial accumulator gives that amount and the cost of one iteration.
                self.bound.push((&c.accu_var, init));
                let before = self.cost;
                self.est(&c.loop_cond);
                let step = self.est(&c.loop_step);
                self.cost = before + (self.cost - before) * range.items;
                let grows = (step.size - init.size).max(0.0);
                let accumulated = Est {
                    size: init.size + grows * range.items,
                    items: init.items + range.items,
                    item: init.item.max(grows),
                };
                self.bound.pop();
                self.bound.push((&c.accu_var, accumulated));
                let result = self.est(&c.result);
                self.bound.truncate(scope);
                self.built(result)
            }
            Expr::Unspecified => Est::scalar(),
        }
    }

    /// Charges for building `est`'s value.
    fn built(&mut self, est: Est) -> Est {
        self.cost += est.size;
        est
    }

    /// The comprehension variable `name`, innermost first.
    fn bound_var(&self, name: &str) -> Option<Est> {
        self.bound
            .iter()
            .rev()
            .find(|(var, _)| *var == name)
            .map(|(_, est)| *est)
    }

    /// The value of an identifier or field path whose value is given (`outputs.load.rows`),
    /// so that it is measured rather than bounded by the whole map it is in.
    fn known(&self, e: &IdedExpr) -> Option<&'v Value> {
        match &e.expr {
            Expr::Ident(name) if self.bound_var(name).is_none() => self.vars.values.get(name),
            Expr::Select(select) => match self.known(&select.operand)? {
                Value::Map(map) => map.map.get(&Key::from(select.field.as_str())),
                _ => None,
            },
            _ => None,
        }
    }
}

/// A list's estimate from its elements'.
fn collection(items: &[Est]) -> Est {
    Est {
        size: items.iter().map(|x| x.size).sum::<f64>() + items.len() as f64,
        items: items.len() as f64,
        item: items.iter().map(|x| x.size).fold(0.0, f64::max),
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
    let operand = |i: usize| operands.get(i).map_or(0.0, |x| x.size);
    match function {
        _ if SCALAR.contains(&function) => Est::scalar(),
        operators::ADD => Est {
            size: total,
            items: operands.iter().map(|x| x.items).sum(),
            item: operands.iter().map(|x| x.item).fold(0.0, f64::max),
        },
        // One branch or the other, not both.
        operators::CONDITIONAL => Est::flat(operand(1).max(operand(2))),
        // An element of a list or a value of a map: at most the whole.
        operators::INDEX | operators::OPT_INDEX => Est::flat(operand(0)),
        // `s.replace(old, new)`: every byte of `s` (and its end) can become `new`.
        "replace" => Est::flat((operand(0) + 1.0) * (operand(2) + 1.0)),
        // `list.join(sep)`: a separator between each two elements.
        "join" => Est::flat(operand(0) + operands.first().map_or(0.0, |x| x.items) * operand(1)),
        // `s.split(sep)`: at most one piece per byte, each at most `s`.
        "split" => Est {
            size: 2.0 * operand(0) + 1.0,
            items: operand(0) + 1.0,
            item: operand(0),
        },
        // Each verb of the format can print all of the arguments.
        "format" => Est::flat(operand(0) * (operand(1) + 1.0) * PRINTED_PER_UNIT),
        "string" | "bytes" | "strings.quote" | "quote" => {
            Est::flat((total + 1.0) * PRINTED_PER_UNIT)
        }
        _ => Est::flat(total),
    }
}

/// The size of a given value.
fn measure(value: &Value) -> Est {
    match value {
        Value::String(s) => Est::flat(s.len() as f64),
        Value::Bytes(b) => Est::flat(b.len() as f64),
        Value::List(items) => collection(&items.iter().map(measure).collect::<Vec<_>>()),
        Value::Map(map) => {
            let keys: Vec<Est> = map
                .map
                .keys()
                .map(|k| match k {
                    Key::String(s) => Est::flat(s.len() as f64),
                    _ => Est::scalar(),
                })
                .collect();
            let values = map.map.values().map(|v| measure(v).size).sum::<f64>();
            Est {
                size: collection(&keys).size + values,
                ..collection(&keys)
            }
        }
        _ => Est::scalar(),
    }
}
