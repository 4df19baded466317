//! A foreach task on the master: its list is read when it starts, recorded on its row
//! (a master taking the run over expands it again from there), and the runtime grows its
//! children.

use super::cycle::Cycle;
use super::{Engine, spec};
use crate::runtime::{Event, Fact};
use shoal_common::definition::ITEMS;
use shoal_common::start::Params;
use shoal_common::types::TaskState;
use shoal_store::TaskUpdate;

impl Engine {
    pub(super) fn expand(&mut self, id: i64, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.to_start(id) else { return };
        let (instance, node, attempt) = (t.instance, t.node, t.attempt);
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        if !run.rt.expandable(node, attempt) {
            return;
        }
        let items = match spec::foreach_items(run, node, id) {
            Ok(items) => items,
            Err(why) => return self.settle(id, Fact::Unrunnable(why), cycle, now),
        };
        let spec = run.rt.definition().tasks[node].foreach.as_ref();
        let at_once = match spec.and_then(|s| s.max_parallel) {
            Some(m) => format!(", at most {m} at once"),
            None => String::new(),
        };
        let mut u = TaskUpdate::state(id, TaskState::Running);
        u.started_at = Some(now);
        u.message = Some(format!("{} items{at_once}", items.len()));
        let listed = serde_json::Value::Array(items.clone()).to_string();
        u.output = Some(Params::from([(ITEMS.to_string(), listed)]));
        // Recorded before the children: an empty list settles the task in this apply.
        cycle.update(u);
        self.apply(
            instance,
            Event::Expanded {
                node,
                attempt,
                items,
            },
            cycle,
            now,
        );
    }
}
