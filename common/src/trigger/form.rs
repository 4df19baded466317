//! Form triggers: a page at `/forms/{project}/{workflow}/{trigger}` whose fields become a
//! run's parameters. Its definition is checked here, and so is a submission
//! ([`validate_submission`]), field by field, so that each error can be shown next to its
//! field; the api-server renders the page and starts the run.

use super::{TriggerDef, TriggerMode, broker};
use crate::start::{Params, check_param_name};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FormField {
    /// The run parameter it sets (a parameter of the workflow).
    pub name: String,
    /// What the page shows beside it; default: its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(rename = "type", default)]
    pub field_type: FieldType,
    /// `select`: the values to choose from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// A submission without a value for it is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

impl FormField {
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FieldType {
    #[default]
    Text,
    /// A decimal number (`12`, `-3.5`).
    Number,
    /// A day, `YYYY-MM-DD`.
    Date,
    /// One of `options`.
    Select,
}

/// Who may submit a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FormAccess {
    /// Operators (and up) of the workflow's project: those who may start its runs.
    #[default]
    Members,
    /// Any signed-in user.
    Login,
    /// Anyone who reaches the server: limited like an open webhook (`allow_ips`, or a
    /// `rate`).
    Public,
}

impl FormAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            FormAccess::Members => "members",
            FormAccess::Login => "login",
            FormAccess::Public => "public",
        }
    }
}

/// The longest value a field takes: a form is for people typing.
pub const MAX_VALUE_LEN: usize = 4096;

/// What is wrong with a form trigger, if anything.
pub(super) fn check(t: &TriggerDef) -> Result<(), String> {
    broker::refuse_broker_fields(t)?;
    let webhook_only = [
        ("auth", t.auth.is_some()),
        ("methods", !t.methods.is_empty()),
        ("public", t.public),
        ("when", t.when.is_some()),
        ("params", !t.params.is_empty()),
        ("mode", t.mode != TriggerMode::Async),
        ("timeout", t.timeout.is_some()),
        ("outputs", !t.outputs.is_empty()),
    ];
    if let Some((field, _)) = webhook_only.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{field} is for webhooks; a form's fields are its parameters and `access` says \
             who may submit it (members, login or public)"
        ));
    }
    if t.fields.is_empty() {
        return Err("fields is missing: a form needs at least one field".into());
    }
    for (i, f) in t.fields.iter().enumerate() {
        let at = format!("fields[{i}] ({})", f.name);
        check_param_name(&f.name).map_err(|e| format!("fields[{i}]: {e}"))?;
        if t.fields[..i].iter().any(|o| o.name == f.name) {
            return Err(format!("{at}: the name is used more than once"));
        }
        match (f.field_type, f.options.is_empty()) {
            (FieldType::Select, true) => {
                return Err(format!("{at}: a select needs options to choose from"));
            }
            (FieldType::Select, false) => {
                if let Some(o) = f.options.iter().find(|o| o.is_empty()) {
                    return Err(format!("{at}: option '{o}' is empty"));
                }
            }
            (other, false) => {
                return Err(format!(
                    "{at}: options are for type: select, not {}",
                    other.as_str()
                ));
            }
            (_, true) => {}
        }
    }
    if t.access() == FormAccess::Public && t.allow_ips.is_empty() && t.rate.is_none() {
        return Err(
            "access: public lets whoever reaches the server start runs: limit it to allow_ips, or give a rate (e.g. rate: 10/m)"
                .into(),
        );
    }
    Ok(())
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Number => "number",
            FieldType::Date => "date",
            FieldType::Select => "select",
        }
    }
}

/// A submission's parameters (the fields given a value, trimmed), or why each refused
/// field is refused, by field name.
pub fn validate_submission(
    fields: &[FormField],
    submitted: &BTreeMap<String, String>,
) -> Result<Params, BTreeMap<String, String>> {
    let mut params = Params::new();
    let mut errors = BTreeMap::new();
    for f in fields {
        let value = submitted.get(&f.name).map_or("", |v| v.trim());
        match check_value(f, value) {
            Ok(()) if value.is_empty() => {}
            Ok(()) => {
                params.insert(f.name.clone(), value.to_string());
            }
            Err(e) => {
                errors.insert(f.name.clone(), e);
            }
        }
    }
    if errors.is_empty() {
        Ok(params)
    } else {
        Err(errors)
    }
}

