//! The small expression language of `switch` cases, evaluated after `${...}` expansion:
//! comparisons `a == b`, `!=`, `>`, `>=`, `<`, `<=` joined by `&&` and `||` (`&&` binds
//! tighter; no parentheses). Operands are numbers, 'quoted' or "quoted" strings, or bare
//! words; two operands that both read as numbers compare as numbers, others as text.

use std::cmp::Ordering;

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// Disjunction of conjunctions of comparisons.
    any: Vec<Vec<Cmp>>,
}

#[derive(Debug, Clone, PartialEq)]
struct Cmp {
    left: String,
    op: Op,
    right: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

const OPS: [(&str, Op); 6] = [
    ("==", Op::Eq),
    ("!=", Op::Ne),
    (">=", Op::Ge),
    ("<=", Op::Le),
    (">", Op::Gt),
    ("<", Op::Lt),
];

pub fn parse(text: &str) -> Result<Expr, String> {
    let any = text
        .split("||")
        .map(|conj| {
            conj.split("&&")
                .map(parse_cmp)
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Expr { any })
}

fn parse_cmp(text: &str) -> Result<Cmp, String> {
    for (token, op) in OPS {
        if let Some((l, r)) = split_outside_quotes(text, token) {
            let (left, right) = (operand(l)?, operand(r)?);
            return Ok(Cmp { left, op, right });
        }
    }
    Err(format!(
        "'{}' is not a comparison: use a == b, !=, >, >=, < or <=, joined by && or ||",
        text.trim()
    ))
}

/// Splits at the first `token` that is not inside quotes.
fn split_outside_quotes<'a>(text: &'a str, token: &str) -> Option<(&'a str, &'a str)> {
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, _) if text[i..].starts_with(token) => {
                return Some((&text[..i], &text[i + token.len()..]));
            }
            _ => {}
        }
    }
    None
}

fn operand(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("a comparison is missing an operand".into());
    }
    for q in ['\'', '"'] {
        if let Some(inner) = t.strip_prefix(q) {
            return inner
                .strip_suffix(q)
                .map(str::to_string)
                .ok_or_else(|| format!("unclosed quote in {t}"));
        }
    }
    Ok(t.to_string())
}

impl Expr {
    pub fn holds(&self) -> bool {
        self.any.iter().any(|all| all.iter().all(Cmp::holds))
    }
}

impl Cmp {
    fn holds(&self) -> bool {
        let ord = match (self.left.parse::<f64>(), self.right.parse::<f64>()) {
            (Ok(a), Ok(b)) => a.partial_cmp(&b),
            _ => Some(self.left.cmp(&self.right)),
        };
        let Some(ord) = ord else { return false };
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(text: &str) -> bool {
        parse(text).unwrap().holds()
    }

    #[test]
    fn compares_numbers_as_numbers_and_text_as_text() {
        assert!(holds("10 > 9"), "numeric, not lexical");
        assert!(holds("'eu' == eu"));
        assert!(holds("'a b' != 'a c'"));
        assert!(holds("2.5 <= 2.50"));
        assert!(!holds("'10' < '9'"), "quoted numbers still read as numbers");
        assert!(holds("abc < abd"));
    }

    #[test]
    fn and_binds_tighter_than_or() {
        assert!(holds("1 == 2 && 1 == 1 || 3 == 3"));
        assert!(!holds("1 == 2 || 1 == 1 && 3 == 4"));
        assert!(holds("'x>y' == 'x>y'"), "operators inside quotes are text");
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        assert!(
            parse("just words")
                .unwrap_err()
                .contains("not a comparison")
        );
        assert!(parse("== 3").unwrap_err().contains("missing an operand"));
        assert!(
            parse("'open == x")
                .unwrap_err()
                .contains("not a comparison"),
            "an operator inside an unclosed quote is text"
        );
    }
}
