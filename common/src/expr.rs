//! Expressions of switch cases, do_while conditions and foreach items: CEL (the Common
//! Expression Language, through the `cel` crate) with its standard library plus the
//! strings and math extensions. CEL cannot loop without bound, call out or write
//! anything, and each evaluation runs within a budget of work ([`budget`]), so a
//! definition's expressions are safe to evaluate on the master.
//!
//! What an expression sees ([`Vars`]): each parameter of the task by name (`region`),
//! dotted names as fields (`error.message`), all of them in `params` (`params['a-b']`),
//! the outputs of the run's finished tasks as `outputs.<task>.<name>`, and a foreach's
//! item. A value that reads as a JSON number, boolean, array or object has that type
//! (`count > 10`, `outputs.load.rows[0].n`); anything else is a string.
//! `${name}` still works and means the parameter `name`, so switch cases written for the
//! old comparison language (`"${region} == 'eu'"`) keep working.
//!
//! An expression whose work exceeds its budget is refused while it runs, whatever the
//! values it reads; one that exceeds it on its own text (reading no value) is refused
//! already when its definition is checked.

use cel::objects::{Key, Map};
use cel::{Context, Env, IdedExpr, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

mod budget;
mod meter;
mod pattern;
mod strings;

/// Longest expression accepted: anything longer is a data problem, not a condition.
const MAX_LEN: usize = 4096;

/// Deepest nesting of brackets accepted.
const MAX_NESTING: usize = 32;

/// The stack the parser and evaluator run on. The CEL parser is generated (ANTLR) and
/// recursive with large frames; its own recursion limit does not keep it within a
/// default thread stack. The memory is reserved, not touched, until used.
const STACK: usize = 256 << 20;

/// A checked expression, metered ([`meter`]), ready to evaluate any number of times.
pub struct Expr {
    ast: IdedExpr,
    /// Steps evaluating it once takes, loops' bodies aside.
    steps: u64,
}

/// The values an expression can name.
#[derive(Default)]
pub struct Vars {
    values: HashMap<String, Value>,
}

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // The crate's own extensions, and ours under names no expression can spell
        // (`@m`), cannot clash with the standard library.
        env.add_extension(cel::extensions::strings)
            .and_then(|()| env.add_extension(cel::extensions::math))
            .and_then(|()| env.add_extension(budget::register))
            .and_then(|()| env.add_extension(strings::register))
            .and_then(|()| env.add_extension(pattern::register))
            .expect("CEL extensions register on the standard library");
        Arc::new(env)
    })
}

/// Parses `text`; the error names the column and what is wrong there.
/// An expression refused on its own text is refused here: it is run once without values,
/// which ends at the first value it reads or at its budget.
pub fn parse(text: &str) -> Result<Expr, String> {
    let source = checked(text)?;
    on_big_stack(|| {
        let expr = compile(&source)?;
        // Any other error (a parameter it names, missing here) is for its runs to tell.
        let _trial = budget::metered(|| execute(&expr, &Vars::default()))?;
        Ok(expr)
    })
}

/// Parses and evaluates `text` in one go (one compile, one thread): what a run does with
/// an expression it evaluates once.
pub fn eval(text: &str, vars: &Vars) -> Result<serde_json::Value, String> {
    let source = checked(text)?;
    on_big_stack(|| budget::metered(|| execute(&compile(&source)?, vars))?)
}

/// [`eval`] of a condition, which must give true or false.
pub fn holds(text: &str, vars: &Vars) -> Result<bool, String> {
    boolean(eval(text, vars)?)
}

/// The CEL source of `text`, once its size, legacy forms and nesting are acceptable.
fn checked(text: &str) -> Result<String, String> {
    if text.len() > MAX_LEN {
        return Err(format!("an expression may be at most {MAX_LEN} characters"));
    }
    legacy_bare_words(text)?;
    let source = legacy_refs(text)?;
    check_nesting(&source)?;
    Ok(source)
}

