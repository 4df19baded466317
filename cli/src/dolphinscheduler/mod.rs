//! Reads a DolphinScheduler 3.x workflow export (the JSON array the UI's Export button
//! writes: `processDefinition` or, from 3.3, `workflowDefinition`, with
//! `taskDefinitionList`, the task relations and the schedule) and turns each workflow into
//! a shoal definition (YAML, checked by shoal's own parser) and a schedule. Whatever shoal
//! cannot carry over is named in the report; nothing is dropped silently.

mod cron;
mod data_tasks;
mod dependent;
mod export;
mod tasks;

pub use export::environments;
use export::{DagData, Property, Schedule, Task};
use shoal_common::definition::{MAX_NAME_CHARS, TaskDef, TimeoutStrategy, WorkflowDef, normalize};
use shoal_common::types::{ExecutionType, FailureStrategy, Priority};
use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::time::Duration;

/// What an export turns into.
#[derive(Debug)]
pub struct Imported {
    pub workflows: Vec<ImportedWorkflow>,
    /// The environments the imported tasks use, to be set before the workflows apply.
    pub environments: Vec<ImportedEnvironment>,
    /// One line per thing not carried over (or carried over differently), naming it.
    pub report: Vec<String>,
}

#[derive(Debug)]
pub struct ImportedWorkflow {
    pub name: String,
    /// The shoal definition, valid YAML for `shoal apply`.
    pub yaml: String,
    pub tasks: usize,
    pub schedule: Option<ImportedSchedule>,
    /// The workflow was offline in DolphinScheduler.
    pub offline: bool,
}

/// A project environment as `PUT .../environments/{name}` takes it.
#[derive(Debug, PartialEq)]
pub struct ImportedEnvironment {
    pub name: String,
    pub config: String,
    pub description: String,
}

/// A schedule as `POST .../schedules` takes it; created disabled (an export always marks
/// it offline, and a user turns it on after checking).
#[derive(Debug, PartialEq)]
pub struct ImportedSchedule {
    pub cron: String,
    pub timezone: String,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    pub priority: Option<String>,
    pub worker_group: Option<String>,
}

/// How to import: into which project, and what DolphinScheduler's names become.
#[derive(Debug, Default)]
pub struct Options {
    pub project: String,
    /// DolphinScheduler datasource id → shoal datasource name (a worker's `--datasource`).
    pub datasources: HashMap<String, String>,
    /// DolphinScheduler worker group → shoal worker group.
    pub worker_groups: HashMap<String, String>,
    /// DolphinScheduler's environments (its API's list), besides any the export holds.
    pub environments: Vec<export::Environment>,
}

impl Options {
    fn worker_group(&self, group: &str) -> String {
        self.worker_groups
            .get(group)
            .cloned()
            .unwrap_or_else(|| group.to_string())
    }
}

/// Names of workflows and tasks by code, across the whole file, and the options.
pub(crate) struct Codes<'a> {
    workflows: HashMap<i64, String>,
    /// Task code → (workflow name, task name).
    tasks: HashMap<i64, (String, String)>,
    /// Environment code → its shoal name.
    environments: HashMap<i64, String>,
    options: &'a Options,
}

/// Converts the export `text`.
pub fn convert(text: &str, options: &Options) -> anyhow::Result<Imported> {
    let project = options.project.as_str();
    let (dags, mut known) = export::parse(text)?;
    known.extend(options.environments.iter().cloned());
    let mut report = Vec::new();
    let mut codes = Codes {
        workflows: HashMap::new(),
        tasks: HashMap::new(),
        environments: HashMap::new(),
        options,
    };
    let mut env_names = Names::default();
    let mut environments = Vec::new();
    let used: std::collections::HashSet<i64> = dags
        .iter()
        .flat_map(|d| &d.tasks)
        .filter(|t| tasks::takes_environment(t))
        .map(|t| t.environment_code)
        .collect();
    for e in known.into_iter().filter(|e| used.contains(&e.code)) {
        if codes.environments.contains_key(&e.code) {
            continue;
        }
        let name = env_names.unique(&e.name);
        if name != e.name {
            report.push(format!("environment '{}' is named '{name}'", e.name));
        }
        codes.environments.insert(e.code, name.clone());
        environments.push(ImportedEnvironment {
            name,
            config: e.config,
            description: e.description.unwrap_or_default(),
        });
    }
    let mut names = Names::default();
    for dag in &dags {
        let workflow = names.workflow(&dag.workflow.name, &mut report);
        codes.workflows.insert(dag.workflow.code, workflow.clone());
        let mut task_names = Names::default();
        for t in &dag.tasks {
            let name = task_names.task(&workflow, &t.name, &mut report);
            codes.tasks.insert(t.code, (workflow.clone(), name));
        }
    }
    let mut workflows = Vec::new();
    for dag in &dags {
        workflows.push(workflow(dag, project, &codes, &mut report)?);
    }
    // An item or setting repeated in one task is said once.
    let mut seen = std::collections::HashSet::new();
    report.retain(|line| seen.insert(line.clone()));
    Ok(Imported {
        workflows,
        environments,
        report,
    })
}

