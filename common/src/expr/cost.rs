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
//! `trim`, conversions between numbers, ...). Given values are measured, paths into them
//! resolved as the evaluator resolves them; a value computed by the expression is bounded
//! from what it is computed of, generously (a computed number prints as 330 characters).

mod case_fold;

use super::Vars;
use cel::Value;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::objects::Key;
use std::collections::HashMap;

/// Most units of work (values built, bytes copied, nodes visited) an expression may need;
/// about 100 ms of the master and a few hundred MiB at worst (a list element is one unit
/// but 50–100 bytes in the evaluator).
pub(super) const MAX_COST: f64 = 5e6;

/// Where sizes and costs stop growing, so that no product of them overflows into
/// infinity (and `inf - inf` into NaN): far above [`MAX_COST`], so still refused.
const CAP: f64 = 1e30;

/// Bound on the text of one printed scalar: a double prints without an exponent (up to
/// 309 digits before the point, or 323 zeros after it).
const PRINTED_SCALAR: f64 = 330.0;

/// What one verb of a format may add to its argument's text: `%.100f` prints 100 digits
/// after the point, `%b` an int's 64 binary digits.
const FORMAT_VERB: f64 = 110.0;

/// Largest compiled program a `matches` pattern may have (the regex crate's own limit is
/// 10 MiB, whose compile takes most of a second: `\w{200}`). The evaluator compiles the
/// pattern at every call, so the pattern must be known (written in the expression, or a
/// given parameter or output) when the expression is evaluated, and is checked then.
const REGEX_SIZE_LIMIT: usize = 64 << 10;

/// Work charged for compiling a pattern (the regex crate: ~0.67 s for 10 MiB compiled,
/// so about three units a byte), plus a floor; and per byte of text matched, its states
/// at worst (a state takes a dozen bytes or more).
const REGEX_COMPILE_MIN: f64 = 1e3;
const REGEX_COMPILE_PER_BYTE: f64 = 3.0;
const REGEX_BYTES_PER_STATE: f64 = 16.0;

/// Work charged per character whose case a compile folds ([`case_fold`]): about 4 ns
/// each in a release build (`(?i)\p{Any}`, 1.1 million characters, compiles in 4.3 ms).
const REGEX_FOLD_PER_CHAR: f64 = 0.25;

/// Most units of given values the check itself may walk to measure them (each path into
/// a loop's elements walks the list once); past it the expression is refused.
const MAX_MEASURED: f64 = 5e7;

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

/// A string of `size` bytes: printed quoted, each byte escaped at worst.
fn text(size: f64) -> Est {
    Est::flat(size).printing(2.0 * size + 2.0)
}

/// Whether `e`, the target of a call of `function`, names the function's namespace
/// (`strings.quote(s)`): the evaluator decides by the names alone, before any variable.
fn is_namespace(e: &IdedExpr, function: &str) -> bool {
    let Expr::Ident(name) = &e.expr else {
        return false;
    };
    match name.trim_start_matches('.') {
        "strings" => function == "quote",
        "optional" => matches!(function, "of" | "none" | "ofNonZeroValue"),
        "math" => matches!(
            function,
            "abs"
                | "bitAnd"
                | "bitNot"
                | "bitOr"
                | "bitShiftLeft"
                | "bitShiftRight"
                | "bitXor"
                | "ceil"
                | "floor"
                | "isFinite"
                | "isInf"
                | "isNaN"
                | "round"
                | "sign"
                | "sqrt"
                | "trunc"
                | "@max"
                | "@min"
        ),
        _ => false,
    }
}

fn capped(x: f64) -> f64 {
    if x.is_nan() { CAP } else { x.min(CAP) }
}

