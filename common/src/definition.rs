//! The workflow definition format (YAML or JSON) and its validation.
//!
//! A definition that passes [`WorkflowDef::parse`] has unique task names, known task
//! types, dependencies that exist and no cycle, so the master can build its DAG without
//! checking again.

pub use crate::trigger::TriggerDef;
use crate::types::{AlertOn, ExecutionType, FailureStrategy, Priority, TaskType};
use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

mod dependent;
mod do_while;
mod expansion;
mod fanout;
pub use dependent::{
    DATE_CYCLES, DEFAULT_CHECK_INTERVAL, DEFAULT_TIMEOUT as DEFAULT_DEPENDENT_TIMEOUT, DateCycle,
    DependGroup, DependItem, DependResult, DependentSpec, Interval, OnDependFailure, Relation,
    combine, dependent_stages,
};
pub use do_while::{DoWhileSpec, ITERATION, ITERATIONS, MAX_ITERATIONS, iteration_name};
pub use fanout::{ForeachSpec, ITEMS, MAX_ITEMS, RESULTS, child_name};

/// What a definition may expand to through YAML aliases unless told otherwise: the
/// api-server's default body limit, so an alias can stand for no more than could be sent.
pub const MAX_EXPANDED_BYTES: usize = 8 * 1024 * 1024;

pub const DEFAULT_PROJECT: &str = "default";
pub const DEFAULT_WORKER_GROUP: &str = "default";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDef {
    pub name: String,
    #[serde(default = "default_project")]
    pub project: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Global parameters, referenced as `${name}`.
    #[serde(default, deserialize_with = "scalar_map")]
    pub params: BTreeMap<String, String>,
    #[serde(default)]
    pub failure_strategy: FailureStrategy,
    #[serde(default)]
    pub priority: Priority,
    /// Longest a run may take; `timeout_strategy: fail` stops it as failed.
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30m")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub timeout_strategy: TimeoutStrategy,
    /// How runs of this workflow may overlap.
    #[serde(default, skip_serializing_if = "ExecutionType::is_parallel")]
    pub execution_type: ExecutionType,
    /// Who is told when a run ends (or times out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertSpec>,
    /// The OS user the workers run its shell and python tasks as (it must exist on them);
    /// none: the worker's own user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tenant: Option<String>,
    /// A workflow started when a run fails, with that run's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<ExceptionHandler>,
    /// Webhooks that start runs (`POST /api/v1/hooks/{project}/{workflow}/{trigger}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<TriggerDef>,
    pub tasks: Vec<TaskDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertSpec {
    pub on: AlertOn,
    /// An alert channel (`shoal alert-channel create`).
    pub channel: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskDef {
    /// Required, except in a foreach's task template (its children are named for it).
    #[serde(default)]
    pub name: String,
    /// Kept as text so that an unknown type is reported with the task's name.
    #[serde(rename = "type")]
    pub task_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub priority: Priority,
    #[serde(default = "default_worker_group")]
    pub worker_group: String,
    /// A task group (`shoal task-group create`): the task waits for one of its slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_group: Option<String>,
    /// Order among the group's waiting tasks: higher first, then submit order.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub task_group_priority: i32,
    /// Task-local parameters; they win over the workflow's global ones.
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub params: BTreeMap<String, String>,
    /// `false` skips the task; downstream tasks treat it as passed.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// Further attempts after a failure, each its own task instance.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Wait between attempts (a master timer; no worker slot is held).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub retry_interval: Option<Duration>,
    /// Wait before the first attempt starts.
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub delay: Option<Duration>,
    /// Longest an attempt may run; what happens then is `timeout_strategy`.
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30m")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub timeout_strategy: TimeoutStrategy,
    /// `python`: the script, run by the worker's configured interpreter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// `http`: the request and what counts as success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSpec>,
    /// `sql`: a query against a datasource named in the worker's configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<SqlSpec>,
    /// `conditions`: which downstream tasks run when every upstream task passed
    /// (`success`) or not (`failure`); the other branch is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<ConditionsSpec>,
    /// `switch`: the first case whose `when` holds picks the downstream task to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchSpec>,
    /// `sub_workflow`: runs another workflow as a child instance and ends with its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_workflow: Option<SubWorkflowSpec>,
    /// `dependent`: waits until runs of other workflows for dates relative to this run's
    /// have succeeded (see [`DependentSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependent: Option<DependentSpec>,
    /// `callback`: the request that hands an outside system the task's callback URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<CallbackSpec>,
    /// What a failure does once the task's retries are spent: see [`OnErrorSpec`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<OnErrorSpec>,
    /// `terminate`: ends the run at once in this state, killing what runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate: Option<TerminateSpec>,
    /// `foreach`: one child task (or sub-workflow run) per element of a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreach: Option<ForeachSpec>,
    /// `do_while`: a body of tasks run again while a condition holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub do_while: Option<DoWhileSpec>,
    /// `wait` and `callback`: what happens when `timeout` passes first: `fail` (the
    /// default), `succeed`, or the name of a downstream task that then runs instead of
    /// the others (it is skipped when the task completes in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
}

/// The parameter a callback task's request carries its callback URL in.
pub const CALLBACK_URL: &str = "callback.url";

/// The output a `wait` or `callback` task that timed out carries (`"true"`); downstream
/// tasks see it as `${timed_out}`, and it picks an `on_timeout` branch.
pub const TIMED_OUT: &str = "timed_out";

/// The exception workflow of a workflow: it runs when a run fails, with the failed run's
/// parameters and `failed.instance_id`, `failed.workflow`, `failed.tasks`,
/// `failed.message`, plus its own `params`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExceptionHandler {
    pub workflow: String,
    /// Default: the failed run's project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub params: BTreeMap<String, String>,
}

/// A task's error handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OnErrorSpec {
    pub action: ErrorAction,
    /// Further attempts before the action (instead of the task's `retries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Wait between those attempts (instead of the task's `retry_interval`).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub interval: Option<Duration>,
    /// `catch`: the handler task that runs then (and only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<String>,
}

