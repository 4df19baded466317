//! The checks a definition passes before anything runs: names, task types and their
//! settings, dependencies without a cycle, branches and error handlers.

use super::name::{valid_identifier, valid_name, valid_tenant};
use super::{
    DefinitionError, ErrorAction, LEASE_RANGE, TaskDef, WorkflowDef, container, data_tasks,
    dependent, do_while, fanout, publish,
};
use crate::types::{AlertOn, TaskType};
use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use std::collections::HashMap;

impl WorkflowDef {
    pub fn validate(&self) -> Result<(), DefinitionError> {
        for (what, value) in [
            ("workflow name", &self.name),
            ("project name", &self.project),
        ] {
            if !valid_name(value) {
                return Err(DefinitionError::BadName {
                    what,
                    value: value.clone(),
                });
            }
        }
        if let Some(tenant) = self.tenant.as_ref().filter(|t| !valid_tenant(t)) {
            return Err(DefinitionError::BadName {
                what: "tenant (an OS user name, at most 32 characters)",
                value: tenant.clone(),
            });
        }
        if let Some(h) = &self.on_failure {
            for (what, value) in [
                ("on_failure workflow", Some(&h.workflow)),
                ("on_failure project", h.project.as_ref()),
            ] {
                if let Some(value) = value.filter(|v| !valid_name(v)) {
                    return Err(DefinitionError::BadName {
                        what,
                        value: value.clone(),
                    });
                }
            }
        }
        if let Some(env) = self.environment.as_ref().filter(|e| !valid_name(e)) {
            return Err(DefinitionError::BadName {
                what: "environment",
                value: env.clone(),
            });
        }
        if let Some(alert) = self.alerts.iter().find(|a| !valid_name(&a.channel)) {
            return Err(DefinitionError::BadName {
                what: "alert channel",
                value: alert.channel.clone(),
            });
        }
        crate::trigger::validate(&self.triggers)?;
        if self.tasks.is_empty() {
            return Err(DefinitionError::Empty(self.name.clone()));
        }
        let mut index = HashMap::with_capacity(self.tasks.len());
        for (i, t) in self.tasks.iter().enumerate() {
            if !valid_name(&t.name) {
                return Err(DefinitionError::BadName {
                    what: "task name",
                    value: t.name.clone(),
                });
            }
            if let Some(group) = &t.task_group
                && !valid_name(group)
            {
                return Err(DefinitionError::BadName {
                    what: "task group",
                    value: group.clone(),
                });
            }
            if let Some(env) = &t.environment
                && !valid_name(env)
            {
                return Err(DefinitionError::BadName {
                    what: "environment",
                    value: env.clone(),
                });
            }
            if index.insert(t.name.as_str(), i).is_some() {
                return Err(DefinitionError::DuplicateTask(t.name.clone()));
            }
            for alert in &t.alerts {
                if !valid_name(&alert.channel) {
                    return Err(DefinitionError::BadName {
                        what: "alert channel",
                        value: alert.channel.clone(),
                    });
                }
                if !matches!(alert.on, AlertOn::TaskFailure | AlertOn::TaskTimeout) {
                    return Err(DefinitionError::BadBranch {
                        task: t.name.clone(),
                        reason: format!(
                            "a task's alert fires on task_failure or task_timeout, not {} \
                             (run alerts go in the workflow's alerts)",
                            alert.on
                        ),
                    });
                }
            }
            let kind =
                t.task_type
                    .parse::<TaskType>()
                    .map_err(|_| DefinitionError::UnknownType {
                        task: t.name.clone(),
                        task_type: t.task_type.clone(),
                        known: TaskType::ALL
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })?;
            let blank = |v: &Option<String>| v.as_deref().is_none_or(|c| c.trim().is_empty());
            let missing = match kind {
                TaskType::Shell => blank(&t.command).then_some("command"),
                TaskType::Python => blank(&t.script).then_some("script"),
                TaskType::Http => t.http.is_none().then_some("http"),
                TaskType::Sql => t.sql.is_none().then_some("sql"),
                TaskType::Conditions => t.conditions.is_none().then_some("conditions"),
                TaskType::Switch => t.switch.is_none().then_some("switch"),
                TaskType::SubWorkflow => t.sub_workflow.is_none().then_some("sub_workflow"),
                TaskType::Dependent => t.dependent.is_none().then_some("dependent"),
                TaskType::Callback => t.callback.is_none().then_some("callback"),
                TaskType::Terminate => t.terminate.is_none().then_some("terminate"),
                TaskType::Foreach => t.foreach.is_none().then_some("foreach"),
                TaskType::DoWhile => t.do_while.is_none().then_some("do_while"),
                TaskType::External => t.queue.is_none().then_some("queue"),
                TaskType::Spark => t.spark.is_none().then_some("spark"),
                TaskType::Notebook => t.notebook.is_none().then_some("notebook"),
                TaskType::Container => t.container.is_none().then_some("container"),
                TaskType::Kubernetes => t.kubernetes.is_none().then_some("kubernetes"),
                TaskType::Publish => t.publish.is_none().then_some("publish"),
                TaskType::Noop | TaskType::Delay | TaskType::Wait => None,
            };
            if let Some(field) = missing {
                return Err(DefinitionError::MissingField {
                    task: t.name.clone(),
                    task_type: kind.as_str(),
                    field,
                });
            }
            if t.environment.is_some() && !matches!(kind, TaskType::Shell | TaskType::Python) {
                return Err(DefinitionError::BadBranch {
                    task: t.name.clone(),
                    reason: format!(
                        "environment applies to shell and python tasks only, not {}",
                        kind.as_str()
                    ),
                });
            }
            fanout::check(self, t)?;
            dependent::check(t)?;
            do_while::check(self, t)?;
            data_tasks::check(t)?;
            publish::check(t)?;
            let waits = matches!(
                kind,
                TaskType::Wait | TaskType::Callback | TaskType::External
            );
            if t.on_timeout.is_some() && !waits {
                return Err(DefinitionError::BadBranch {
                    task: t.name.clone(),
                    reason: "on_timeout applies to wait, callback and external tasks only".into(),
                });
            }
            check_external(t, kind)?;
            check_event(t, kind)?;
            check_containers(t, kind)?;
        }
        for t in &self.tasks {
            for d in &t.depends_on {
                if !index.contains_key(d.as_str()) {
                    return Err(DefinitionError::UnknownDependency {
                        task: t.name.clone(),
                        dependency: d.clone(),
                    });
                }
            }
        }
        if let Some(cycle) = self.find_cycle(&index) {
            return Err(DefinitionError::Cycle(cycle));
        }
        self.check_error_handlers(&index)?;
        for t in &self.tasks {
            for target in t.branch_targets() {
                let depends = self
                    .tasks
                    .iter()
                    .find(|d| d.name == target)
                    .is_some_and(|d| d.depends_on.contains(&t.name));
                if !depends {
                    return Err(DefinitionError::BadBranch {
                        task: t.name.clone(),
                        reason: format!("'{target}' must be a task that depends on '{}'", t.name),
                    });
                }
            }
            if let Some(when) = t.conditions.as_ref().and_then(|c| c.when.as_ref()) {
                crate::expr::parse(when).map_err(|e| DefinitionError::BadBranch {
                    task: t.name.clone(),
                    reason: format!("conditions when '{when}': {e}"),
                })?;
            }
            if let Some(sw) = &t.switch {
                for case in &sw.cases {
                    crate::expr::parse(&case.when).map_err(|e| DefinitionError::BadBranch {
                        task: t.name.clone(),
                        reason: format!("case '{}': {e}", case.when),
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Catch handlers name a task of the workflow that waits for nothing else and handles
    /// one task's failures; handlers do not catch each other in a circle.
    fn check_error_handlers(&self, index: &HashMap<&str, usize>) -> Result<(), DefinitionError> {
        let mut handled_by: HashMap<&str, &str> = HashMap::new();
        for t in &self.tasks {
            let Some(e) = &t.on_error else { continue };
            let bad = |reason: String| DefinitionError::BadBranch {
                task: t.name.clone(),
                reason,
            };
            if t.retries != 0 && e.retries.is_some() {
                return Err(bad(
                    "give retries either on the task or in on_error, not both".into(),
                ));
            }
            let then = match (e.action, e.then.as_deref()) {
                (ErrorAction::Catch, Some(then)) => then,
                (ErrorAction::Catch, None) => {
                    return Err(bad("on_error catch needs `then`: the handler task".into()));
                }
                (_, Some(_)) => {
                    return Err(bad("on_error `then` applies to action catch only".into()));
                }
                (_, None) => continue,
            };
            let Some(&h) = index.get(then) else {
                return Err(bad(format!(
                    "on_error handler '{then}' is not a task of this workflow"
                )));
            };
            if !self.tasks[h].depends_on.is_empty() || then == t.name {
                return Err(bad(format!(
                    "on_error handler '{then}' runs only when the catch fires: it may not depend on other tasks"
                )));
            }
            if let Some(other) = handled_by.insert(then, &t.name) {
                return Err(bad(format!(
                    "on_error handler '{then}' already handles '{other}': give each catch its own handler"
                )));
            }
        }
        let catches: HashMap<&str, &str> = handled_by.iter().map(|(h, t)| (*t, *h)).collect();
        for start in catches.keys() {
            let mut path = vec![*start];
            while let Some(next) = catches.get(path[path.len() - 1]) {
                if path.contains(next) {
                    path.push(next);
                    return Err(DefinitionError::BadBranch {
                        task: start.to_string(),
                        reason: format!("error handlers catch each other: {}", path.join(" -> ")),
                    });
                }
                path.push(next);
            }
        }
        Ok(())
    }

    /// Returns the task names of one cycle, first name repeated at the end.
    fn find_cycle(&self, index: &HashMap<&str, usize>) -> Option<Vec<String>> {
        let mut g = DiGraph::<usize, ()>::with_capacity(self.tasks.len(), self.tasks.len());
        let nodes: Vec<_> = (0..self.tasks.len()).map(|i| g.add_node(i)).collect();
        for (i, t) in self.tasks.iter().enumerate() {
            for d in &t.depends_on {
                g.add_edge(nodes[index[d.as_str()]], nodes[i], ());
            }
        }
        for scc in tarjan_scc(&g) {
            let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
            if scc.len() > 1 || self_loop {
                // Walk the component along its edges so the names read as a cycle.
                let members: std::collections::HashSet<_> = scc.iter().copied().collect();
                let start = *scc.iter().min_by_key(|n| g[**n]).expect("non-empty scc");
                let mut path = vec![start];
                let mut cur = start;
                loop {
                    let next = g
                        .neighbors(cur)
                        .filter(|n| members.contains(n))
                        .min_by_key(|n| if *n == start { 0 } else { 1 + g[*n] })
                        .expect("a node in a cycle has a successor in it");
                    if next == start || path.contains(&next) {
                        path.push(next);
                        break;
                    }
                    path.push(next);
                    cur = next;
                }
                return Some(
                    path.into_iter()
                        .map(|n| self.tasks[g[n]].name.clone())
                        .collect(),
                );
            }
        }
        None
    }
}

/// An external task's queue is a name; its lease is within [`LEASE_RANGE`]; neither is
/// given to another type.
fn check_external(t: &TaskDef, kind: TaskType) -> Result<(), DefinitionError> {
    let bad = |reason: String| {
        Err(DefinitionError::BadBranch {
            task: t.name.clone(),
            reason,
        })
    };
    if kind != TaskType::External {
        if t.queue.is_some() || t.lease.is_some() {
            return bad("queue and lease apply to external tasks only".into());
        }
        return Ok(());
    }
    if let Some(queue) = &t.queue
        && !valid_identifier(queue)
    {
        return Err(DefinitionError::BadName {
            what: "queue",
            value: queue.clone(),
        });
    }
    let (least, most) = LEASE_RANGE;
    if !(least..=most).contains(&t.lease()) {
        return bad(format!(
            "lease {} is out of range: use {} to {}",
            crate::duration::format(t.lease()),
            crate::duration::format(least),
            crate::duration::format(most)
        ));
    }
    Ok(())
}

/// A wait task's event is a name and comes with a key, which names no secret (it is
/// stored and shown as it expands); neither is given to another type.
fn check_event(t: &TaskDef, kind: TaskType) -> Result<(), DefinitionError> {
    let bad = |reason: &str| {
        Err(DefinitionError::BadBranch {
            task: t.name.clone(),
            reason: reason.into(),
        })
    };
    match (&t.event, &t.key) {
        (None, None) => Ok(()),
        _ if kind != TaskType::Wait => bad("event and key apply to wait tasks only"),
        (None, Some(_)) => {
            bad("key needs event: name the event that completes the task (event: order_paid)")
        }
        (Some(event), _) if !valid_identifier(event) => Err(DefinitionError::BadName {
            what: "event",
            value: event.clone(),
        }),
        (Some(_), None) => bad(
            "a wait for an event needs key: the business key the event carries (key: \"${order_id}\")",
        ),
        (Some(_), Some(key)) if key.trim().is_empty() => {
            bad("key is empty: give the business key the event carries")
        }
        (Some(_), Some(key))
            if crate::params::references(key)
                .iter()
                .any(|name| name.starts_with("secret.")) =>
        {
            bad("key may not name a secret: it is stored and shown as it expands")
        }
        (Some(_), Some(_)) => Ok(()),
    }
}

/// A container's and a kubernetes Job's settings make sense; neither is given to another
/// type.
fn check_containers(t: &TaskDef, kind: TaskType) -> Result<(), DefinitionError> {
    let misplaced = match kind {
        TaskType::Container => t.kubernetes.is_some().then_some("kubernetes"),
        TaskType::Kubernetes => t.container.is_some().then_some("container"),
        _ if t.container.is_some() => Some("container"),
        _ if t.kubernetes.is_some() => Some("kubernetes"),
        _ => None,
    };
    if let Some(field) = misplaced {
        return Err(DefinitionError::BadBranch {
            task: t.name.clone(),
            reason: format!("'{field}' applies to {field} tasks only"),
        });
    }
    if let Some(c) = &t.container {
        container::check_container(&t.name, c)?;
    }
    if let Some(k) = &t.kubernetes {
        container::check_kubernetes(&t.name, k)?;
    }
    Ok(())
}
