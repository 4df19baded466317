//! Rows and batches exchanged with the store. Timestamps are milliseconds since the epoch.

use serde::{Deserialize, Serialize};
use shoal_common::definition::WorkflowDef;
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{CommandKind, Priority, TaskState, WorkflowState};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDefinition {
    pub project: String,
    pub name: String,
    pub version: i32,
    pub definition: WorkflowDef,
    pub created_at: i64,
}

/// One line per workflow in a project listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefinitionSummary {
    pub project: String,
    pub name: String,
    pub latest_version: i32,
    pub updated_at: i64,
    /// False once taken offline (no start, no scheduled fire).
    pub online: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewCommand {
    pub kind: CommandKind,
    pub project: String,
    pub workflow: String,
    /// The definition version the run pins.
    pub version: i32,
    /// Startup parameters; they win over every other parameter source.
    pub params: Params,
    /// Overrides the definition's priority when set.
    pub priority: Option<Priority>,
    /// The instance a resume, rerun or resubmit-failed command acts on.
    pub workflow_instance_id: Option<i64>,
    pub options: StartOptions,
    /// The sub_workflow task instance this run is the child of.
    pub parent_task_id: Option<i64>,
    /// The instant a cron or backfill run stands for (ms).
    pub schedule_time: Option<i64>,
    /// A run at a later time (ms): no master claims the command before it.
    pub due_at: Option<i64>,
}

impl NewCommand {
    /// A resume, rerun or resubmit-failed command for `instance`: it pins the instance's
    /// version, parameters, priority and start options.
    pub fn recovery(kind: CommandKind, instance: &InstanceRow) -> NewCommand {
        NewCommand {
            kind,
            project: instance.project.clone(),
            workflow: instance.workflow.clone(),
            version: instance.version,
            params: instance.params.clone(),
            priority: Some(instance.priority),
            workflow_instance_id: Some(instance.id),
            options: instance.options.clone(),
            parent_task_id: None,
            schedule_time: None,
            due_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CommandStatus {
    /// Written, not yet claimed by a master.
    Pending,
    /// Claimed and turned into a workflow instance.
    Done { workflow_instance_id: i64 },
    /// Could not be turned into an instance; kept in the error-command table.
    Error { error: String },
}

/// A command no master has claimed yet (a run at a later time waits here until it is due).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCommand {
    pub id: i64,
    pub kind: CommandKind,
    pub project: String,
    pub workflow: String,
    pub version: i32,
    pub params: Params,
    pub priority: Option<Priority>,
    pub options: StartOptions,
    pub workflow_instance_id: Option<i64>,
    pub created_at: i64,
    /// When it becomes due (ms); None: at once.
    pub due_at: Option<i64>,
}

/// Why a command could not be cancelled.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelRefused {
    /// A master already turned it into this instance.
    Started { workflow_instance_id: i64 },
    /// It already could not become an instance (or was cancelled before).
    Ended { error: String },
    /// No such command.
    Missing,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRow {
    pub id: i64,
    pub command_id: i64,
    pub project: String,
    pub workflow: String,
    pub version: i32,
    pub state: WorkflowState,
    pub priority: Priority,
    pub params: Params,
    /// Address of the master that drives the instance.
    pub owner: Option<String>,
    pub owner_epoch: i64,
    pub run: i32,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub options: StartOptions,
    /// The sub_workflow task instance this run is the child of.
    pub parent_task_id: Option<i64>,
    /// The instant a cron or backfill run stands for (ms).
    pub schedule_time: Option<i64>,
    /// Why the run waits or was discarded (execution types).
    pub message: Option<String>,
}

/// An instance a master just claimed, with the definition version it pins.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedInstance {
    /// What the command asked for: a new run, or a recovery of `instance`.
    pub kind: CommandKind,
    pub instance: InstanceRow,
    pub definition: WorkflowDef,
    /// For resume and resubmit-failed: the attempts of the instance's current run, to
    /// rebuild its state from. Empty otherwise.
    pub tasks: Vec<TaskInstanceRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInstanceRow {
    pub id: i64,
    pub workflow_instance_id: i64,
    pub run: i32,
    pub name: String,
    pub task_type: String,
    pub state: TaskState,
    pub attempt: i32,
    pub priority: Priority,
    pub worker_group: String,
    /// gRPC address of the worker the attempt went to.
    pub worker: Option<String>,
    pub submitted_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub exit_code: Option<i32>,
    pub output: Params,
    pub message: Option<String>,
    pub task_group: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewTaskInstance {
    pub workflow_instance_id: i64,
    pub run: i32,
    pub name: String,
    pub task_type: String,
    pub attempt: i32,
    pub priority: Priority,
    pub worker_group: String,
    pub state: TaskState,
    pub submitted_at: i64,
    /// The task group whose slot the attempt needs, and its place among the waiters.
    pub task_group: Option<String>,
    pub task_group_priority: i32,
    pub message: Option<String>,
}

/// A change to one task instance; `None` fields are left as they are.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskUpdate {
    pub id: i64,
    pub state: TaskState,
    pub worker: Option<String>,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub exit_code: Option<i32>,
    pub output: Option<Params>,
    pub message: Option<String>,
}

impl TaskUpdate {
    pub fn state(id: i64, state: TaskState) -> Self {
        TaskUpdate {
            id,
            state,
            worker: None,
            started_at: None,
            ended_at: None,
            exit_code: None,
            output: None,
            message: None,
        }
    }
}

/// A change to one instance, applied only while the writer still holds `owner_epoch`.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceUpdate {
    pub id: i64,
    pub owner_epoch: i64,
    pub state: WorkflowState,
    pub ended_at: Option<i64>,
}

/// Everything one engine cycle of a master writes, committed in one transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteBatch {
    pub new_tasks: Vec<NewTaskInstance>,
    pub task_updates: Vec<TaskUpdate>,
    pub instance_updates: Vec<InstanceUpdate>,
    /// The owner epoch the writer holds for each instance the batch touches; all writes
    /// for an instance whose epoch moved on are dropped (fencing).
    pub epochs: Vec<(i64, i64)>,
    /// Child runs to start for sub_workflow tasks (at most one per parent task, ever).
    pub children: Vec<ChildStart>,
    /// Runs of serial workflows that ended: the next waiting run of each starts.
    pub serial_ended: Vec<SerialEnd>,
    /// Alerts to deliver (the outbox), written with the state change they report.
    pub alerts: Vec<NewAlert>,
    /// Why an instance ended as it did (e.g. a terminate task's message).
    pub instance_messages: Vec<(i64, String)>,
    /// Runs of exception workflows (`on_failure`), by the failed instance they handle.
    pub exception_runs: Vec<(i64, NewCommand)>,
    /// The ends of finished attempts' logs, by the instance they belong to.
    pub task_logs: Vec<(i64, super::KeptLog)>,
    /// External tasks offered to external workers, with their `waiting` rows.
    pub external_offers: Vec<super::ExternalOffer>,
    /// Wait tasks waiting for an event, with their `waiting` rows.
    pub event_waits: Vec<super::EventWait>,
    /// External tasks and event waits that ended on the master (a stop, a pause), by their
    /// instance: their offers and event waits are withdrawn.
    pub withdrawn: Vec<(i64, i64)>,
}

