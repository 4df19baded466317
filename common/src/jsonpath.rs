//! The small JSONPath subset that picks values out of JSON: http task outputs from a
//! response, webhook trigger parameters from a payload:
//! `$` (the whole document), `.key`, `['key']` / `["key"]` and `[index]`. No wildcards,
//! filters, slices, recursive descent or negative indexes: a path names exactly one value.

use serde_json::Value;
use std::fmt;

/// One step from a value to one of its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    /// Byte offset of the problem in the path text.
    pub at: usize,
    pub reason: &'static str,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at position {}", self.reason, self.at)
    }
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, PathError> {
        let err = |at, reason| PathError { at, reason };
        let bytes = text.as_bytes();
        if bytes.first() != Some(&b'$') {
            return Err(err(0, "a path starts with '$'"));
        }
        let mut steps = Vec::new();
        let mut i = 1;
        while i < bytes.len() {
            match bytes[i] {
                b'.' => {
                    let start = i + 1;
                    let end = text[start..]
                        .find(['.', '['])
                        .map_or(text.len(), |n| start + n);
                    let key = &text[start..end];
                    if key.is_empty() {
                        return Err(err(start, "expected a key after '.'"));
                    }
                    if key == "*" {
                        return Err(err(start, "wildcards are not supported"));
                    }
                    steps.push(Step::Key(key.to_string()));
                    i = end;
                }
                b'[' => {
                    let start = i + 1;
                    match bytes.get(start) {
                        Some(&quote @ (b'\'' | b'"')) => {
                            let (key, after) = quoted(text, start + 1, quote)
                                .ok_or_else(|| err(start, "unterminated quoted key"))?;
                            if bytes.get(after) != Some(&b']') {
                                return Err(err(after, "expected ']' after a quoted key"));
                            }
                            steps.push(Step::Key(key));
                            i = after + 1;
                        }
                        Some(b'0'..=b'9') => {
                            let digits = text[start..]
                                .find(|c: char| !c.is_ascii_digit())
                                .map_or(text.len(), |n| start + n);
                            if bytes.get(digits) != Some(&b']') {
                                return Err(err(digits, "expected ']' after an index"));
                            }
                            let index = text[start..digits]
                                .parse()
                                .map_err(|_| err(start, "index out of range"))?;
                            steps.push(Step::Index(index));
                            i = digits + 1;
                        }
                        _ => {
                            return Err(err(
                                start,
                                "expected an index or a quoted key after '[' \
                                 (wildcards, filters, slices and negative indexes are not supported)",
                            ));
                        }
                    }
                }
                _ => return Err(err(i, "expected '.' or '['")),
            }
        }
        Ok(JsonPath { steps })
    }

    /// The value the path names in `root`, if there is one.
    pub fn find<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        self.steps.iter().try_fold(root, |value, step| match step {
            Step::Key(key) => value.as_object()?.get(key),
            Step::Index(index) => value.as_array()?.get(*index),
        })
    }
}

/// Reads a quoted key starting after its opening quote; `\` escapes the next character.
/// Returns the key and the offset just past the closing quote.
fn quoted(text: &str, from: usize, quote: u8) -> Option<(String, usize)> {
    let mut key = String::new();
    let mut chars = text[from..].char_indices();
    while let Some((n, c)) = chars.next() {
        match c {
            '\\' => key.push(chars.next()?.1),
            c if c as u32 == u32::from(quote) => return Some((key, from + n + 1)),
            c => key.push(c),
        }
    }
    None
}

/// The text of an output parameter: a string as itself, anything else as compact JSON.
pub fn render(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn steps(path: &str) -> Vec<Step> {
        JsonPath::parse(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .steps
    }

    fn key(k: &str) -> Step {
        Step::Key(k.to_string())
    }

    #[test]
    fn parses_the_subset() {
        assert_eq!(steps("$"), []);
        assert_eq!(steps("$.data.id"), [key("data"), key("id")]);
        assert_eq!(
            steps("$.items[0].name"),
            [key("items"), Step::Index(0), key("name")]
        );
        assert_eq!(steps("$['a.b']"), [key("a.b")]);
        assert_eq!(steps(r#"$["x y"][12]"#), [key("x y"), Step::Index(12)]);
        assert_eq!(steps(r"$['it\'s']"), [key("it's")]);
        assert_eq!(steps(r"$['back\\slash']"), [key(r"back\slash")]);
        assert_eq!(steps("$.ünï.k-1"), [key("ünï"), key("k-1")]);
        assert_eq!(steps("$[0][1]"), [Step::Index(0), Step::Index(1)]);
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        for (path, at) in [
            ("", 0),
            ("data.id", 0),
            ("$.", 2),
            ("$..id", 2),
            ("$.*", 2),
            ("$[*]", 2),
            ("$[-1]", 2),
            ("$[0:2]", 3),
            ("$[?(@.a)]", 2),
            ("$['a'", 5),
            ("$['a", 2),
            ("$[1", 3),
            ("$x", 1),
            ("$[99999999999999999999999]", 2),
        ] {
            let e = JsonPath::parse(path).expect_err(path);
            assert_eq!(e.at, at, "{path}: {e}");
        }
    }

    #[test]
    fn finds_values_and_reports_missing_ones() {
        let doc = json!({
            "data": {"id": 42, "name": "shoal", "tags": ["a", "b"], "nested": {"k": null}},
            "a.b": true,
            "list": [{"x": 1.5}, {"x": [1, 2]}]
        });
        let get = |p: &str| JsonPath::parse(p).unwrap().find(&doc).map(render);
        assert_eq!(get("$.data.id").as_deref(), Some("42"));
        assert_eq!(get("$.data.name").as_deref(), Some("shoal"));
        assert_eq!(get("$.data.tags").as_deref(), Some(r#"["a","b"]"#));
        assert_eq!(get("$.data.tags[1]").as_deref(), Some("b"));
        assert_eq!(get("$['a.b']").as_deref(), Some("true"));
        assert_eq!(get("$.list[0].x").as_deref(), Some("1.5"));
        assert_eq!(get("$.list[1].x").as_deref(), Some("[1,2]"));
        assert_eq!(get("$.data.nested.k").as_deref(), Some("null"));
        assert_eq!(get("$.data.nested").as_deref(), Some(r#"{"k":null}"#));
        assert!(get("$").unwrap().starts_with('{'));

        assert_eq!(get("$.data.missing"), None);
        assert_eq!(get("$.data.tags[2]"), None);
        assert_eq!(get("$.data.id.deeper"), None);
        assert_eq!(get("$.data[0]"), None);
        assert_eq!(get("$.list.x"), None);
    }
}
