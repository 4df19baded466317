//! What tasks of each type are given (http, sql, callback, sub_workflow, conditions,
//! switch, terminate) and how failures are handled (a task's `on_error`, a workflow's
//! `on_failure`).

use super::scalar_map;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

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

fn default_method() -> String {
    "GET".to_string()
}

fn default_callback_method() -> String {
    "POST".to_string()
}