/// A run of a serial workflow ended; `owner` drives the next waiting run, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct SerialEnd {
    pub instance: i64,
    pub project: String,
    pub workflow: String,
    pub owner: String,
}

/// A child run of a sub_workflow task; the latest version of `workflow` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildStart {
    pub parent_instance_id: i64,
    pub parent_task_id: i64,
    pub project: String,
    pub workflow: String,
    pub params: Params,
    pub priority: Priority,
    /// The parent's schedule time: a child of a cron or backfill run stands for the same
    /// time.
    pub schedule_time: Option<i64>,
    /// What it takes from its parent's options ([`StartOptions::inherited`]).
    pub options: StartOptions,
}

/// Where a sub_workflow task's child run is.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildState {
    /// Not started (its command is waiting for a master), or running.
    Waiting,
    /// Ended in `state`, with the outputs of its succeeded tasks (later ones win).
    Ended {
        instance: i64,
        state: WorkflowState,
        outputs: Params,
    },
    /// It could not start (e.g. the workflow does not exist).
    Failed(String),
}

/// What [`Store::withdraw_child`](super::Store::withdraw_child) found of a child run.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildRun {
    /// Its command was still waiting for a master and is gone now: it never runs.
    Withdrawn,
    /// It is an instance already.
    Instance {
        id: i64,
        owner: Option<String>,
        state: WorkflowState,
    },
    /// There is none (it could not start).
    None,
}

