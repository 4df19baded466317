//! What the runtime's tests share: a runtime from YAML, the nodes an outcome starts, the
//! task the runtime settled itself, a recorded attempt.

use super::{Action, Node, Outcome, Recorded, WorkflowRuntime};
use shoal_common::definition::WorkflowDef;
use shoal_common::start::Params;
use shoal_common::types::TaskState;
use std::sync::Arc;

pub(super) fn runtime(yaml: &str) -> WorkflowRuntime {
    WorkflowRuntime::new(Arc::new(WorkflowDef::parse(yaml).unwrap()), None).unwrap()
}

/// The nodes whose new attempts `out` records.
pub(super) fn created(out: &Outcome) -> Vec<Node> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateTask { node, .. } => Some(*node),
            _ => None,
        })
        .collect()
}

/// The state, outputs and message of a task the runtime ended itself (a foreach or loop).
pub(super) fn settled(out: &Outcome) -> Option<(TaskState, Params, String)> {
    out.actions.iter().find_map(|a| match a {
        Action::Settled {
            state,
            output,
            message,
            ..
        } => Some((*state, output.clone(), message.clone())),
        _ => None,
    })
}

pub(super) fn row<'a>(
    name: &'a str,
    attempt: i32,
    state: TaskState,
    output: &'a Params,
) -> Recorded<'a> {
    Recorded {
        name,
        attempt,
        state,
        output,
    }
}