fn check_value(f: &FormField, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return match f.required {
            true => Err(format!("{} is required.", f.label())),
            false => Ok(()),
        };
    }
    if value.chars().count() > MAX_VALUE_LEN {
        return Err(format!("At most {MAX_VALUE_LEN} characters."));
    }
    match f.field_type {
        FieldType::Text => Ok(()),
        FieldType::Number => match value.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(()),
            _ => Err(format!("'{value}' is not a number (e.g. 12 or 3.5).")),
        },
        FieldType::Date => chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d")
            .map(|_| ())
            .map_err(|_| format!("'{value}' is not a date: write YYYY-MM-DD (e.g. 2026-03-31).")),
        FieldType::Select if f.options.iter().any(|o| o == value) => Ok(()),
        FieldType::Select => Err(format!(
            "'{value}' is not one of the choices: {}.",
            f.options.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::WorkflowDef;

    fn form(yaml: &str) -> Result<TriggerDef, String> {
        let text = format!(
            "name: w\nparams: {{a: x, b: x, c: x, d: x}}\ntriggers:\n- {yaml}\ntasks:\n- {{name: t, type: noop}}\n"
        );
        WorkflowDef::parse(&text)
            .map(|mut d| d.triggers.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_form_parses_with_defaults() {
        let t = form(
            "{name: f, type: form, fields: [{name: a, required: true}, {name: b, type: select, options: [x, y], label: Bee}]}",
        )
        .unwrap();
        assert_eq!(t.access(), FormAccess::Members);
        assert_eq!(t.fields[0].field_type, FieldType::Text);
        assert_eq!(t.fields[0].label(), "a");
        assert_eq!(t.fields[1].label(), "Bee");
        let public = form("{name: f, type: form, access: public, rate: 10/m, fields: [{name: a}]}");
        assert_eq!(public.unwrap().access(), FormAccess::Public);
    }

    #[test]
    fn bad_forms_are_refused_naming_the_problem() {
        for (yaml, says) in [
            ("{name: f, type: form}", "fields is missing"),
            (
                "{name: f, type: form, fields: [{name: a, type: colour}]}",
                "unknown variant `colour`",
            ),
            (
                "{name: f, type: form, fields: [{name: a, type: select}]}",
                "fields[0] (a): a select needs options",
            ),
            (
                "{name: f, type: form, fields: [{name: a, options: [x]}]}",
                "options are for type: select, not text",
            ),
            (
                "{name: f, type: form, fields: [{name: a}, {name: a}]}",
                "fields[1] (a): the name is used more than once",
            ),
            (
                "{name: f, type: form, fields: [{name: 'a b'}]}",
                "fields[0]",
            ),
            (
                "{name: f, type: form, fields: [{name: a, size: 3}]}",
                "unknown field `size`",
            ),
            (
                "{name: f, type: form, access: public, fields: [{name: a}]}",
                "access: public lets whoever",
            ),
            (
                "{name: f, type: form, access: anyone, fields: [{name: a}]}",
                "unknown variant `anyone`",
            ),
            (
                "{name: f, type: form, params: {a: $.a}, fields: [{name: a}]}",
                "params is for webhooks",
            ),
            (
                "{name: f, type: form, auth: none, fields: [{name: a}]}",
                "auth is for webhooks",
            ),
            (
                "{name: f, type: form, queue: q, fields: [{name: a}]}",
                "queue is for broker triggers",
            ),
            (
                "{name: f, fields: [{name: a}]}",
                "fields and access are for type: form",
            ),
            (
                "{name: f, type: amqp, url: 'amqp://h/', queue: q, access: login}",
                "fields and access are for type: form",
            ),
        ] {
            let e = form(yaml).expect_err(yaml);
            assert!(e.contains(says), "{yaml}: {e}");
        }
    }

    #[test]
    fn a_submission_is_checked_field_by_field() {
        let t = form(
            "{name: f, type: form, fields: [{name: a, required: true, label: Amount, type: number}, {name: b, type: date}, {name: c, type: select, options: [red, blue]}, {name: d}]}",
        )
        .unwrap();
        let given = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let ok = validate_submission(
            &t.fields,
            &given(&[
                ("a", " 12.5 "),
                ("b", "2026-03-31"),
                ("c", "blue"),
                ("d", ""),
                ("zz", "ignored"),
            ]),
        );
        let want: Params = [("a", "12.5"), ("b", "2026-03-31"), ("c", "blue")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(ok.unwrap(), want);
        let errors = validate_submission(&t.fields, &given(&[("b", "31/03/2026"), ("c", "green")]))
            .unwrap_err();
        assert_eq!(errors["a"], "Amount is required.");
        assert!(errors["b"].contains("YYYY-MM-DD"), "{errors:?}");
        assert!(errors["c"].contains("red, blue"), "{errors:?}");
        assert!(!errors.contains_key("d"));
        let errors = validate_submission(&t.fields, &given(&[("a", "inf")])).unwrap_err();
        assert!(errors["a"].contains("not a number"), "{errors:?}");
        let long = "x".repeat(MAX_VALUE_LEN + 1);
        let errors =
            validate_submission(&t.fields, &given(&[("a", "1"), ("d", &long)])).unwrap_err();
        assert!(errors["d"].contains("At most"), "{errors:?}");
    }
}
