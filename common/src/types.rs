//! Domain enums shared by every role. They are stored and sent as lowercase snake case.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Declares a string-backed enum: serde, `Display`, `FromStr` and `as_str` all agree on
/// the snake-case names, which are also what the database stores.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(
                        "unknown {} '{}' (expected one of: {})",
                        stringify!($name), other, [$($text),+].join(", ")
                    )),
                }
            }
        }
    };
}

string_enum!(
    /// Lifecycle of a workflow instance.
    WorkflowState {
        Submitted => "submitted",
        Running => "running",
        ReadyPause => "ready_pause",
        Paused => "paused",
        ReadyStop => "ready_stop",
        Stopped => "stopped",
        Failure => "failure",
        Success => "success",
        SerialWait => "serial_wait",
    }
);

impl WorkflowState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Stopped | Self::Failure | Self::Success | Self::Paused
        )
    }
}

string_enum!(
    /// Lifecycle of one task attempt; `waiting`: a wait or callback task waiting for its
    /// completion (by the API, its callback or its timeout).
    TaskState {
        Submitted => "submitted",
        Dispatched => "dispatched",
        Running => "running",
        Success => "success",
        Failure => "failure",
        Killed => "killed",
        Paused => "paused",
        NeedFaultTolerance => "need_fault_tolerance",
        Delayed => "delayed",
        ForcedSuccess => "forced_success",
        Skipped => "skipped",
        WaitingTaskGroup => "waiting_task_group",
        Waiting => "waiting",
    }
);

impl TaskState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Success
                | Self::Failure
                | Self::Killed
                | Self::Paused
                | Self::NeedFaultTolerance
                | Self::ForcedSuccess
                | Self::Skipped
        )
    }

    /// Downstream tasks may start after an upstream task in this state.
    pub fn lets_downstream_run(self) -> bool {
        matches!(self, Self::Success | Self::ForcedSuccess | Self::Skipped)
    }
}

string_enum!(
    /// Scheduling priority of instances and tasks; `Highest` goes first.
    Priority {
        Highest => "highest",
        High => "high",
        Medium => "medium",
        Low => "low",
        Lowest => "lowest",
    }
);

// Written out: `string_enum!` makes the enum, so `#[default]` cannot be put on a variant.
#[allow(clippy::derivable_impls)]
impl Default for Priority {
    fn default() -> Self {
        Priority::Medium
    }
}

impl Priority {
    /// 0 for highest .. 4 for lowest: smaller ranks are dispatched first.
    pub fn rank(self) -> u8 {
        self as u8
    }
}

string_enum!(
    /// What happens to the rest of an instance when a task fails.
    FailureStrategy {
        End => "end",
        Continue => "continue",
    }
);

// Written out: `string_enum!` makes the enum, so `#[default]` cannot be put on a variant.
#[allow(clippy::derivable_impls)]
impl Default for FailureStrategy {
    fn default() -> Self {
        FailureStrategy::End
    }
}

string_enum!(
    /// Lifecycle of a backfill: running until every one of its runs ended or was skipped.
    BackfillState {
        Running => "running",
        Success => "success",
        Failure => "failure",
        Cancelled => "cancelled",
    }
);

string_enum!(
    /// One schedule time of a backfill (`skipped`: not started because an earlier run
    /// failed under `stop_on_failure`).
    BackfillRunState {
        Pending => "pending",
        Running => "running",
        Success => "success",
        Failure => "failure",
        Skipped => "skipped",
    }
);

string_enum!(
    /// How runs of one workflow may overlap (DolphinScheduler's execution types):
    /// `serial_wait` queues a new run (state `serial_wait`, FIFO) until the previous one
    /// ended; `serial_discard` discards a new run while another is active (it ends
    /// `stopped`); `serial_priority` queues it and discards the runs already waiting.
    ExecutionType {
        Parallel => "parallel",
        SerialWait => "serial_wait",
        SerialDiscard => "serial_discard",
        SerialPriority => "serial_priority",
    }
);

// Written out: `string_enum!` makes the enum, so `#[default]` cannot be put on a variant.
#[allow(clippy::derivable_impls)]
impl Default for ExecutionType {
    fn default() -> Self {
        ExecutionType::Parallel
    }
}

impl ExecutionType {
    pub fn is_parallel(&self) -> bool {
        *self == ExecutionType::Parallel
    }
}

string_enum!(
    /// What an alert fires on: a run's end or timeout (`any` is every end, stopped too,
    /// and a timeout), or a task that failed for good (its retries spent) or passed its
    /// timeout.
    AlertOn {
        Failure => "failure",
        Success => "success",
        Timeout => "timeout",
        Any => "any",
        TaskFailure => "task_failure",
        TaskTimeout => "task_timeout",
    }
);

string_enum!(
    /// Why a command was written; the vocabulary follows DolphinScheduler's command types.
    CommandKind {
        Start => "start",
        StartFromNode => "start_from_node",
        ResubmitFailed => "resubmit_failed",
        Resume => "resume",
        Rerun => "rerun",
        RerunTask => "rerun_task",
        Backfill => "backfill",
        Scheduled => "scheduled",
        RecoverFailover => "recover_failover",
    }
);

string_enum!(
    /// Task types known to the workflow definition format.
    TaskType {
        Shell => "shell",
        Python => "python",
        Http => "http",
        Sql => "sql",
        Noop => "noop",
        Conditions => "conditions",
        Switch => "switch",
        Delay => "delay",
        SubWorkflow => "sub_workflow",
        Dependent => "dependent",
        Wait => "wait",
        Callback => "callback",
        Terminate => "terminate",
        Foreach => "foreach",
        DoWhile => "do_while",
        External => "external",
        Spark => "spark",
        Notebook => "notebook",
        Container => "container",
        Kubernetes => "kubernetes",
        Publish => "publish",
    }
);

impl TaskType {
    /// Logic tasks run on the master and hold no worker slot; nor does an external task,
    /// which waits on the master until an external worker takes it.
    pub fn on_master(self) -> bool {
        matches!(
            self,
            Self::Conditions
                | Self::Switch
                | Self::Delay
                | Self::SubWorkflow
                | Self::Dependent
                | Self::Wait
                | Self::Callback
                | Self::Terminate
                | Self::Foreach
                | Self::DoWhile
                | Self::External
        )
    }
}

/// Milliseconds since the Unix epoch: the one timestamp format in the store and on the wire.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Formats stored milliseconds as RFC 3339 for the API.
pub fn ms_to_rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_names() {
        for s in TaskState::ALL {
            assert_eq!(s.as_str().parse::<TaskState>().unwrap(), *s);
            assert_eq!(
                serde_json::to_string(s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        let err = "bogus".parse::<WorkflowState>().unwrap_err();
        assert!(err.contains("bogus") && err.contains("running"), "{err}");
    }

    #[test]
    fn priorities_rank_highest_first() {
        assert!(Priority::Highest.rank() < Priority::Medium.rank());
        assert!(Priority::Medium.rank() < Priority::Lowest.rank());
    }
}
