//! What the master decides itself for logic tasks, from expressions over a task's
//! parameters and the run's outputs: a switch's branch, a conditions task's branch, a
//! foreach's elements, whether a do_while goes round again.

use super::task_params;
use crate::engine::Run;
use crate::runtime::Node;
use shoal_common::definition::{ITERATION, MAX_ITEMS};
use shoal_common::expr;

/// The downstream task a switch task picks: the `then` of the first case whose `when`
/// holds, else its default (else nothing).
pub(in crate::engine) fn switch_choice(
    run: &Run,
    node: Node,
    id: i64,
) -> Result<Vec<String>, String> {
    let def = &run.rt.definition().tasks[node];
    let Some(sw) = &def.switch else {
        return Ok(vec![]);
    };
    let vars = expr_vars(run, node, id);
    for case in &sw.cases {
        let holds = expr::holds(&case.when, &vars)
            .map_err(|e| format!("switch '{}', case '{}': {e}", def.name, case.when))?;
        if holds {
            return Ok(vec![case.then.clone()]);
        }
    }
    Ok(sw.default.iter().cloned().collect())
}

/// The branch a conditions task with `when` takes: `success` when every upstream task
/// passed and the expression holds; `None` for one without `when`.
pub(in crate::engine) fn conditions_choice(
    run: &Run,
    node: Node,
    id: i64,
) -> Result<Option<Vec<String>>, String> {
    let def = &run.rt.definition().tasks[node];
    let Some((spec, when)) = def
        .conditions
        .as_ref()
        .and_then(|c| Some((c, c.when.as_ref()?)))
    else {
        return Ok(None);
    };
    // A failed upstream task takes the failure branch without reading outputs it lacks.
    let holds = run.rt.upstream_passed(node)
        && expr::holds(when, &expr_vars(run, node, id))
            .map_err(|e| format!("conditions '{}', when '{when}': {e}", def.name))?;
    Ok(Some(match holds {
        true => spec.success.clone(),
        false => spec.failure.clone(),
    }))
}

/// The elements a foreach task fans out over: its `items` expression's list (or a string
/// holding a JSON array).
pub(in crate::engine) fn foreach_items(
    run: &Run,
    node: Node,
    id: i64,
) -> Result<Vec<serde_json::Value>, String> {
    let def = &run.rt.definition().tasks[node];
    let Some(spec) = &def.foreach else {
        return Err(format!("task '{}' has no foreach", def.name));
    };
    let what = || format!("foreach '{}', items '{}'", def.name, spec.items);
    let value = expr::eval(&spec.items, &expr_vars(run, node, id))
        .map_err(|e| format!("{}: {e}", what()))?;
    let value = match value {
        serde_json::Value::String(text) => serde_json::from_str(&text).map_err(|_| {
            format!(
                "{}: gave the text {text:?}, which is not a JSON array",
                what()
            )
        })?,
        other => other,
    };
    let serde_json::Value::Array(items) = value else {
        return Err(format!("{}: gave {value}, which is not a list", what()));
    };
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "{}: {} elements; a foreach takes at most {MAX_ITEMS} (split the list upstream)",
            what(),
            items.len()
        ));
    }
    Ok(items)
}

/// Whether a do_while task's condition holds after `iteration`: it sees the task's
/// parameters, the run's outputs with those of the iteration's tasks by their body names,
/// and `iteration`.
pub(in crate::engine) fn loop_condition(
    run: &Run,
    node: Node,
    id: i64,
    iteration: u32,
) -> Result<bool, String> {
    let def = &run.rt.definition().tasks[node];
    let Some(spec) = &def.do_while else {
        return Err(format!("task '{}' has no do_while", def.name));
    };
    let (params, _) = task_params(run, node, id);
    let outputs = run
        .rt
        .outputs_by_task()
        .chain(run.rt.iteration_outputs(node));
    let vars = expr::Vars::with_params(&params)
        .outputs(outputs)
        .with(ITERATION, &serde_json::json!(iteration));
    expr::holds(&spec.condition, &vars).map_err(|e| {
        format!(
            "do_while '{}', condition '{}': {e}",
            def.name, spec.condition
        )
    })
}

/// What an expression of a task can name: its parameters and the run's outputs so far.
fn expr_vars(run: &Run, node: Node, id: i64) -> expr::Vars {
    let (params, _) = task_params(run, node, id);
    expr::Vars::with_params(&params).outputs(run.rt.outputs_by_task())
}