/// Evaluates `expr`; call it within [`budget::metered`].
fn execute(expr: &Expr, vars: &Vars) -> Result<serde_json::Value, String> {
    let mut ctx = Context::with_env(env().clone());
    for (name, value) in &vars.values {
        ctx.add_variable_from_value(name.clone(), value.clone());
    }
    let value = budget::charge(expr.steps)
        .and_then(|()| Value::resolve(&expr.ast, &ctx))
        .map_err(|e| match meter::as_written(e) {
            cel::ExecutionError::UndeclaredReference(name) => {
                format!("'{name}' is not a parameter or output here (quote text: '{name}')")
            }
            e => e.to_string(),
        })?;
    to_json(&value)
}

fn boolean(value: serde_json::Value) -> Result<bool, String> {
    match value {
        serde_json::Value::Bool(b) => Ok(b),
        other => Err(format!(
            "a condition must be true or false, this one gave {other}"
        )),
    }
}

/// Parses `source` and meters it.
fn compile(source: &str) -> Result<Expr, String> {
    let mut ast = env().parser().parse(source).map_err(|errors| {
        errors
            .errors
            .iter()
            .map(|e| format!("column {}: {}", e.pos.1 + 1, e.msg))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let steps = meter::meter(&mut ast, 1);
    Ok(Expr { ast, steps })
}

/// Runs `f` on a thread with a large stack; a panic in it is a refusal, not a crash (the
/// parser and evaluator are third-party code fed user input).
fn on_big_stack<T: Send>(f: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("expr".into())
            .stack_size(STACK)
            .spawn_scoped(scope, f)
            .map_err(|e| format!("cannot evaluate the expression now: {e}"))?;
        worker
            .join()
            .unwrap_or_else(|_| Err("the expression could not be evaluated".to_string()))
    })
}

/// Refuses brackets nested deeper than [`MAX_NESTING`] (outside quotes). Strings are
/// skipped as CEL reads them: `'…'`, `"…"`, tripled `'''…'''`, and raw (`r'…'`, where a
/// backslash escapes nothing).
fn check_nesting(source: &str) -> Result<(), String> {
    let chars: Vec<char> = source.chars().collect();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            q @ ('\'' | '"') => {
                let prefix = chars[..i].iter().rev().take(2);
                let raw = prefix
                    .take_while(|c| c.is_ascii_alphabetic())
                    .any(|c| matches!(c, 'r' | 'R'));
                let tripled = [q; 3];
                let close = if chars[i..].starts_with(&tripled) {
                    &tripled[..]
                } else {
                    &tripled[..1]
                };
                i += close.len();
                while i < chars.len() && !chars[i..].starts_with(close) {
                    i += if chars[i] == '\\' && !raw { 2 } else { 1 };
                }
                i += close.len();
                continue;
            }
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    let column = chars[..i].iter().map(|c| c.len_utf8()).sum::<usize>() + 1;
                    return Err(format!(
                        "column {column}: brackets nested deeper than {MAX_NESTING}"
                    ));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// A bare word at the start of `s` (not a literal, `params`/`outputs`, a call, a field
/// access or an index).
fn bare_word(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let (w, rest) = s.split_at(end);
    let plain = w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && !matches!(w, "true" | "false" | "null" | "params" | "outputs")
        && !rest.trim_start().starts_with(['(', '.', '[']);
    plain.then_some(w)
}

/// Refuses what the old comparison language read as text and CEL would read as a name: a
/// bare word compared with a `${name}` (`${region} == eu`), with how to write it now.
fn legacy_bare_words(text: &str) -> Result<(), String> {
    const OPS: [&str; 6] = ["==", "!=", ">=", "<=", ">", "<"];
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else {
            return Ok(());
        };
        let after = rest[start + end + 1..].trim_start();
        let before = rest[..start].trim_end();
        let operand = OPS.iter().find_map(|op| {
            let right = after
                .strip_prefix(op)
                .and_then(|r| bare_word(r.trim_start()));
            let left = before.strip_suffix(op).and_then(|l| {
                let l = l.trim_end();
                let from = l
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                let preceded = l[..from].trim_end().ends_with('.');
                bare_word(&l[from..]).filter(|_| !preceded)
            });
            right.or(left)
        });
        if let Some(w) = operand {
            return Err(format!(
                "'{w}' is a bare word next to a ${{...}}: expressions are CEL now, where text is quoted ('{w}')"
            ));
        }
        rest = &rest[start + end + 1..];
    }
    Ok(())
}

