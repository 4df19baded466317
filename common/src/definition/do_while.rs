//! `type: do_while`: a body of tasks run again and again while a condition holds. The
//! master appends one copy of the body per iteration (see the runtime's loops); this
//! module holds the definition's shape, its validation and how an iteration's tasks are
//! made from the body.

use super::{DefinitionError, TaskDef, WorkflowDef};
use crate::types::TaskType;
use serde::{Deserialize, Serialize};

/// Most iterations one do_while task may run.
pub const MAX_ITERATIONS: u32 = 10_000;

/// The parameter each iteration's tasks see their iteration number in (from 1), and the
/// name the condition reads it by.
pub const ITERATION: &str = "iteration";

/// The output a finished do_while task records how many iterations ran in.
pub const ITERATIONS: &str = "iterations";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DoWhileSpec {
    /// Checked after each iteration: another one runs while it holds. It sees the
    /// iteration's outputs as `outputs.<body task>.<name>` and `iteration` (from 1).
    pub condition: String,
    /// Iterations at most; reaching it with the condition still true fails the task.
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// The body: tasks with `depends_on` among themselves, run once per iteration.
    #[schema(no_recursion)]
    pub tasks: Vec<TaskDef>,
}

fn default_max_iterations() -> u32 {
    100
}

/// The name of a body task's copy in iteration `iteration` (from 1): `poll[2].check`.
pub fn iteration_name(parent: &str, iteration: u32, task: &str) -> String {
    format!("{parent}[{iteration}].{task}")
}

impl DoWhileSpec {
    /// The body's tasks for iteration `iteration` of task `parent`: renamed, their
    /// `depends_on` renamed with them, each seeing `${iteration}`.
    pub fn iteration(&self, parent: &str, iteration: u32) -> Vec<TaskDef> {
        self.tasks
            .iter()
            .map(|t| {
                let mut copy = t.clone();
                copy.name = iteration_name(parent, iteration, &t.name);
                for d in &mut copy.depends_on {
                    *d = iteration_name(parent, iteration, d);
                }
                copy.params
                    .insert(ITERATION.to_string(), iteration.to_string());
                copy
            })
            .collect()
    }
}

/// Checks a do_while task: its condition, its bounds, and its body as a workflow of its
/// own.
pub(super) fn check(def: &WorkflowDef, t: &TaskDef) -> Result<(), DefinitionError> {
    let Some(spec) = &t.do_while else {
        return Ok(());
    };
    let bad = |reason: String| DefinitionError::BadBranch {
        task: t.name.clone(),
        reason,
    };
    crate::expr::parse(&spec.condition).map_err(|e| bad(format!("do_while condition: {e}")))?;
    if !(1..=MAX_ITERATIONS).contains(&spec.max_iterations) {
        return Err(bad(format!(
            "do_while max_iterations must be between 1 and {MAX_ITERATIONS}"
        )));
    }
    if spec.tasks.is_empty() {
        return Err(bad("do_while needs at least one task in `tasks`".into()));
    }
    if t.retry_count() != 0 {
        return Err(bad(
            "retries of a do_while apply to its body's tasks: give them there".into(),
        ));
    }
    for body in &spec.tasks {
        if matches!(
            body.kind(),
            TaskType::Foreach
                | TaskType::DoWhile
                | TaskType::Conditions
                | TaskType::Switch
                | TaskType::Terminate
        ) || body.on_timeout.is_some()
            || body
                .error_action()
                .is_some_and(|(action, _)| action != super::ErrorAction::Retry)
        {
            return Err(bad(format!(
                "do_while body task '{}': a body may not hold a {} task, on_timeout or an on_error other than retry (a failed iteration fails the loop)",
                body.name, body.task_type
            )));
        }
    }
    // The body must be a valid workflow on its own (names, depends_on, no cycle).
    let mut alone = def.clone();
    alone.tasks = spec.tasks.clone();
    alone.triggers.clear();
    alone
        .validate()
        .map_err(|e| bad(format!("do_while body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<WorkflowDef, DefinitionError> {
        WorkflowDef::parse(yaml)
    }

    #[test]
    fn each_iteration_copies_the_body_under_its_own_names() {
        let def = parse(
            r#"
name: loop
tasks:
  - { name: poll, type: do_while,
      do_while: { condition: "outputs.check.ready != 'yes'", max_iterations: 5,
                  tasks: [ { name: check, type: shell, command: 'echo ${iteration}' },
                           { name: note, type: noop, depends_on: [check] } ] } }
"#,
        )
        .unwrap();
        let spec = def.tasks[0].do_while.as_ref().unwrap();
        let second = spec.iteration("poll", 2);
        assert_eq!(second[0].name, "poll[2].check");
        assert_eq!(second[1].depends_on, ["poll[2].check"]);
        assert_eq!(second[0].params[ITERATION], "2");
    }

    #[test]
    fn bad_loops_are_refused_naming_the_problem() {
        let cases = [
            (
                "condition: 'a ~ b', tasks: [{name: c, type: noop}]",
                "condition: column",
            ),
            ("condition: 'true', tasks: []", "at least one task"),
            (
                "condition: 'true', max_iterations: 0, tasks: [{name: c, type: noop}]",
                "max_iterations must be",
            ),
            (
                "condition: 'true', tasks: [{name: c, type: noop, depends_on: [x]}]",
                "do_while body: task 'c' depends on 'x'",
            ),
            (
                "condition: 'true', tasks: [{name: c, type: noop, depends_on: [d]}, {name: d, type: noop, depends_on: [c]}]",
                "cycle",
            ),
            (
                "condition: 'true', tasks: [{name: c, type: switch, switch: {cases: []}}]",
                "may not hold a switch",
            ),
            (
                "condition: 'true', tasks: [{name: c, type: shell, command: x, on_error: {action: ignore}}]",
                "on_error other than retry",
            ),
        ];
        for (spec, expected) in cases {
            let yaml = format!(
                "name: w\ntasks:\n- {{name: poll, type: do_while, do_while: {{{spec}}}}}\n"
            );
            let err = parse(&yaml).unwrap_err().to_string();
            assert!(
                err.contains("poll") && err.contains(expected),
                "{spec}: {err}"
            );
        }
        let retried = "name: w\ntasks:\n- {name: poll, type: do_while, retries: 2, do_while: {condition: 'true', tasks: [{name: c, type: noop}]}}\n";
        assert!(
            parse(retried)
                .unwrap_err()
                .to_string()
                .contains("body's tasks")
        );
    }
}
