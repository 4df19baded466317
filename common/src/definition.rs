//! The workflow definition format (YAML or JSON) and its validation.
//!
//! A definition that passes [`WorkflowDef::parse`] has unique task names, known task
//! types, dependencies that exist and no cycle, so the master can build its DAG without
//! checking again.

pub use crate::trigger::TriggerDef;
use crate::types::{AlertOn, ExecutionType, FailureStrategy, Priority, TaskType};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

mod container;
mod data_tasks;
mod dependent;
mod do_while;
// Crate-visible so that trigger validation takes them from here, not from this module,
// which imports the trigger module.
pub(crate) mod error;
mod expansion;
mod fanout;
pub(crate) mod name;
mod normalize;
mod publish;
mod specs;
mod type_fields;
mod validate;
mod walk;
mod yaml;
pub use container::{
    ContainerCommand, ContainerSpec, KubernetesSpec, PullPolicy, argv_langs, volume_parts,
};
pub use data_tasks::{DEFAULT_SPARK_MASTER, DEPLOY_MODES, NotebookSpec, SparkSpec, is_identifier};
pub use dependent::{
    DATE_CYCLES, DEFAULT_CHECK_INTERVAL, DEFAULT_TIMEOUT as DEFAULT_DEPENDENT_TIMEOUT, DateCycle,
    DependGroup, DependItem, DependResult, DependentSpec, Interval, OnDependFailure, Relation,
    combine, dependent_stages,
};
pub use do_while::{DoWhileSpec, ITERATION, ITERATIONS, MAX_ITERATIONS, iteration_name};
pub use error::DefinitionError;
pub use fanout::{ForeachSpec, ITEMS, MAX_ITEMS, RESULTS, child_name};
pub use name::{MAX_NAME_CHARS, name_problem, normalize, valid_identifier, valid_name};
pub use publish::PublishSpec;
pub use specs::{
    CALLBACK_URL, CallbackSpec, ConditionsSpec, ERROR_EXIT_CODE, ERROR_MESSAGE, ERROR_TASK,
    ErrorAction, ExceptionHandler, HttpSpec, OnErrorSpec, OnTimeout, SqlOutput, SqlSpec,
    SubWorkflowSpec, SwitchCase, SwitchSpec, TIMED_OUT, TerminateSpec, TerminateState,
    TimeoutStrategy,
};
pub use walk::OtherProjects;

/// What a definition may expand to through YAML aliases unless told otherwise: the
/// api-server's default body limit, so an alias can stand for no more than could be sent.
pub const MAX_EXPANDED_BYTES: usize = 8 * 1024 * 1024;

pub const DEFAULT_PROJECT: &str = "default";
pub const DEFAULT_WORKER_GROUP: &str = "default";
/// An external task's lease when it names none.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The longest business key of an event (in bytes): keys are indexed.
pub const MAX_EVENT_KEY: usize = 512;
/// The shortest and longest lease an external task may ask for.
pub const LEASE_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(3600));

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
    /// The project environment (`shoal env set`) its shell and python tasks run in
    /// unless they name their own: shell lines their worker runs first, in the same bash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub environment: Option<String>,
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
    /// `shell` and `python`: the project environment (`shoal env set`) it runs in, over
    /// the workflow's `environment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub environment: Option<String>,
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
    /// Who is told when this task fails for good or passes its timeout (`task_failure`,
    /// `task_timeout`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertSpec>,
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
    /// `external`: the queue external workers take it from (`POST /external/poll`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// `external`: how long a taken task stays with its worker without a heartbeat
    /// before the attempt fails as lost (default 30s).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub lease: Option<Duration>,
    /// `wait`: the event that completes it (`POST /projects/{project}/events/{event}`,
    /// `shoal event send`), carrying `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// `wait` with `event`: the business key the event must carry, expanded from the
    /// task's parameters (e.g. `"${order_id}"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
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
    /// `wait`, `callback` and `external`: what happens when `timeout` passes first: `fail` (the
    /// default), `succeed`, or the name of a downstream task that then runs instead of
    /// the others (it is skipped when the task completes in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
    /// `spark`: a spark-submit command line from typed fields (see [`SparkSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spark: Option<SparkSpec>,
    /// `notebook`: a Jupyter notebook run with papermill (see [`NotebookSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notebook: Option<NotebookSpec>,
    /// `container`: an image run by podman or docker on the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerSpec>,
    /// `kubernetes`: a Job created through the Kubernetes API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesSpec>,
    /// `publish`: a message sent to a broker, confirmed by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<PublishSpec>,
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

/// A task with every field as a definition that leaves it out has it: no name or type
/// yet, the default worker group, enabled.
impl Default for TaskDef {
    fn default() -> Self {
        TaskDef {
            name: String::new(),
            task_type: String::new(),
            command: None,
            depends_on: Vec::new(),
            priority: Priority::default(),
            worker_group: default_worker_group(),
            task_group: None,
            task_group_priority: 0,
            environment: None,
            params: BTreeMap::new(),
            enabled: yes(),
            retries: 0,
            retry_interval: None,
            delay: None,
            timeout: None,
            timeout_strategy: TimeoutStrategy::default(),
            alerts: Vec::new(),
            script: None,
            http: None,
            sql: None,
            conditions: None,
            switch: None,
            sub_workflow: None,
            dependent: None,
            callback: None,
            queue: None,
            lease: None,
            event: None,
            key: None,
            on_error: None,
            terminate: None,
            foreach: None,
            do_while: None,
            on_timeout: None,
            spark: None,
            notebook: None,
            container: None,
            kubernetes: None,
            publish: None,
        }
    }
}

impl TaskDef {
    /// The texts parameters are expanded in: command, script, http url, headers and body,
    /// sql query, an external task's params (what its worker is given), a wait task's
    /// event key, the fields of a spark, notebook, container, kubernetes or publish section.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let external = (self.kind() == TaskType::External).then_some(&self.params);
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
            .chain(
                external
                    .into_iter()
                    .flat_map(|p| p.values().map(String::as_str)),
            )
            .chain(self.key.as_deref())
            .chain(self.spark.iter().flat_map(SparkSpec::texts))
            .chain(self.notebook.iter().flat_map(NotebookSpec::texts))
            .chain(self.container.iter().flat_map(|c| c.texts()))
            .chain(self.kubernetes.iter().flat_map(|k| k.texts()))
            .chain(self.publish.iter().flat_map(PublishSpec::texts))
    }

    /// How long an external task's worker keeps it without a heartbeat.
    pub fn lease(&self) -> Duration {
        self.lease.unwrap_or(DEFAULT_LEASE)
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

    /// What passing `timeout` does to a `wait`, `callback` or `external` task.
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
        let mut def: WorkflowDef =
            serde_norway::from_str(text).map_err(|e| DefinitionError::Syntax {
                line: e.location().map(|l| l.line()),
                column: e.location().map(|l| l.column()),
                message: e.to_string(),
            })?;
        def.normalize_names();
        def.validate()?;
        Ok(def)
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
}

#[cfg(test)]
mod tests;