/// Refuses `expr` if evaluating it with `vars` could cost more than [`MAX_COST`].
/// Variables it names that `vars` lacks count as scalars: when an expression is checked
/// on its own, before any run, only what its text itself builds is bounded.
pub(super) fn check(expr: &IdedExpr, vars: &Vars, text_only: bool) -> Result<(), String> {
    let mut walk = Walk {
        vars,
        text_only,
        bound: Vec::new(),
        cost: 0.0,
        refusal: None,
        measured: HashMap::new(),
        measuring: 0.0,
        compiling: 0.0,
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
    /// Checked on its own, before any run: the values it will read are not known yet.
    text_only: bool,
    /// Comprehension variables in scope, innermost last.
    bound: Vec<Bound<'v>>,
    cost: f64,
    /// Why the expression is refused whatever it costs.
    refusal: Option<String>,
    /// Sizes of the given values measured so far, by address: a value named many times
    /// is walked once.
    measured: HashMap<*const Value, Est>,
    /// Units walked to measure them: the check's own work, not the evaluation's.
    measuring: f64,
    /// Units spent compiling `matches` patterns to size them: the check's work too.
    compiling: f64,
}

/// A comprehension's variable: what it can hold, and the elements it takes in turn when
/// its loop runs over a given list (so that `r.id` is measured on the rows, not bounded
/// by the largest row).
struct Bound<'v> {
    name: &'v str,
    est: Est,
    elements: Option<&'v [Value]>,
}

