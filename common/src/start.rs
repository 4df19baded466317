//! What a run starts with: its parameters, and the options that shape which tasks run and
//! how. Shared by the store, the runtime, the api-server and the CLI.

use crate::types::FailureStrategy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// workflow) takes from it: its schedule time's zone, and a dry run, so that no run
    /// below a dry run executes anything (as in DolphinScheduler).
    pub fn inherited(&self) -> StartOptions {
        StartOptions {
            dry_run: self.dry_run,
            timezone: self.timezone.clone(),
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