/// What a task's failure does once its retries are spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorAction {
    /// Fail as usual (after the handler's `retries`): the workflow's `failure_strategy`.
    Retry,
    /// Record the failure and go on as if the task passed.
    Ignore,
    /// Run the `then` handler task instead of what follows the task; the run fails only
    /// if the handler fails.
    Catch,
    /// Fail the run at once, killing what runs, whatever the `failure_strategy`.
    Throw,
}

/// The parameters a catch handler task sees about the failure it handles.
pub const ERROR_TASK: &str = "error.task";
pub const ERROR_MESSAGE: &str = "error.message";
pub const ERROR_EXIT_CODE: &str = "error.exit_code";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminateSpec {
    pub state: TerminateState,
    /// Shown as the instance's message, in `shoal status`, the UI and alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The state a `terminate` task ends its run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TerminateState {
    Success,
    Failure,
}

impl TerminateState {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminateState::Success => "success",
            TerminateState::Failure => "failure",
        }
    }
}

/// What a `wait` or `callback` task does when its `timeout` passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout<'a> {
    Fail,
    Succeed,
    /// Run this downstream task (and skip the others).
    Run(&'a str),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackSpec {
    /// `${callback.url}` in the url, headers or body is the URL the outside system POSTs
    /// its result to; it is also sent as the `X-Shoal-Callback` header.
    pub url: String,
    #[serde(default = "default_callback_method")]
    pub method: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Default: `{"callback_url": ..., "task_instance_id": ..., "workflow_instance_id": ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Status codes that mean the request was taken; default: any 2xx.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_status: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubWorkflowSpec {
    pub workflow: String,
    /// Default: the parent's project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Start parameters of the child (expanded with the task's parameters); the child
    /// also receives every parameter the task sees.
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub params: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionsSpec {
    /// An expression that must also hold for the success branch (over the upstream
    /// tasks' outputs and the task's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    #[serde(default)]
    pub success: Vec<String>,
    #[serde(default)]
    pub failure: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    #[serde(default)]
    pub cases: Vec<SwitchCase>,
    /// The task to run when no case holds (none: nothing downstream runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchCase {
    /// e.g. `${region} == 'eu' && ${rows} > 100` (see `common::condition`).
    pub when: String,
    pub then: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutStrategy {
    /// Log a warning and let the attempt run on.
    #[default]
    Warn,
    /// Kill the attempt's process group; the attempt fails.
    Fail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    pub url: String,
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Status codes that mean success; default: any 2xx.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_status: Vec<u16>,
    /// Output parameters taken from the JSON response: name -> JSONPath (`$.data.id`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SqlSpec {
    /// Name of a datasource configured on the worker (`--datasource NAME=URL`).
    pub datasource: String,
    pub query: String,
    /// Which rows become output parameters.
    #[serde(default)]
    pub output: SqlOutput,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SqlOutput {
    /// No output parameters.
    #[default]
    None,
    /// Each column of the first row becomes a parameter named after the column.
    FirstRow,
    /// Each column becomes a parameter holding a JSON array of that column's values.
    AllRows,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

fn default_method() -> String {
    "GET".to_string()
}

fn default_callback_method() -> String {
    "POST".to_string()
}

impl TaskDef {
    /// The texts parameters are expanded in: command, script, http url, headers and body,
    /// sql query.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let http = self.http.iter().flat_map(|h| {
            std::iter::once(h.url.as_str())
                .chain(h.headers.values().map(String::as_str))
                .chain(h.body.as_deref())
        });
        [self.command.as_deref(), self.script.as_deref()]
            .into_iter()
            .flatten()
            .chain(http)
            .chain(self.sql.iter().map(|q| q.query.as_str()))
            .chain(self.callback.iter().flat_map(|c| {
                std::iter::once(c.url.as_str())
                    .chain(c.headers.values().map(String::as_str))
                    .chain(c.body.as_deref())
            }))
    }

    /// Further attempts after a failure (`on_error.retries` if given, else `retries`).
    pub fn retry_count(&self) -> u32 {
        self.on_error
            .as_ref()
            .and_then(|e| e.retries)
            .unwrap_or(self.retries)
    }

    /// Wait between attempts (`on_error.interval` if given, else `retry_interval`).
    pub fn retry_wait(&self) -> Option<Duration> {
        let handler = self.on_error.as_ref().and_then(|e| e.interval);
        handler.or(self.retry_interval)
    }

    /// The action of its error handler, with a catch's handler task.
    pub fn error_action(&self) -> Option<(ErrorAction, Option<&str>)> {
        let e = self.on_error.as_ref()?;
        Some((e.action, e.then.as_deref()))
    }

    /// What passing `timeout` does to a `wait` or `callback` task.
    pub fn on_timeout(&self) -> OnTimeout<'_> {
        match self.on_timeout.as_deref() {
            None | Some("fail") => OnTimeout::Fail,
            Some("succeed") => OnTimeout::Succeed,
            Some(task) => OnTimeout::Run(task),
        }
    }

    /// The downstream tasks a conditions or switch task chooses among.
    pub fn branch_targets(&self) -> Vec<&str> {
        let mut targets: Vec<&str> = Vec::new();
        if let Some(c) = &self.conditions {
            targets.extend(c.success.iter().chain(&c.failure).map(String::as_str));
        }
        if let Some(sw) = &self.switch {
            targets.extend(
                sw.cases
                    .iter()
                    .map(|c| c.then.as_str())
                    .chain(sw.default.as_deref()),
            );
        }
        if let OnTimeout::Run(task) = self.on_timeout() {
            targets.push(task);
        }
        targets
    }

    /// The parsed type; valid for any definition that passed validation.
    pub fn kind(&self) -> TaskType {
        self.task_type.parse().unwrap_or(TaskType::Noop)
    }
}

fn default_project() -> String {
    DEFAULT_PROJECT.to_string()
}

fn default_worker_group() -> String {
    DEFAULT_WORKER_GROUP.to_string()
}

/// Accepts YAML scalars of any kind (`dt: 2026-01-01`, `n: 3`, `on: true`) as strings.
fn scalar_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        S(String),
        I(i64),
        F(f64),
        B(bool),
    }
    let raw = Option::<BTreeMap<String, Scalar>>::deserialize(d)?.unwrap_or_default();
    Ok(raw
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Scalar::S(s) => s,
                Scalar::I(i) => i.to_string(),
                Scalar::F(f) => f.to_string(),
                Scalar::B(b) => b.to_string(),
            };
            (k, v)
        })
        .collect())
}

/// Why a definition was refused. The message names the offending part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DefinitionError {
    /// `line` and `column` (1-based) locate the error in the text when the parser knows.
    #[error("definition is not valid YAML or JSON: {message}")]
    Syntax {
        message: String,
        line: Option<usize>,
        column: Option<usize>,
    },
    #[error(
        "invalid {what} '{value}': use letters, digits, '_', '-' or '.', starting with a letter, \
         digit or '_' (1-128 characters)"
    )]
    BadName { what: &'static str, value: String },
    #[error("workflow '{0}' has no tasks")]
    Empty(String),
    #[error("task name '{0}' is used more than once")]
    DuplicateTask(String),
    #[error("task '{task}' has unknown type '{task_type}' (known: {known})")]
    UnknownType {
        task: String,
        task_type: String,
        known: String,
    },
    #[error("task '{task}' of type {task_type} needs '{field}'")]
    MissingField {
        task: String,
        task_type: &'static str,
        field: &'static str,
    },
    #[error("task '{task}' depends on '{dependency}', which is not a task of this workflow")]
    UnknownDependency { task: String, dependency: String },
    #[error("task '{task}': {reason}")]
    BadBranch { task: String, reason: String },
    #[error("tasks form a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    #[error("trigger '{trigger}': {reason}")]
    BadTrigger { trigger: String, reason: String },
    #[error("project '{given}' in the definition does not match '{expected}' in the URL")]
    ProjectMismatch { given: String, expected: String },
    #[error(
        "definition is larger than {limit} bytes once its YAML aliases (*name) are expanded: \
         repeat less through aliases, or raise the api-server's --max-body-bytes"
    )]
    TooLarge { limit: usize },
}

impl DefinitionError {
    /// Where in the text the error is (line, column; 1-based), for a syntax error whose
    /// parser knows.
    pub fn location(&self) -> Option<(usize, usize)> {
        match self {
            DefinitionError::Syntax {
                line: Some(line),
                column: Some(column),
                ..
            } => Some((*line, *column)),
            _ => None,
        }
    }

    /// The task the error is about, when it is about one task (for a cycle: the first
    /// task on it).
    pub fn task(&self) -> Option<&str> {
        match self {
            DefinitionError::Cycle(cycle) => cycle.first().map(String::as_str),
            DefinitionError::DuplicateTask(task)
            | DefinitionError::UnknownType { task, .. }
            | DefinitionError::MissingField { task, .. }
            | DefinitionError::UnknownDependency { task, .. }
            | DefinitionError::BadBranch { task, .. } => Some(task),
            DefinitionError::BadName {
                what: "task name",
                value,
            } => Some(value),
            _ => None,
        }
    }
}

/// Projects other than a workflow's own that it names ([`WorkflowDef::other_projects`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OtherProjects<'a> {
    /// It starts runs there.
    pub starts: Vec<&'a str>,
    /// It reads runs there.
    pub reads: Vec<&'a str>,
}

/// A name of a project, workflow, task, group or channel. It may not start with '.' or
/// '-', so no name is `..` or looks like a flag.
pub fn valid_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// An OS user name a tenant may have (what `useradd` takes by default).
fn valid_tenant(s: &str) -> bool {
    s.len() <= 32 && valid_name(s) && !s.contains('.')
}

impl WorkflowDef {
    /// Parses YAML (a superset of JSON) and validates the result, refusing a text that
    /// expands past [`MAX_EXPANDED_BYTES`] through its aliases.
    pub fn parse(text: &str) -> Result<WorkflowDef, DefinitionError> {
        WorkflowDef::parse_within(text, MAX_EXPANDED_BYTES)
    }

    /// [`WorkflowDef::parse`] of a text that may expand to at most `max_bytes` through
    /// its YAML aliases (counted before anything is built: [`expansion`]).
    pub fn parse_within(text: &str, max_bytes: usize) -> Result<WorkflowDef, DefinitionError> {
        expansion::check(text, max_bytes)?;
        let def: WorkflowDef =
            serde_norway::from_str(text).map_err(|e| DefinitionError::Syntax {
                line: e.location().map(|l| l.line()),
                column: e.location().map(|l| l.column()),
                message: e.to_string(),
            })?;
        def.validate()?;
        Ok(def)
    }

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
            if index.insert(t.name.as_str(), i).is_some() {
                return Err(DefinitionError::DuplicateTask(t.name.clone()));
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
                TaskType::Noop | TaskType::Delay | TaskType::Wait => None,
            };
            if let Some(field) = missing {
                return Err(DefinitionError::MissingField {
                    task: t.name.clone(),
                    task_type: kind.as_str(),
                    field,
                });
            }
            fanout::check(self, t)?;
            dependent::check(t)?;
            do_while::check(self, t)?;
            if t.on_timeout.is_some() && !matches!(kind, TaskType::Wait | TaskType::Callback) {
                return Err(DefinitionError::BadBranch {
                    task: t.name.clone(),
                    reason: "on_timeout applies to wait and callback tasks only".into(),
                });
            }
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

    /// `${name}` references that no source can satisfy for a run started with `start`
    /// params: only tasks without upstream tasks can be judged before the run (any
    /// upstream task may publish outputs). Returns (task, parameter) pairs.
    pub fn unresolvable_references(
        &self,
        start: &BTreeMap<String, String>,
    ) -> Vec<(String, String)> {
        let mut missing = Vec::new();
        for t in self
            .tasks
            .iter()
            .filter(|t| t.depends_on.is_empty() && t.enabled)
        {
            for text in t.texts() {
                for name in crate::params::references(text) {
                    // A secret is looked up by the master when the task runs.
                    let known = name.starts_with("system.")
                        || name.starts_with("secret.")
                        || name == CALLBACK_URL
                        || name.starts_with("error.")
                        || name.starts_with("failed.")
                        || start.contains_key(&name)
                        || t.params.contains_key(&name)
                        || self.params.contains_key(&name);
                    if !known
                        && !missing
                            .iter()
                            .any(|(task, n)| task == &t.name && n == &name)
                    {
                        missing.push((t.name.clone(), name));
                    }
                }
            }
        }
        missing
    }

    /// The other projects the workflow reaches into, each once: where it starts runs
    /// (sub-workflows, foreach children, its `on_failure` workflow) and where it reads
    /// them (dependent items, which wait on their states and may pass on their outputs).
    pub fn other_projects(&self) -> OtherProjects<'_> {
        fn walk<'a>(tasks: impl Iterator<Item = &'a TaskDef>, into: &mut OtherProjects<'a>) {
            for t in tasks {
                into.starts
                    .extend(t.sub_workflow.as_ref().and_then(|s| s.project.as_deref()));
                if let Some(each) = &t.foreach {
                    into.starts.extend(each.project.as_deref());
                    walk(each.task.as_deref().into_iter(), into);
                }
                if let Some(body) = &t.do_while {
                    walk(body.tasks.iter(), into);
                }
                if let Some(dependent) = &t.dependent {
                    into.reads.extend(dependent.projects());
                }
            }
        }
        let mut other = OtherProjects::default();
        other
            .starts
            .extend(self.on_failure.as_ref().and_then(|h| h.project.as_deref()));
        walk(self.tasks.iter(), &mut other);
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

    /// Alert channels the workflow names, each once.
    pub fn alert_channels(&self) -> Vec<&str> {
        let mut channels: Vec<&str> = self.alerts.iter().map(|a| a.channel.as_str()).collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    const DIAMOND: &str = r#"
name: etl_daily
params: { dt: 2026-01-01, n: 3 }
tasks:
  - { name: a, type: shell, command: "echo ${dt}", priority: high }
  - { name: b, type: noop, depends_on: [a] }
  - { name: c, type: noop, depends_on: [a] }
  - { name: d, type: noop, depends_on: [b, c] }
"#;

    #[test]
    fn parses_a_valid_diamond_with_defaults() {
        let def = WorkflowDef::parse(DIAMOND).unwrap();
        assert_eq!(def.project, "default");
        assert_eq!(def.params["dt"], "2026-01-01");
        assert_eq!(def.params["n"], "3");
        assert_eq!(def.tasks[0].priority, Priority::High);
        assert_eq!(def.tasks[1].worker_group, "default");
        assert_eq!(
            def.upstream_indices(),
            vec![vec![], vec![0], vec![0], vec![1, 2]]
        );
    }

    #[test]
    fn references_no_source_can_satisfy_are_found_on_root_tasks_only() {
        let def = WorkflowDef::parse(
            "name: r\nparams: {g: 1}\ntasks:\n- {name: a, type: shell, command: 'echo ${g} ${s} ${nope} ${system.biz.date}'}\n- {name: b, type: shell, command: 'echo ${from_a}', depends_on: [a]}\n",
        )
        .unwrap();
        let start = BTreeMap::from([("s".to_string(), "x".to_string())]);
        assert_eq!(
            def.unresolvable_references(&start),
            vec![("a".to_string(), "nope".to_string())]
        );
    }

    #[test]
    fn json_is_accepted_too() {
        let json = r#"{"name":"j","tasks":[{"name":"x","type":"noop"}]}"#;
        assert_eq!(WorkflowDef::parse(json).unwrap().tasks.len(), 1);
    }

    fn err(yaml: &str) -> String {
        WorkflowDef::parse(yaml).unwrap_err().to_string()
    }

    #[test]
    fn a_cycle_is_named() {
        let e = err(
            "name: w\ntasks:\n- {name: a, type: noop, depends_on: [c]}\n- {name: b, type: noop, depends_on: [a]}\n- {name: c, type: noop, depends_on: [b]}\n- {name: z, type: noop}\n",
        );
        assert_eq!(e, "tasks form a cycle: a -> b -> c -> a");
        let e = err("name: w\ntasks:\n- {name: a, type: noop, depends_on: [a]}\n");
        assert_eq!(e, "tasks form a cycle: a -> a");
        let e = WorkflowDef::parse("name: w\ntasks:\n- {name: b, type: noop, depends_on: [b]}\n")
            .unwrap_err();
        assert_eq!(
            e.task(),
            Some("b"),
            "the editor marks the line of the cycle's first task"
        );
    }

    #[test]
    fn bad_definitions_name_the_offender() {
        assert!(err("name: w\ntasks: []\n").contains("'w' has no tasks"));
        assert!(
            err("name: w\ntasks:\n- {name: a, type: noop}\n- {name: a, type: noop}\n")
                .contains("'a' is used more than once")
        );
        let e = err("name: w\ntasks:\n- {name: a, type: spark}\n");
        assert!(
            e.contains("task 'a' has unknown type 'spark'") && e.contains("shell"),
            "{e}"
        );
        assert!(
            err("name: w\ntasks:\n- {name: a, type: noop, depends_on: [ghost]}\n")
                .contains("task 'a' depends on 'ghost'")
        );
        assert!(
            err("name: w\ntasks:\n- {name: a, type: shell}\n")
                .contains("task 'a' of type shell needs 'command'")
        );
        assert!(err("name: 'bad name'\ntasks:\n- {name: a, type: noop}\n").contains("bad name"));
        for bad in ["..", ".", ".hidden", "-rf"] {
            let e = err(&format!(
                "name: w\nproject: '{bad}'\ntasks:\n- {{name: a, type: noop}}\n"
            ));
            assert!(e.contains(&format!("invalid project name '{bad}'")), "{e}");
        }
        assert!(WorkflowDef::parse("name: _w.v2-x\ntasks:\n- {name: a, type: noop}\n").is_ok());
        let tenant = |t: &str| {
            WorkflowDef::parse(&format!(
                "name: w\ntenant: '{t}'\ntasks:\n- {{name: a, type: noop}}\n"
            ))
        };
        assert_eq!(
            tenant("etl_user").unwrap().tenant.as_deref(),
            Some("etl_user")
        );
        for bad in ["root;rm", "a.b", "x".repeat(33).as_str(), ""] {
            let e = tenant(bad).unwrap_err().to_string();
            assert!(e.contains("invalid tenant"), "{bad}: {e}");
        }
        assert!(err("name: w\ntasks:\n- {name: a, type: noop, colour: red}\n").contains("colour"));
        assert!(err("{{{").starts_with("definition is not valid"));
    }

    #[test]
    fn wait_and_callback_tasks_are_checked() {
        let def = WorkflowDef::parse(
            "name: w\ntasks:\n- {name: gate, type: wait, timeout: 1h, on_timeout: late}\n- {name: late, type: noop, depends_on: [gate]}\n- {name: ask, type: callback, callback: {url: 'http://x/${callback.url}'}}\n",
        )
        .unwrap();
        assert_eq!(def.tasks[0].on_timeout(), OnTimeout::Run("late"));
        assert_eq!(def.tasks[2].on_timeout(), OnTimeout::Fail);
        assert_eq!(def.tasks[2].callback.as_ref().unwrap().method, "POST");
        assert!(def.unresolvable_references(&BTreeMap::new()).is_empty());
        let e = err("name: w\ntasks:\n- {name: gate, type: wait, on_timeout: ghost}\n");
        assert!(
            e.contains("'ghost' must be a task that depends on 'gate'"),
            "{e}"
        );
        let e = err("name: w\ntasks:\n- {name: s, type: shell, command: x, on_timeout: succeed}\n");
        assert!(
            e.contains("on_timeout applies to wait and callback tasks only"),
            "{e}"
        );
        let e = err("name: w\ntasks:\n- {name: c, type: callback}\n");
        assert!(
            e.contains("task 'c' of type callback needs 'callback'"),
            "{e}"
        );
    }

    #[test]
    fn error_handlers_and_terminate_are_checked() {
        let def = WorkflowDef::parse(
            "name: w\ntasks:\n- {name: load, type: shell, command: x, on_error: {action: catch, then: cleanup, retries: 2, interval: 5s}}\n- {name: cleanup, type: shell, command: 'echo ${error.message}'}\n- {name: end, type: terminate, terminate: {state: failure, message: no data}}\n",
        )
        .unwrap();
        assert_eq!(def.tasks[0].retry_count(), 2);
        assert_eq!(def.tasks[0].retry_wait(), Some(Duration::from_secs(5)));
        assert_eq!(
            def.tasks[0].error_action(),
            Some((ErrorAction::Catch, Some("cleanup")))
        );
        assert!(def.unresolvable_references(&BTreeMap::new()).is_empty());
        let task = |t: &str| {
            format!(
                "name: w\ntasks:\n{t}- {{name: h, type: noop}}\n- {{name: g, type: noop, depends_on: [h]}}\n"
            )
        };
        for (tasks, expected) in [
            (
                "- {name: a, type: noop, on_error: {action: catch}}\n",
                "needs `then`",
            ),
            (
                "- {name: a, type: noop, on_error: {action: catch, then: ghost}}\n",
                "'ghost' is not a task",
            ),
            (
                "- {name: a, type: noop, on_error: {action: ignore, then: h}}\n",
                "applies to action catch only",
            ),
            (
                "- {name: a, type: noop, on_error: {action: catch, then: g}}\n",
                "may not depend on other tasks",
            ),
            (
                "- {name: a, type: noop, on_error: {action: catch, then: h}}\n- {name: b, type: noop, on_error: {action: catch, then: h}}\n",
                "already handles 'a'",
            ),
            (
                "- {name: a, type: noop, retries: 1, on_error: {action: retry, retries: 2}}\n",
                "not both",
            ),
            (
                "- {name: a, type: noop, on_error: {action: catch, then: b}}\n- {name: b, type: noop, on_error: {action: catch, then: a}}\n",
                "catch each other: ",
            ),
            (
                "- {name: a, type: noop, on_error: {action: swallow}}\n",
                "swallow",
            ),
            ("- {name: a, type: terminate}\n", "needs 'terminate'"),
            (
                "- {name: a, type: terminate, terminate: {state: stopped}}\n",
                "stopped",
            ),
        ] {
            let e = err(&task(tasks));
            assert!(e.contains(expected), "{tasks}: {e}");
        }
    }

    #[test]
    fn the_other_projects_a_workflow_starts_or_reads_runs_of_are_found_at_any_depth() {
        let def = WorkflowDef::parse(
            "name: w\nproject: own\non_failure: { workflow: pager, project: ops }\ntasks:\n\
             - { name: a, type: sub_workflow, sub_workflow: { workflow: x, project: lab } }\n\
             - { name: b, type: sub_workflow, sub_workflow: { workflow: y } }\n\
             - { name: c, type: foreach, foreach: { items: '[1]', workflow: z, project: farm } }\n\
             - { name: d, type: foreach, foreach: { items: '[1]', task: { type: sub_workflow, sub_workflow: { workflow: z, project: deep } } } }\n\
             - { name: e, type: do_while, do_while: { condition: 'iteration < 2', tasks: [ { name: s, type: sub_workflow, sub_workflow: { workflow: z, project: loop } } ] } }\n\
             - { name: f, type: dependent, dependent: { workflow: raw, project: lake } }\n\
             - { name: g, type: dependent, dependent: { groups: [ { items: [ { workflow: raw, project: lake }, { workflow: v, project: own }, { workflow: u } ] } ] } }\n",
        )
        .unwrap();
        let other = def.other_projects();
        assert_eq!(other.starts, ["deep", "farm", "lab", "loop", "ops"]);
        assert_eq!(other.reads, ["lake"], "its own project is not another");
        let alone = WorkflowDef::parse("name: p\ntasks:\n- {name: a, type: noop}\n").unwrap();
        assert_eq!(alone.other_projects(), OtherProjects::default());
    }

    #[test]
    fn execution_type_task_groups_and_alerts_are_read_and_checked() {
        let def = WorkflowDef::parse(
            "name: s\nexecution_type: serial_wait\nalerts: [{on: failure, channel: ops}, {on: any, channel: ops}]\ntasks:\n- {name: a, type: noop, task_group: etl, task_group_priority: 3}\n- {name: b, type: noop, task_group: etl}\n",
        )
        .unwrap();
        assert_eq!(def.execution_type, ExecutionType::SerialWait);
        assert_eq!(def.alerts[0].on, AlertOn::Failure);
        assert_eq!(def.tasks[0].task_group_priority, 3);
        assert_eq!(def.task_groups(), vec!["etl"]);
        assert_eq!(def.alert_channels(), vec!["ops"]);
        // Defaults leave the stored form of older definitions unchanged.
        let plain = WorkflowDef::parse("name: p\ntasks:\n- {name: a, type: noop}\n").unwrap();
        let json = serde_json::to_string(&plain).unwrap();
        assert!(
            !json.contains("execution_type") && !json.contains("task_group"),
            "{json}"
        );

        let e = err("name: s\nexecution_type: serial\ntasks:\n- {name: a, type: noop}\n");
        assert!(e.contains("serial") && e.contains("serial_wait"), "{e}");
        let e = err(
            "name: s\nalerts: [{on: sometimes, channel: ops}]\ntasks:\n- {name: a, type: noop}\n",
        );
        assert!(e.contains("sometimes") && e.contains("failure"), "{e}");
        let e = err("name: s\ntasks:\n- {name: a, type: noop, task_group: 'a b'}\n");
        assert!(e.contains("invalid task group 'a b'"), "{e}");
        let e = err("name: s\nalerts: [{on: any, channel: ''}]\ntasks:\n- {name: a, type: noop}\n");
        assert!(e.contains("invalid alert channel"), "{e}");
    }
}
