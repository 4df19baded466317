//! `type: foreach`: one child task, or one sub-workflow run, per element of a list. The
//! master expands the task when it starts (see the runtime's fan-out); this module holds
//! the definition's shape, its validation and how a child is made from the template.

use super::{
    DefinitionError, SubWorkflowSpec, TaskDef, WorkflowDef, scalar_map, valid_identifier,
    valid_name,
};
use crate::types::TaskType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most elements one foreach task expands to.
pub const MAX_ITEMS: usize = 10_000;

/// The output a running foreach task records its list in (a master taking the run over
/// expands it again from there); it is replaced by `results` when the task ends.
pub const ITEMS: &str = "foreach.items";

/// The output a foreach task hands on: a JSON array with, for each element in order, the
/// outputs of its child as an object (`null` for a child that did not pass).
pub const RESULTS: &str = "results";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForeachSpec {
    /// The list: an expression (`${files}`, `outputs.list.files`, `[1, 2, 3]`) giving a
    /// JSON array, or a string holding one.
    pub items: String,
    /// The parameter each child sees its element as: `${item}`, and `${item.field}` for
    /// each field of an object element.
    #[serde(default = "default_as", rename = "as")]
    pub as_name: String,
    /// Most children running at once (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    /// The task each child is (without a name or `depends_on`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(no_recursion)]
    pub task: Option<Box<TaskDef>>,
    /// Or: the workflow each child runs, as a sub-workflow with the element as a parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The child workflow's project (default: the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Start parameters of each child workflow run (expanded with the child's parameters).
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub params: BTreeMap<String, String>,
}

fn default_as() -> String {
    "item".to_string()
}