fn workflow(
    dag: &DagData,
    project: &str,
    codes: &Codes,
    report: &mut Vec<String>,
) -> anyhow::Result<ImportedWorkflow> {
    let name = codes.workflows[&dag.workflow.code].clone();
    let at = |what: &str| format!("{name}: {what}");
    let mut def = WorkflowDef {
        name: name.clone(),
        project: project.to_string(),
        description: dag.workflow.description.clone().unwrap_or_default(),
        params: params(
            &dag.workflow.global_params()?,
            &at("global parameter"),
            report,
        ),
        failure_strategy: FailureStrategy::default(),
        priority: Priority::default(),
        timeout: None,
        timeout_strategy: TimeoutStrategy::default(),
        execution_type: ExecutionType::default(),
        alerts: Vec::new(),
        tenant: None,
        environment: None,
        on_failure: None,
        triggers: Vec::new(),
        tasks: Vec::new(),
    };
    if let Some(s) = &dag.schedule {
        // DolphinScheduler keeps these on the schedule (or the start); shoal on the workflow.
        if let Some(f) = s.failure_strategy.as_deref() {
            def.failure_strategy = named(f, &name)?;
        }
        if let Some(p) = s.priority() {
            def.priority = named(p, &name)?;
        }
        if s.warning_type.as_deref().is_some_and(|w| w != "NONE") {
            report.push(at(&format!(
                "alerts ({} to alert group {}) are not carried over: add `alerts:` naming a shoal alert channel",
                s.warning_type.as_deref().unwrap_or_default(),
                s.warning_group_id.unwrap_or_default()
            )));
        }
    }
    if dag.workflow.timeout > 0 {
        // A workflow timeout is an alarm in DolphinScheduler, not a kill.
        def.timeout = Some(minutes(dag.workflow.timeout));
        def.timeout_strategy = TimeoutStrategy::Warn;
    }
    if let Some(e) = dag.workflow.execution_type.as_deref() {
        def.execution_type = named(e, &name)?;
    }
    let upstream = dag.upstream();
    for t in &dag.tasks {
        let depends: Vec<String> = upstream
            .get(&t.code)
            .into_iter()
            .flatten()
            .filter_map(|c| codes.tasks.get(c).map(|(_, n)| n.clone()))
            .collect();
        let mut task = tasks::convert(t, &name, depends, codes, report)?;
        pass_globals(&mut task, &def.params);
        def.tasks.push(task);
    }
    let described = dag
        .tasks
        .iter()
        .filter(|t| {
            t.description
                .as_deref()
                .is_some_and(|d| !d.trim().is_empty())
        })
        .count();
    if described > 0 {
        report.push(at(&format!(
            "the descriptions of {described} tasks are not kept (shoal tasks have none)"
        )));
    }
    // The project is written even when it is the default one: the file says where it goes.
    let yaml = def.to_yaml(&["project"]);
    // shoal's own checks: what the importer wrote must apply as it is.
    WorkflowDef::parse(&yaml)
        .map_err(|e| anyhow::anyhow!("{name}: the converted workflow is not valid: {e}\n{yaml}"))?;
    let schedule = match &dag.schedule {
        Some(s) => schedule(s, &name, codes.options, report),
        None => None,
    };
    Ok(ImportedWorkflow {
        name,
        yaml,
        tasks: def.tasks.len(),
        schedule,
        offline: dag.workflow.release_state.as_deref() == Some("OFFLINE"),
    })
}

/// A DolphinScheduler sub-process sees its parent's global parameters; a shoal child run
/// gets only what its task passes, so a sub_workflow task passes each of them by name.
fn pass_globals(task: &mut TaskDef, globals: &BTreeMap<String, String>) {
    if let Some(spec) = &mut task.sub_workflow {
        spec.params = globals
            .keys()
            .map(|k| (k.clone(), format!("${{{k}}}")))
            .collect();
    }
}