/// One step of a path into a given value: a field (`.rows`), a key (`['a-b']`) or a list
/// index.
enum Step<'e> {
    Field(&'e str),
    Key(&'e str),
    Index(i64),
}

impl<'v> Walk<'v> {
    /// The estimate of `e`'s value; adds what computing it costs to `self.cost`: one unit
    /// per node, plus the size of every value built and of every operand a call reads.
    /// Past [`MAX_COST`] the walk stops: the answer is a refusal already.
    fn est(&mut self, e: &'v IdedExpr) -> Est {
        if self.cost > MAX_COST || self.refusal.is_some() {
            return Est::scalar();
        }
        self.charge(1.0);
        if let Some((root, steps)) = path(e) {
            // The evaluator tries each dotted prefix of the name in each scope.
            let scopes = self.bound.len() as f64 + 1.0;
            self.charge(scopes * (steps.len() as f64 + 1.0));
            return self.path_est(root, &steps);
        }
        match &e.expr {
            Expr::Literal(lit) => match lit {
                LiteralValue::String(s) => text(s.len() as f64),
                LiteralValue::Bytes(b) => {
                    Est::flat(b.len() as f64).printing(4.0 * b.len() as f64 + 3.0)
                }
                LiteralValue::Int(_) | LiteralValue::UInt(_) => Est::scalar().printing(21.0),
                LiteralValue::Boolean(_) | LiteralValue::Null => Est::scalar().printing(5.0),
                LiteralValue::Double(_) => Est::scalar(),
            },
            // `has(a.b)`: true or false, after reading `a`.
            Expr::Select(select) if select.test => {
                self.est(&select.operand);
                Est::scalar()
            }
            // A field of something computed (an identifier is a path, estimated above).
            Expr::Select(select) => self.est(&select.operand),
            Expr::Ident(_) => Est::scalar(),
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
                // The evaluator reads `.f(x)` as `f(x)`.
                let function = call.func_name.trim_start_matches('.');
                // `strings.quote(s)`: `strings` names the function, it is no operand.
                let target = (call.target.as_deref()).filter(|t| !is_namespace(t, function));
                let operands: Vec<Est> = target
                    .into_iter()
                    .chain(&call.args)
                    .map(|x| self.est(x))
                    .collect();
                let read = operands.iter().map(|x| x.size).sum::<f64>();
                let work = match function {
                    // A needle compared at every position of the haystack.
                    "indexOf" | "lastIndexOf" => {
                        (size_of(&operands, 0) + 1.0) * (size_of(&operands, 1) + 1.0)
                    }
                    "matches" => self.regex_work(call.args.last(), &operands),
                    _ => read,
                };
                self.charge(work);
                let result = match (function, target.map(|t| &t.expr)) {
                    // A format written out: its verbs counted, not bounded by its length.
                    ("format", Some(Expr::Literal(LiteralValue::String(format)))) => {
                        let args = operands.get(1).map_or(0.0, |x| x.printed);
                        text(size_of(&operands, 0) + format_extra(format.inner()) + args)
                    }
                    (function, _) => call_result(function, &operands),
                };
                self.built(result)
            }
            Expr::Comprehension(c) => {
                let range = self.est(&c.iter_range);
                let given = path(&c.iter_range).and_then(|(root, steps)| self.known(root, &steps));
                let elements = match given {
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
    /// A name written `.x` is never a loop's variable: it names the variable `x` given
    /// to the expression, as the evaluator resolves it.
    fn bound_var(&self, name: &str) -> Option<&Bound<'v>> {
        if name.starts_with('.') {
            return None;
        }
        self.bound.iter().rev().find(|b| b.name == name)
    }

    /// A path's estimate: what it names in the elements of a given list its root loops
    /// over, or in a given value; else its root's, the whole of which bounds it.
    fn path_est(&mut self, root: &'v str, steps: &[Step<'v>]) -> Est {
        if let Some(est) = self.on_elements(root, steps) {
            return est;
        }
        if let Some(value) = self.known(root, steps) {
            return self.measured(value);
        }
        let bound = self.bound_var(root).map(|b| b.est);
        match bound {
            Some(est) => est,
            None => match self.vars.values.get(root.trim_start_matches('.')) {
                Some(value) => self.measured(value),
                None => Est::scalar(),
            },
        }
    }

    /// `value`'s size, measured once.
    fn measured(&mut self, value: &'v Value) -> Est {
        if let Some(est) = self.measured.get(&(value as *const Value)) {
            return *est;
        }
        if self.measuring > MAX_MEASURED {
            return Est::flat(CAP);
        }
        let est = measure(value);
        self.measuring += est.size;
        self.measured.insert(value as *const Value, est);
        est
    }

    /// A path into a loop's variable over a given list (`r.id`): the largest value it
    /// names in any element.
    fn on_elements(&mut self, root: &str, steps: &[Step]) -> Option<Est> {
        if steps.is_empty() || self.bound_var(root)?.elements.is_none() {
            return None;
        }
        if self.measuring > MAX_MEASURED {
            return Some(Est::flat(CAP));
        }
        let (mut size, mut printed) = (0.0f64, 0.0f64);
        for value in self.named_values(root, steps)? {
            let est = measure(value);
            size = size.max(est.size);
            printed = printed.max(est.printed);
            self.measuring += est.size + 1.0;
        }
        Some(Est::flat(size).printing(printed))
    }

    /// The given values a path names: one per element when its root is a loop's variable
    /// over a given list, else the one value it names, if it names one.
    fn named_values(&self, root: &str, steps: &[Step]) -> Option<Vec<&'v Value>> {
        match self.bound_var(root) {
            Some(bound) => Some(
                (bound.elements?.iter())
                    .filter_map(|element| follow(element, steps))
                    .collect(),
            ),
            None => Some(vec![self.known(root, steps)?]),
        }
    }

    /// The given value that a path such as `outputs.load.rows[0]` names, so that it is
    /// measured rather than bounded by the whole map it is in. Resolved as the evaluator
    /// resolves names: a loop's variable first, then the longest dotted name of the
    /// path's leading fields that is a variable (a parameter may be called `a.b`; an
    /// index, `a['b']`, is never part of a name), and `.name` from the top.
    fn known(&self, root: &str, steps: &[Step]) -> Option<&'v Value> {
        if self.bound_var(root).is_some() {
            return None;
        }
        let root = root.trim_start_matches('.');
        let fields = steps
            .iter()
            .take_while(|s| matches!(s, Step::Field(_)))
            .count();
        let mut name = root.to_string();
        let mut ends = vec![name.len()];
        for step in &steps[..fields] {
            if let Step::Field(field) = step {
                name.push('.');
                name.push_str(field);
                ends.push(name.len());
            }
        }
        (0..=fields).rev().find_map(|dotted| {
            follow(
                self.vars.values.get(&name[..ends[dotted]])?,
                &steps[dotted..],
            )
        })
    }

    /// What a `matches` call costs: compiling its pattern, and matching it, its compiled
    /// states for each byte of text at worst. The pattern must be written out or named by
    /// a path to a given value (a loop's variable over a given list: each element's), so
    /// that its compiled size can be checked; others are refused.
    fn regex_work(&mut self, pattern: Option<&'v IdedExpr>, operands: &[Est]) -> f64 {
        let text = size_of(operands, 0) + 1.0;
        let patterns: Vec<String> = match pattern.map(|p| (&p.expr, path(p))) {
            Some((Expr::Literal(LiteralValue::String(s)), _)) => vec![s.inner().to_string()],
            // Named, not known before a run.
            Some((_, Some(_))) if self.text_only => return REGEX_COMPILE_MIN + text,
            Some((_, Some((root, steps)))) => {
                let values = self.named_values(root, &steps).unwrap_or_default();
                let distinct: std::collections::BTreeSet<&str> = values
                    .into_iter()
                    .filter_map(|v| match v {
                        Value::String(s) => Some(s.as_str()),
                        _ => None,
                    })
                    .collect();
                distinct.into_iter().map(str::to_string).collect()
            }
            _ => Vec::new(),
        };
        if patterns.is_empty() {
            self.refusal.get_or_insert(
                "matches() takes a pattern written in the expression or named by a parameter \
                 or output (its size is checked before it runs), not one the expression \
                 computes"
                    .to_string(),
            );
            return 0.0;
        }
        let (mut largest, mut compile) = (0usize, 0f64);
        for pattern in &patterns {
            // Compiling here is the check's own work: bounded as an evaluation is.
            if self.compiling > MAX_COST {
                self.refusal.get_or_insert(
                    "matches() is given more patterns than can be checked; use fewer".to_string(),
                );
            }
            if self.refusal.is_some() {
                break;
            }
            let invalid = || {
                format!(
                    "the pattern '{pattern}' is invalid or too large for matches() (it compiles \
                     to more than {REGEX_SIZE_LIMIT} bytes); write a simpler one"
                )
            };
            let Some(folded) = case_fold::folded_chars(pattern) else {
                self.refusal.get_or_insert_with(invalid);
                break;
            };
            // Refused before the check compiles it: each of its tries would fold as much.
            let fold = folded * REGEX_FOLD_PER_CHAR;
            if fold * COMPILE_TRIES > MAX_COST {
                self.refusal.get_or_insert(format!(
                    "the pattern '{pattern}' folds the case of {folded} characters at each \
                     compile (case-insensitive classes); name the cases instead ([A-Za-z]) or \
                     drop (?i)"
                ));
                break;
            }
            let (size, tried, tries) = compiled_size(pattern);
            self.compiling += tried as f64 * REGEX_COMPILE_PER_BYTE + tries * fold;
            match size {
                Some(size) => {
                    largest = largest.max(size);
                    compile = compile.max(size as f64 * REGEX_COMPILE_PER_BYTE + fold);
                }
                None => {
                    self.refusal.get_or_insert_with(invalid);
                }
            }
        }
        let size = largest as f64;
        REGEX_COMPILE_MIN + compile + text * (size / REGEX_BYTES_PER_STATE)
    }
}

