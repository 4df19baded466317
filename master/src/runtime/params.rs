//! What flows to a task: the outputs its upstream tasks hand on, and the parameters it
//! sees (with which of them come from outside the definition).

use super::{Node, Slot, WorkflowRuntime};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use shoal_common::params::{Outside, Source};
use shoal_common::start::Params;

impl WorkflowRuntime {
    /// Records what a passed node hands downstream: its upstream tasks' outputs,
    /// overridden by its own.
    pub(super) fn hand_on(&mut self, node: Node, own: Params) {
        let mut vars = self.injected.get(&node).cloned().unwrap_or_default();
        for u in self.upstream_of(node) {
            vars.extend(
                self.outputs[u.index()]
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        vars.extend(own);
        self.outputs[node] = vars;
    }

    /// The tasks whose outputs `node` receives: its upstream tasks, or for a foreach's
    /// child (and the first tasks of a loop's first iteration) those of its parent task.
    pub(super) fn upstream_of(&self, node: Node) -> impl Iterator<Item = NodeIndex> + '_ {
        let own = NodeIndex::new(node);
        let has_own = (self.dag.neighbors_directed(own, Direction::Incoming))
            .next()
            .is_some();
        let inputs = match self.parent.get(&node).copied() {
            Some(parent) if !has_own => parent,
            _ => node,
        };
        self.dag
            .neighbors_directed(NodeIndex::new(inputs), Direction::Incoming)
    }

    /// What each passed task of the definition hands downstream, by task name (what
    /// expressions call `outputs.<task>`); not foreach children or loop iterations.
    pub fn outputs_by_task(&self) -> impl Iterator<Item = (&str, &Params)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(node, s)| match s {
                Slot::Done { state, .. }
                    if state.lets_downstream_run() && !self.parent.contains_key(&node) =>
                {
                    Some((self.def.tasks[node].name.as_str(), &self.outputs[node]))
                }
                _ => None,
            })
    }

    /// Parameters a task sees, by precedence: start parameters > task local > upstream
    /// outputs > workflow global, plus built-ins. A task local that is just `${its name}`
    /// passes the lower one on.
    pub fn task_params(&self, node: Node, start: &Params, builtins: &Params) -> Params {
        self.task_values(node, start, builtins).0
    }

    /// [`Self::task_params`], and which of them come from outside the definition: start
    /// parameters, upstream outputs, the failure a catch handler receives, a foreach
    /// child's element.
    pub fn task_values(&self, node: Node, start: &Params, builtins: &Params) -> (Params, Outside) {
        let mut p = self.def.params.clone();
        let mut outside = Outside::new();
        let mut add = |p: &mut Params, from: &Params, source: Option<Source>| {
            for (k, v) in from {
                p.insert(k.clone(), v.clone());
                match source {
                    Some(source) => outside.insert(k.clone(), source),
                    None => outside.remove(k),
                };
            }
        };
        for u in self.upstream_of(node) {
            add(&mut p, &self.outputs[u.index()], Some(Source::Output));
        }
        if let Some(failure) = self.injected.get(&node) {
            add(&mut p, failure, Some(Source::Failure));
        }
        let task = &self.def.tasks[node];
        // `name: "${name}"` passes on the value the task gets from outside it (the
        // workflow's, an upstream output), source and all; it does not name itself.
        let names =
            |k: &str, v: &str| v.strip_prefix("${").and_then(|v| v.strip_suffix('}')) == Some(k);
        let passes_on = |k: &str, v: &str| names(k, v) && p.contains_key(k);
        let (element, own): (Params, Params) = (task.params.iter())
            .filter(|(k, v)| !passes_on(k, v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| self.is_element(node, k));
        add(&mut p, &own, None);
        add(&mut p, &element, Some(Source::Item));
        add(&mut p, start, Some(Source::Start));
        add(&mut p, builtins, None);
        (p, outside)
    }

    /// Whether parameter `name` of `node` is its foreach element (`item`, `item.field`).
    fn is_element(&self, node: Node, name: &str) -> bool {
        let parent = self.parent.get(&node).map(|&p| &self.def.tasks[p]);
        let Some(spec) = parent.and_then(|p| p.foreach.as_ref()) else {
            return false;
        };
        let as_name = spec.as_name.as_str();
        name.strip_prefix(as_name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    }
}
