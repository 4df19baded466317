//! A trigger's `when`: a CEL condition over what arrived, its JSON `body` and its
//! `headers` (lower-case names to text), decided before anything is written. Webhook calls
//! and broker messages share it: compile once ([`Rule::compile`]), check each message.

use crate::expr::{self, Expr, Vars};
use serde_json::Value;
use std::collections::BTreeMap;

/// A compiled `when`.
pub struct Rule {
    expr: Expr,
}

impl Rule {
    /// Compiles `text`; the error names the column and what is wrong there.
    pub fn compile(text: &str) -> Result<Rule, String> {
        expr::parse(text).map(|expr| Rule { expr })
    }

    /// Whether a message matches. An error when the condition cannot be decided for it:
    /// it reads a field the message lacks (`has(body.x)` tests for one), or gives no
    /// boolean.
    pub fn matches(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
    ) -> Result<bool, String> {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let vars = Vars::default()
            .with("body", body)
            .with("headers", &Value::Object(headers));
        self.expr.holds(&vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_reads_the_body_and_the_headers() {
        let rule = Rule::compile(
            "body.action == 'opened' && headers['x-github-event'] == 'pull_request' \
             && body.labels.exists(l, l.startsWith('deploy'))",
        )
        .unwrap();
        let headers = BTreeMap::from([("x-github-event".to_string(), "pull_request".to_string())]);
        let body = json!({"action": "opened", "labels": ["deploy-eu", "x"]});
        assert_eq!(rule.matches(&body, &headers), Ok(true));
        let closed = json!({"action": "closed", "labels": []});
        assert_eq!(rule.matches(&closed, &headers), Ok(false));
        assert_eq!(
            rule.matches(&body, &BTreeMap::new()).map_err(|_| ()),
            Err(())
        );

        let guarded = Rule::compile("has(body.action) && body.action == 'opened'").unwrap();
        assert_eq!(guarded.matches(&json!({}), &headers), Ok(false));
        let e = Rule::compile("body.n + 1")
            .unwrap()
            .matches(&json!({"n": 1}), &headers);
        assert!(e.unwrap_err().contains("true or false"));
        assert!(Rule::compile("body.action ==").is_err());
    }
}