/// Most compiles [`compiled_size`] tries: limits doubling from 1 KiB to the largest.
const COMPILE_TRIES: f64 = 7.0;

/// An upper bound on the size `pattern` compiles to (within [`REGEX_SIZE_LIMIT`]), or None
/// when it is invalid or larger; the bytes the attempts may have compiled, and how many
/// attempts there were.
fn compiled_size(pattern: &str) -> (Option<usize>, usize, f64) {
    let (mut limit, mut tried, mut tries) = (1 << 10, 0, 0.0);
    loop {
        tried += limit;
        tries += 1.0;
        let built = regex::RegexBuilder::new(pattern).size_limit(limit).build();
        match built {
            Ok(_) => return (Some(limit), tried, tries),
            Err(regex::Error::CompiledTooBig(_)) if limit < REGEX_SIZE_LIMIT => limit *= 2,
            Err(_) => return (None, tried, tries),
        }
    }
}

/// What the verbs of a format add to their arguments' text: the digits a precision asks
/// for (`%.100f`), binary, octal and hex digits.
fn format_extra(format: &str) -> f64 {
    let mut extra = 0.0;
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        let digits = rest
            .strip_prefix('.')
            .map(|r| r.chars().take_while(char::is_ascii_digit).count());
        let precision = digits.and_then(|n| rest[1..1 + n].parse::<f64>().ok());
        rest = &rest[digits.map_or(0, |n| n + 1)..];
        let verb = rest.chars().next();
        extra += match verb {
            Some('f' | 'e') => precision.unwrap_or(6.0) + 10.0,
            Some('b') => 64.0,
            Some('o' | 'x' | 'X') => 24.0,
            _ => 0.0,
        };
        rest = &rest[verb.map_or(0, char::len_utf8)..];
    }
    extra
}