impl WriteBatch {
    pub fn is_empty(&self) -> bool {
        self.new_tasks.is_empty()
            && self.task_updates.is_empty()
            && self.instance_updates.is_empty()
            && self.epochs.is_empty()
            && self.children.is_empty()
            && self.serial_ended.is_empty()
            && self.alerts.is_empty()
            && self.instance_messages.is_empty()
            && self.exception_runs.is_empty()
            && self.task_logs.is_empty()
            && self.external_offers.is_empty()
            && self.event_waits.is_empty()
            && self.withdrawn.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteResult {
    /// Ids of `new_tasks` that were written (those of fenced instances are not), in order.
    pub new_task_ids: Vec<i64>,
    /// Instances whose update was refused because the epoch moved on: the writer lost them.
    pub fenced_instances: Vec<i64>,
    /// Waiting runs of serial workflows that start now, driven by the writer.
    pub woken: Vec<ClaimedInstance>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct InstanceFilter {
    pub project: Option<String>,
    /// Only instances of these projects (the ones the caller may see); None: any.
    #[serde(skip)]
    pub projects: Option<Vec<String>>,
    pub workflow: Option<String>,
    pub state: Option<WorkflowState>,
    /// Created at or after this instant (ms).
    #[serde(default)]
    pub from: Option<i64>,
    /// Created before this instant (ms).
    #[serde(default)]
    pub to: Option<i64>,
    pub limit: Option<i64>,
    /// Rows of the (newest first) listing to skip.
    #[serde(default)]
    pub offset: Option<i64>,
}

/// One stored version of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionVersion {
    pub version: i32,
    pub created_at: i64,
}

/// A named pool of slots shared by the tasks that name it, across workflows and masters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskGroup {
    pub name: String,
    pub slots: i32,
    #[serde(default)]
    pub description: String,
}

/// A task group with what uses it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskGroupUsage {
    #[serde(flatten)]
    pub group: TaskGroup,
    /// Attempts holding a slot.
    pub in_use: i64,
    /// Attempts waiting for one.
    pub waiting: i64,
    pub created_at: i64,
}

/// What one round of slot acquisition found for the asking master's waiting attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlotGrants {
    /// Attempts that hold a slot now.
    pub granted: Vec<i64>,
    /// Attempts whose group does not exist (any more).
    pub no_group: Vec<(i64, String)>,
}

/// Where an alert channel delivers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChannelTarget {
    /// A JSON POST to `url`.
    Webhook {
        url: String,
        #[serde(default)]
        format: WebhookFormat,
    },
    /// A line in the master's log.
    Log,
    /// An e-mail through an SMTP server.
    Email(EmailTarget),
}

/// An e-mail channel's server, sender and recipients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmailTarget {
    /// `smtps://host[:465]` (TLS), `smtp://host[:587]?tls=required` (STARTTLS) or
    /// `smtp://host[:25]` (plain), as lettre reads them.
    pub smtp: String,
    pub from: String,
    pub to: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The password sealed with the servers' secret key: never stored or shown in clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A PEM CA certificate trusted for this server beside the system's (a private relay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
}

impl EmailTarget {
    /// What the password of channel `name` is sealed for: it opens for that channel only.
    pub fn password_context(name: &str) -> String {
        format!("alert-channel/{name}")
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// The alert's fields as a JSON object.
    #[default]
    Json,
    /// `{"text": "..."}`, which Slack's incoming webhooks (and many others) accept.
    Slack,
    /// A DingTalk group robot's text message.
    Dingtalk,
    /// A WeCom (WeChat Work) group robot's text message.
    Wecom,
    /// A Feishu (Lark) custom bot's text message.
    Feishu,
    /// A Telegram bot's `sendMessage`; the url carries `?chat_id=`.
    Telegram,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertChannel {
    pub name: String,
    #[serde(flatten)]
    pub target: ChannelTarget,
}

/// An alert to deliver, written in the engine's write batch.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAlert {
    pub workflow_instance_id: i64,
    pub channel: String,
    /// `success`, `failure`, `stopped` or `timeout`.
    pub event: String,
    pub payload: serde_json::Value,
}

/// An alert in the outbox with its delivery record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertRow {
    pub id: i64,
    pub workflow_instance_id: i64,
    pub channel: String,
    pub event: String,
    pub payload: serde_json::Value,
    /// `pending` (to deliver, maybe after a failed attempt), `sent` or `failed` (gave up).
    pub state: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub next_attempt_at: i64,
    pub created_at: i64,
    pub sent_at: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AlertFilter {
    pub workflow_instance_id: Option<i64>,
    /// Only alerts of instances of these projects; None: any.
    #[serde(skip)]
    pub projects: Option<Vec<String>>,
    pub state: Option<String>,
    pub limit: Option<i64>,
}