/// `${name}` → `params['name']`: the parameter, typed like any other value.
fn legacy_refs(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| {
            let column = text.len() - rest.len() + start + 1;
            format!("column {column}: '${{' is not closed")
        })?;
        let name = after[..end].trim();
        if name.is_empty() || name.contains(['\'', '\\']) {
            return Err(format!("'${{{name}}}' does not name a parameter"));
        }
        out.push_str(&format!("params['{name}']"));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Expr {
    /// The expression's value, as JSON.
    pub fn eval(&self, vars: &Vars) -> Result<serde_json::Value, String> {
        on_big_stack(|| budget::metered(|| execute(self, vars))?)
    }

    /// Whether a condition holds: it must evaluate to a boolean.
    pub fn holds(&self, vars: &Vars) -> Result<bool, String> {
        boolean(self.eval(vars)?)
    }
}

impl Vars {
    /// A task's parameters: each by name, dotted names as fields, all in `params`.
    pub fn with_params(params: &BTreeMap<String, String>) -> Self {
        let mut vars = Vars::default();
        let mut nested: BTreeMap<&str, HashMap<Key, Value>> = BTreeMap::new();
        for (name, raw) in params {
            let value = typed(raw);
            match name.split_once('.') {
                Some((head, field)) if !params.contains_key(head) => {
                    nested
                        .entry(head)
                        .or_default()
                        .insert(Key::from(field.to_string()), value);
                }
                _ => {
                    vars.values.insert(name.clone(), value);
                }
            }
        }
        for (head, fields) in nested {
            vars.values.insert(head.to_string(), map(fields));
        }
        let all = params
            .iter()
            .map(|(k, v)| (Key::from(k.clone()), typed(v)))
            .collect();
        vars.values.insert("params".into(), map(all));
        vars
    }

    /// The outputs of finished tasks, as `outputs.<task>.<name>`.
    pub fn outputs<'a>(
        mut self,
        tasks: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
    ) -> Self {
        let by_task = tasks
            .into_iter()
            .map(|(task, outs)| {
                let fields = outs
                    .iter()
                    .map(|(k, v)| (Key::from(k.clone()), typed(v)))
                    .collect();
                (Key::from(task.to_string()), map(fields))
            })
            .collect();
        self.values.insert("outputs".into(), map(by_task));
        self
    }

    /// One more value by name (a foreach's item).
    pub fn with(mut self, name: &str, value: &serde_json::Value) -> Self {
        self.values.insert(name.to_string(), from_json(value));
        self
    }
}

fn map(fields: HashMap<Key, Value>) -> Value {
    Value::Map(Map {
        map: Arc::new(fields),
    })
}

/// A parameter's value with the type its text reads as.
fn typed(raw: &str) -> Value {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(
            v @ (serde_json::Value::Number(_)
            | serde_json::Value::Bool(_)
            | serde_json::Value::Array(_)
            | serde_json::Value::Object(_)),
        ) => from_json(&v),
        _ => Value::String(Arc::new(raw.to_string())),
    }
}

fn from_json(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        // Integers as `int` (not `uint`), so they compare with literals such as `10`.
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::String(Arc::new(s.clone())),
        J::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        J::Object(fields) => map(fields
            .iter()
            .map(|(k, v)| (Key::from(k.clone()), from_json(v)))
            .collect()),
    }
}

fn to_json(v: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(J::Number)
            .ok_or_else(|| format!("the expression gave {f}, which is not a JSON number"))?,
        Value::String(s) => J::String(s.to_string()),
        Value::List(items) => J::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            J::Object(out)
        }
        other => {
            return Err(format!(
                "the expression gave {other:?}, which has no JSON form"
            ));
        }
    })
}

#[cfg(test)]
mod tests;
