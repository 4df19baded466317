//! What a definition's tasks name, walked over every task (top-level tasks, foreach
//! templates and do_while bodies): other projects, task groups, environments, alert
//! channels; and a run's start options applied to them.

use super::{AlertSpec, DEFAULT_WORKER_GROUP, TaskDef, WorkflowDef};
use crate::start::StartOptions;
use crate::types::{AlertOn, TaskType};
use std::collections::HashMap;

/// Projects other than a workflow's own that it names ([`WorkflowDef::other_projects`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OtherProjects<'a> {
    /// It starts runs there.
    pub starts: Vec<&'a str>,
    /// It reads runs there.
    pub reads: Vec<&'a str>,
}

impl WorkflowDef {
    /// The other projects the workflow reaches into, each once: where it starts runs
    /// (sub-workflows, foreach children, its `on_failure` workflow) and where it reads
    /// them (dependent items, which wait on their states and may pass on their outputs).
    pub fn other_projects(&self) -> OtherProjects<'_> {
        let mut other = OtherProjects::default();
        other
            .starts
            .extend(self.on_failure.as_ref().and_then(|h| h.project.as_deref()));
        for t in self.all_tasks() {
            other
                .starts
                .extend(t.sub_workflow.as_ref().and_then(|s| s.project.as_deref()));
            if let Some(each) = &t.foreach {
                other.starts.extend(each.project.as_deref());
            }
            if let Some(dependent) = &t.dependent {
                other.reads.extend(dependent.projects());
            }
        }
        for list in [&mut other.starts, &mut other.reads] {
            list.retain(|p| *p != self.project);
            list.sort_unstable();
            list.dedup();
        }
        other
    }

    /// Task groups the tasks use, each once.
    pub fn task_groups(&self) -> Vec<&str> {
        let mut groups: Vec<&str> = self
            .tasks
            .iter()
            .filter_map(|t| t.task_group.as_deref())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// Every task of the definition: its top-level tasks, their foreach templates and
    /// do_while bodies (and theirs, nested), parents before what they hold.
    pub fn all_tasks(&self) -> Vec<&TaskDef> {
        fn walk<'a>(tasks: impl Iterator<Item = &'a TaskDef>, into: &mut Vec<&'a TaskDef>) {
            for t in tasks {
                into.push(t);
                if let Some(each) = &t.foreach {
                    walk(each.task.as_deref().into_iter(), into);
                }
                if let Some(body) = &t.do_while {
                    walk(body.tasks.iter(), into);
                }
            }
        }
        let mut all = Vec::with_capacity(self.tasks.len());
        walk(self.tasks.iter(), &mut all);
        all
    }

    /// [`WorkflowDef::all_tasks`], each changed by `change`.
    pub fn change_all_tasks(&mut self, mut change: impl FnMut(&mut TaskDef)) {
        fn walk(tasks: &mut [TaskDef], change: &mut impl FnMut(&mut TaskDef)) {
            for t in tasks {
                change(t);
                if let Some(template) = t.foreach.as_mut().and_then(|e| e.task.as_deref_mut()) {
                    walk(std::slice::from_mut(template), change);
                }
                if let Some(body) = &mut t.do_while {
                    walk(&mut body.tasks, change);
                }
            }
        }
        walk(&mut self.tasks, &mut change);
    }

    /// Environments the workflow names (its own and any of its tasks'), each once.
    pub fn environments(&self) -> Vec<&str> {
        let tasks = self.all_tasks().into_iter();
        let mut names: Vec<&str> = self.environment.iter().map(String::as_str).collect();
        names.extend(tasks.filter_map(|t| t.environment.as_deref()));
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The environment task `task` of this definition runs in under `options`: the run's,
    /// else the task's own, else the workflow's; None for a task that is not shell or
    /// python (no other type sources one).
    pub fn environment_of<'a>(
        &'a self,
        task: &'a TaskDef,
        options: &'a StartOptions,
    ) -> Option<&'a str> {
        if !matches!(task.kind(), TaskType::Shell | TaskType::Python) {
            return None;
        }
        let chosen = options.environment.as_ref().or(task.environment.as_ref());
        chosen.or(self.environment.as_ref()).map(String::as_str)
    }

    /// Alert channels the workflow and any of its tasks name, each once.
    pub fn alert_channels(&self) -> Vec<&str> {
        let tasks = self.all_tasks().into_iter().flat_map(|t| &t.alerts);
        let mut channels: Vec<&str> = self
            .alerts
            .iter()
            .chain(tasks)
            .map(|a| a.channel.as_str())
            .collect();
        channels.sort_unstable();
        channels.dedup();
        channels
    }

    /// Upstream task indices of every task, in task order. Assumes a validated definition.
    pub fn upstream_indices(&self) -> Vec<Vec<usize>> {
        let index: HashMap<&str, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        self.tasks
            .iter()
            .map(|t| {
                t.depends_on
                    .iter()
                    .filter_map(|d| index.get(d.as_str()).copied())
                    .collect()
            })
            .collect()
    }

    /// The definition as a run started with `options` executes it: their worker group
    /// (for every task that names none), failure strategy and timeout win over the
    /// definition's, and their alert channels replace the workflow's (as
    /// DolphinScheduler's start dialog's alert group does): each gets the run events the
    /// workflow's alerts subscribed to, or every end of the run when they subscribed to
    /// none. A task's own alerts stay.
    pub fn apply_start(&mut self, options: &StartOptions) {
        if let Some(strategy) = options.failure_strategy {
            self.failure_strategy = strategy;
        }
        if let Some(timeout) = options.timeout {
            self.timeout = Some(timeout);
        }
        if let Some(group) = &options.worker_group {
            self.change_all_tasks(|task| {
                if task.worker_group == DEFAULT_WORKER_GROUP {
                    task.worker_group.clone_from(group);
                }
            });
        }
        if !options.alert_channels.is_empty() {
            let mut events: Vec<AlertOn> = self.alerts.iter().map(|a| a.on).collect();
            events.sort_unstable_by_key(|on| on.as_str());
            events.dedup();
            if events.is_empty() {
                events.push(AlertOn::Any);
            }
            self.alerts = events
                .into_iter()
                .flat_map(|on| {
                    options.alert_channels.iter().map(move |channel| AlertSpec {
                        on,
                        channel: channel.clone(),
                    })
                })
                .collect();
        }
    }
}
