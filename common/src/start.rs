//! What a run starts with: its parameters, and the options that shape which tasks run and
//! how. Shared by the store, the runtime, the api-server and the CLI.

use crate::types::FailureStrategy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Named string parameters: a run's start parameters, a task's outputs.
pub type Params = BTreeMap<String, String>;

/// Refuses a name a start parameter cannot have: 1-128 letters, digits, '_', '.' or '-'.
pub fn check_param_name(name: &str) -> Result<(), String> {
    let valid = (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid {
        return Ok(());
    }
    Err(format!(
        "invalid parameter name '{name}': use letters, digits, '_', '.' or '-' (1-128 characters)"
    ))
}

/// How a run starts, beyond its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StartOptions {
    /// Tasks succeed without executing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Start from this task instead of the DAG's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub from_task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub scope: Option<Scope>,
    /// IANA zone of the run's schedule time: `${system.biz.date}`, time expressions and
    /// a dependent task's day are local to it (UTC when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub timezone: Option<String>,
    /// Worker group of the tasks that do not name their own (a schedule's start option).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub worker_group: Option<String>,
    /// Overrides the definition's failure strategy (a schedule's start option).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub failure_strategy: Option<FailureStrategy>,
    /// The project environment its shell and python tasks run in, over the ones their
    /// task or workflow names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub environment: Option<String>,
    /// Alert channels that get the run's alerts instead of the workflow's (each for the
    /// events the workflow's alerts subscribe to; every end when they subscribe to none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alert_channels: Vec<String>,
    /// The run's timeout, over the definition's (its `timeout_strategy` still applies).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, nullable = false, example = "30m")]
    pub timeout: Option<Duration>,
    /// The failed instance whose workflow's `on_failure` started this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub handles_failure_of: Option<i64>,
    /// Set while an ended instance reruns one of its tasks (`POST
    /// /task-instances/{id}/rerun`); every other task keeps its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub rerun_task: Option<RerunTask>,
    /// The id of the user who started the run (or its latest resume, rerun or resubmit;
    /// a child run: its parent's): each run it starts in another project needs their
    /// operator role there at that moment. Unset: a global admin who is not a user
    /// (auth off, `SHOAL_TOKEN`), or shoal itself (cron, backfill, webhook trigger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub started_by: Option<i64>,
}

impl StartOptions {
    /// What a run that this run starts (a sub_workflow or foreach child, its exception
    /// workflow) takes from it, as a DolphinScheduler sub-process takes its parent's
    /// failure strategy, alert group, worker group, environment and dry run: its schedule
    /// time's zone; a dry run, so that no run below a dry run executes anything; the
    /// failure strategy, worker group and alert channels it was started with; and its
    /// environment when the child is in the same project (`same_project`; environments
    /// are a project's). Not its timeout: a child keeps its own definition's.
    pub fn inherited(&self, same_project: bool) -> StartOptions {
        StartOptions {
            dry_run: self.dry_run,
            timezone: self.timezone.clone(),
            failure_strategy: self.failure_strategy,
            worker_group: self.worker_group.clone(),
            alert_channels: self.alert_channels.clone(),
            environment: self.environment.clone().filter(|_| same_project),
            ..Default::default()
        }
    }
}

/// One task of an ended instance run again, and with `downstream` what depends on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RerunTask {
    pub task: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub downstream: bool,
}

impl RerunTask {
    /// Which tasks run again.
    pub fn scope(&self) -> Scope {
        if self.downstream {
            Scope::Downstream
        } else {
            Scope::Only
        }
    }
}

/// Which tasks a start from a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The task alone.
    Only,
    /// The task and everything it depends on.
    Upstream,
    /// The task and everything that depends on it (the default).
    Downstream,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_inherits_what_shapes_how_it_runs_not_where_it_starts() {
        let parent = StartOptions {
            dry_run: true,
            from_task: Some("b".into()),
            scope: Some(Scope::Only),
            timezone: Some("Asia/Shanghai".into()),
            worker_group: Some("gpu".into()),
            failure_strategy: Some(FailureStrategy::Continue),
            environment: Some("java17".into()),
            alert_channels: vec!["ops".into()],
            timeout: Some(Duration::from_secs(60)),
            handles_failure_of: Some(3),
            rerun_task: None,
            started_by: Some(7),
        };
        let child = parent.inherited(true);
        assert_eq!(
            child,
            StartOptions {
                dry_run: true,
                timezone: Some("Asia/Shanghai".into()),
                worker_group: Some("gpu".into()),
                failure_strategy: Some(FailureStrategy::Continue),
                environment: Some("java17".into()),
                alert_channels: vec!["ops".into()],
                ..Default::default()
            }
        );
        let elsewhere = parent.inherited(false);
        assert_eq!(
            elsewhere.environment, None,
            "another project's environments"
        );
        assert_eq!(elsewhere.worker_group.as_deref(), Some("gpu"));
    }

    #[test]
    fn a_timeout_round_trips_as_a_duration_string() {
        let o = StartOptions {
            timeout: Some(Duration::from_secs(90)),
            alert_channels: vec!["a".into()],
            ..Default::default()
        };
        let json = serde_json::to_value(&o).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"timeout": "90s", "alert_channels": ["a"]})
        );
        assert_eq!(serde_json::from_value::<StartOptions>(json).unwrap(), o);
        assert_eq!(
            serde_json::from_str::<StartOptions>("{}").unwrap(),
            StartOptions::default()
        );
    }
}
