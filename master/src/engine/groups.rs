//! Tasks of a task group: they are recorded as `waiting_task_group` and queued only once
//! the store granted them a slot (see `shoal_store` task groups).

use super::Run;
use crate::runtime::Node;
use shoal_common::types::TaskState;
use shoal_store::TaskUpdate;

/// The task group whose slot the task needs. A dry run executes nothing and needs none.
pub(super) fn slot_group(run: &Run, node: Node) -> Option<&str> {
    let group = run.rt.definition().tasks[node].task_group.as_deref();
    group.filter(|_| !run.options.dry_run)
}

pub(super) fn waiting_message(group: &str) -> String {
    format!("waiting for a slot of task group '{group}'")
}

/// The row of an attempt that starts waiting for a slot.
pub(super) fn waiting_update(id: i64, group: &str) -> TaskUpdate {
    let mut u = TaskUpdate::state(id, TaskState::WaitingTaskGroup);
    u.message = Some(waiting_message(group));
    u
}