/// A DolphinScheduler enum value (`SERIAL_WAIT`) as shoal's (`serial_wait`); `at` names
/// where it was found when shoal has no such value.
pub(crate) fn named<T: FromStr<Err = String>>(value: &str, at: &str) -> anyhow::Result<T> {
    value
        .to_lowercase()
        .parse()
        .map_err(|e| anyhow::anyhow!("{at}: {e}"))
}

/// DolphinScheduler's minutes (timeouts, retry intervals, delays) as a duration.
pub(crate) fn minutes(n: i64) -> Duration {
    Duration::from_secs(n.unsigned_abs().saturating_mul(60))
}

fn schedule(
    s: &Schedule,
    workflow: &str,
    options: &Options,
    report: &mut Vec<String>,
) -> Option<ImportedSchedule> {
    let timezone = s.timezone_id.clone().unwrap_or_else(|| "UTC".into());
    let cron = match cron::convert(&s.crontab, &timezone) {
        Ok(c) => c,
        Err(why) => {
            report.push(format!("{workflow}: schedule not imported: {why}"));
            return None;
        }
    };
    let time = |t: &Option<String>, what: &str, report: &mut Vec<String>| {
        let t = t.as_deref()?;
        match cron::local_to_rfc3339(t, &timezone) {
            Ok(t) => Some(t),
            Err(why) => {
                report.push(format!("{workflow}: schedule {what} '{t}' left out: {why}"));
                None
            }
        }
    };
    Some(ImportedSchedule {
        start_time: time(&s.start_time, "start", report),
        end_time: time(&s.end_time, "end", report),
        cron,
        timezone,
        priority: s.priority().map(str::to_lowercase),
        worker_group: s
            .worker_group
            .as_deref()
            .map(|g| options.worker_group(g))
            .filter(|g| g != "default"),
    })
}

/// IN parameters with a value become `params`; OUT ones need no declaration (every
/// `${setValue(k=v)}` flows downstream), and an IN one without a value takes what the run
/// passes in, as in DolphinScheduler. Types other than VARCHAR are noted: shoal's
/// parameters are text, read as numbers where an expression compares them.
pub(crate) fn params(
    props: &[Property],
    what: &str,
    report: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for p in props {
        if p.direct.as_deref() == Some("OUT") || p.value.as_deref().unwrap_or("").is_empty() {
            continue;
        }
        if matches!(p.kind.as_deref(), Some("LIST" | "FILE")) {
            report.push(format!(
                "{what} '{}' of type {} is passed as text",
                p.prop,
                p.kind.as_deref().unwrap_or_default()
            ));
        }
        m.insert(p.prop.clone(), p.value.clone().unwrap_or_default());
    }
    m
}

/// Names shoal accepts (letters and digits of any script, `_`, `-`, `.`: DolphinScheduler's
/// Chinese names are kept as written), unique within their scope.
#[derive(Default)]
struct Names {
    taken: std::collections::HashSet<String>,
}

impl Names {
    fn workflow(&mut self, name: &str, report: &mut Vec<String>) -> String {
        let clean = self.unique(name);
        if clean != name {
            report.push(format!("workflow '{name}' is named '{clean}'"));
        }
        clean
    }

    fn task(&mut self, workflow: &str, name: &str, report: &mut Vec<String>) -> String {
        let clean = self.unique(name);
        if clean != name {
            report.push(format!("{workflow}: task '{name}' is named '{clean}'"));
        }
        clean
    }

    /// `name` made valid (in NFC; each character a name cannot hold, such as a space or
    /// `/`, made `_`), with `_2`, `_3`, … added until no name given before has it.
    fn unique(&mut self, name: &str) -> String {
        let mut clean: String = normalize(name.trim())
            .chars()
            .map(|c| match c {
                c if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') => c,
                _ => '_',
            })
            .take(MAX_NAME_CHARS - 8)
            .collect();
        if !clean.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            clean.insert(0, '_');
        }
        let mut candidate = clean.clone();
        let mut n = 1;
        while !self.taken.insert(candidate.clone()) {
            n += 1;
            candidate = format!("{clean}_{n}");
        }
        candidate
    }
}

impl Task {
    /// Where the report names this task.
    fn at(&self, workflow: &str, codes: &Codes) -> String {
        let name = codes
            .tasks
            .get(&self.code)
            .map_or(self.name.as_str(), |(_, n)| n);
        format!("{workflow}: task '{name}' ({})", self.task_type)
    }
}

#[cfg(test)]
mod tests;
