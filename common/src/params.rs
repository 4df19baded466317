//! `${name}` parameter expansion.

use std::collections::BTreeMap;

/// A `${name}` whose name no parameter source defines.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "undefined parameter ${{{0}}}: define it in the workflow's params, the task's params or pass it at start with --param {0}=VALUE"
)]
pub struct UndefinedParam(pub String);

/// Replaces every `${name}` in `text` with its value. `${setValue(...)}` is left alone:
/// it is the output convention tasks print, not a reference.
pub fn expand(text: &str, params: &BTreeMap<String, String>) -> Result<String, UndefinedParam> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = after[..end].trim();
        if name.starts_with("setValue(") {
            out.push_str(&rest[start..start + 2 + end + 1]);
        } else {
            match params.get(name) {
                Some(v) => out.push_str(v),
                None => return Err(UndefinedParam(name.to_string())),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_known_and_rejects_unknown() {
        let p = params(&[("dt", "2026-01-01"), ("system.workflow.instance.id", "7")]);
        assert_eq!(
            expand("echo ${dt} ${ system.workflow.instance.id }", &p).unwrap(),
            "echo 2026-01-01 7"
        );
        assert_eq!(
            expand("echo '${setValue(x=1)}'", &p).unwrap(),
            "echo '${setValue(x=1)}'"
        );
        assert_eq!(expand("plain $HOME ${", &p).unwrap(), "plain $HOME ${");
        assert_eq!(
            expand("${nope}", &p).unwrap_err(),
            UndefinedParam("nope".into())
        );
    }
}