/// The value `steps` lead to from `value`, if there is one.
fn follow<'a>(mut value: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    for step in steps {
        value = match (value, step) {
            (Value::Map(map), Step::Field(field) | Step::Key(field)) => {
                map.map.get(&Key::from(*field))?
            }
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
                Expr::Literal(LiteralValue::String(s)) => Step::Key(s.inner()),
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
        operators::INDEX | operators::OPT_INDEX => Est::flat(operand(0)).printing(printed(0)),
        // `s.replace(old, new)`: every byte of `s` (and its end) can become `new`.
        "replace" => text((operand(0) + 1.0) * (operand(2) + 1.0)),
        // `list.join(sep)`: a separator between each two elements.
        "join" => text(operand(0) + operands.first().map_or(0.0, |x| x.items) * operand(1)),
        // `s.split(sep)`: at most one piece per byte, each at most `s`.
        "split" => Est {
            items: capped(operand(0) + 1.0),
            item: operand(0),
            ..Est::flat(2.0 * operand(0) + 1.0).printing(5.0 * operand(0) + 5.0)
        },
        // The format's text, each argument printed once (a verb takes one), and what each
        // verb (two characters at least) may add.
        "format" => text(operand(0) * (1.0 + FORMAT_VERB / 2.0) + printed(1)),
        "string" => text(printed(0)),
        // A byte escaped as `\u0001` at worst.
        "quote" => text(6.0 * operand(0) + 2.0),
        "bytes" => {
            Est::flat(operand(0) + printed(0)).printing(4.0 * (operand(0) + printed(0)) + 3.0)
        }
        // No larger than what it reads, a number or text cut from it.
        _ => Est::flat(total).printing(
            operands
                .iter()
                .map(|x| x.printed)
                .sum::<f64>()
                .max(PRINTED_SCALAR),
        ),
    }
}

/// The size of a given value.
fn measure(value: &Value) -> Est {
    match value {
        // In a list it is printed quoted, with escapes.
        Value::String(s) => text(s.len() as f64),
        Value::Bytes(b) => Est::flat(b.len() as f64).printing(4.0 * b.len() as f64 + 3.0),
        Value::Int(_) | Value::UInt(_) => Est::scalar().printing(20.0),
        // 17 significant digits, the zeros its exponent adds, sign and point.
        Value::Float(f) => Est::scalar().printing(f.abs().log10().abs().min(PRINTED_SCALAR) + 20.0),
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