/// The name of a foreach task's child for element `index` (from 0): `each[3]`.
pub fn child_name(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

impl ForeachSpec {
    /// The child task for element `index` of the list.
    pub fn child(&self, parent: &TaskDef, index: usize, item: &serde_json::Value) -> TaskDef {
        let mut child = match &self.task {
            Some(template) => (**template).clone(),
            None => sub_workflow_child(parent, self),
        };
        child.name = child_name(&parent.name, index);
        child.depends_on.clear();
        child.params.extend(self.item_params(item));
        child
    }

    /// `item` (a string element as it is, anything else as JSON) and `item.<field>` for
    /// each field of an object element.
    fn item_params(&self, item: &serde_json::Value) -> Vec<(String, String)> {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut params = vec![(self.as_name.clone(), text(item))];
        if let serde_json::Value::Object(fields) = item {
            params.extend(
                fields
                    .iter()
                    .map(|(k, v)| (format!("{}.{k}", self.as_name), text(v))),
            );
        }
        params
    }
}

fn sub_workflow_child(parent: &TaskDef, spec: &ForeachSpec) -> TaskDef {
    TaskDef {
        task_type: TaskType::SubWorkflow.as_str().to_string(),
        sub_workflow: Some(SubWorkflowSpec {
            workflow: spec.workflow.clone().unwrap_or_default(),
            project: spec.project.clone(),
            params: spec.params.clone(),
        }),
        foreach: None,
        do_while: None,
        on_error: None,
        retries: 0,
        retry_interval: None,
        delay: None,
        ..parent.clone()
    }
}

/// Checks a foreach task: its list expression, and its template as a task of its own.
pub(super) fn check(def: &WorkflowDef, t: &TaskDef) -> Result<(), DefinitionError> {
    let Some(spec) = &t.foreach else {
        return Ok(());
    };
    let bad = |reason: String| DefinitionError::BadBranch {
        task: t.name.clone(),
        reason,
    };
    crate::expr::parse(&spec.items).map_err(|e| bad(format!("foreach items: {e}")))?;
    if !valid_identifier(&spec.as_name) || spec.as_name.contains('.') {
        return Err(bad(format!(
            "foreach `as: {}` must be a parameter name (letters, digits, '_', '-')",
            spec.as_name
        )));
    }
    if spec.max_parallel == Some(0) {
        return Err(bad("foreach max_parallel must be at least 1".into()));
    }
    if t.retry_count() != 0 {
        return Err(bad(
            "retries of a foreach apply to each child: give them in its task template".into(),
        ));
    }
    let template = match (&spec.task, &spec.workflow) {
        (Some(template), None) => template,
        (None, Some(workflow)) => {
            if !valid_name(workflow) || spec.project.as_deref().is_some_and(|p| !valid_name(p)) {
                return Err(bad(format!(
                    "foreach workflow '{workflow}' is not a valid workflow name"
                )));
            }
            return Ok(());
        }
        _ => {
            return Err(bad(
                "foreach needs exactly one of `task` (a task template) and `workflow`".into(),
            ));
        }
    };
    if !template.name.is_empty() || !template.depends_on.is_empty() {
        return Err(bad(
            "a foreach task template has no name or depends_on: its children are named for the foreach task".into(),
        ));
    }
    let kind = template.kind();
    if matches!(
        kind,
        TaskType::Foreach
            | TaskType::DoWhile
            | TaskType::Conditions
            | TaskType::Switch
            | TaskType::Terminate
    ) || template.on_timeout.is_some()
        || template
            .error_action()
            .is_some_and(|(action, _)| action != super::ErrorAction::Retry)
    {
        return Err(bad(format!(
            "a foreach child has no downstream tasks of its own: its template may not be a {} task or have on_timeout or an on_error other than retry",
            template.task_type
        )));
    }
    // The template must be a valid task on its own: checked as a one-task workflow.
    let mut alone = def.clone();
    alone.tasks = vec![TaskDef {
        name: t.name.clone(),
        ..(**template).clone()
    }];
    alone.triggers.clear();
    alone.validate()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<WorkflowDef, DefinitionError> {
        WorkflowDef::parse(yaml)
    }

    #[test]
    fn children_are_named_for_the_task_and_see_their_element() {
        let def = parse(
            r#"
name: fan
tasks:
  - { name: each, type: foreach, foreach: { items: "[1]", as: file, max_parallel: 2,
      task: { type: shell, command: 'echo ${file} ${file.size}', retries: 1, params: { k: v } } } }
"#,
        )
        .unwrap();
        let t = &def.tasks[0];
        let spec = t.foreach.as_ref().unwrap();
        let child = spec.child(t, 3, &serde_json::json!({"name": "a.csv", "size": 3}));
        assert_eq!(child.name, "each[3]");
        assert_eq!(child.task_type, "shell");
        assert_eq!(
            child.retries, 1,
            "the template's retries apply to each child"
        );
        assert_eq!(child.params["file.size"], "3");
        assert_eq!(child.params["file"], r#"{"name":"a.csv","size":3}"#);
        assert_eq!(child.params["k"], "v");
        let plain = spec.child(t, 0, &serde_json::json!("b.csv"));
        assert_eq!(
            plain.params["file"], "b.csv",
            "a string element is used as it is"
        );
    }

    #[test]
    fn a_workflow_child_is_a_sub_workflow_run() {
        let def = parse(
            r#"
name: fan
tasks:
  - { name: each, type: foreach, foreach: { items: "${days}", workflow: daily, params: { mode: full } } }
"#,
        )
        .unwrap();
        let t = &def.tasks[0];
        let child = t
            .foreach
            .as_ref()
            .unwrap()
            .child(t, 1, &serde_json::json!("2026-01-02"));
        assert_eq!(child.kind(), TaskType::SubWorkflow);
        let sub = child.sub_workflow.unwrap();
        assert_eq!(
            (sub.workflow.as_str(), sub.params["mode"].as_str()),
            ("daily", "full")
        );
        assert_eq!(child.params["item"], "2026-01-02");
        assert!(child.foreach.is_none());
    }

    #[test]
    fn bad_foreach_tasks_are_refused_naming_the_problem() {
        let cases = [
            ("items: '[1', task: { type: noop }", "foreach items"),
            ("items: '[1]'", "exactly one of"),
            (
                "items: '[1]', workflow: w, task: { type: noop }",
                "exactly one of",
            ),
            ("items: '[1]', task: { type: shell }", "needs 'command'"),
            (
                "items: '[1]', task: { name: x, type: noop }",
                "no name or depends_on",
            ),
            (
                "items: '[1]', task: { type: switch, switch: { cases: [] } }",
                "may not be a switch",
            ),
            (
                "items: '[1]', max_parallel: 0, task: { type: noop }",
                "at least 1",
            ),
            (
                "items: '[1]', as: 'a.b', task: { type: noop }",
                "parameter name",
            ),
            (
                "items: '[1]', task: { type: noop, on_error: { action: ignore } }",
                "on_error other than retry",
            ),
        ];
        for (spec, expected) in cases {
            let yaml = format!(
                "name: fan\ntasks:\n  - {{ name: each, type: foreach, foreach: {{ {spec} }} }}\n"
            );
            let err = parse(&yaml).unwrap_err().to_string();
            assert!(err.contains(expected), "{spec}: {err}");
        }
        let retried = "name: fan\ntasks:\n  - { name: each, type: foreach, retries: 2, foreach: { items: '[1]', task: { type: noop } } }\n";
        assert!(parse(retried).unwrap_err().to_string().contains("template"));
    }
}
