//! Table and column names, as created by the migrations in `sql/`.

use sea_query::Iden;

#[derive(Iden, Clone, Copy)]
pub(super) enum WorkflowDefinition {
    Table,
    Project,
    Name,
    Version,
    Spec,
    CreatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum Command {
    Table,
    Id,
    Kind,
    Project,
    Workflow,
    Version,
    Params,
    Priority,
    CreatedAt,
    WorkflowInstanceId,
    Options,
    ParentTaskId,
    ScheduleTime,
    DueAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum ErrorCommand {
    Table,
    Id,
    Kind,
    Project,
    Workflow,
    Version,
    Params,
    Error,
    CreatedAt,
    FailedAt,
    WorkflowInstanceId,
    ParentTaskId,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum WorkflowInstance {
    Table,
    Id,
    CommandId,
    Project,
    Workflow,
    Version,
    State,
    Priority,
    Params,
    Owner,
    OwnerEpoch,
    Run,
    CreatedAt,
    StartedAt,
    EndedAt,
    Options,
    ParentTaskId,
    ScheduleTime,
    Message,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TaskInstance {
    Table,
    Id,
    WorkflowInstanceId,
    Name,
    TaskType,
    State,
    Attempt,
    Priority,
    WorkerGroup,
    Worker,
    SubmittedAt,
    StartedAt,
    EndedAt,
    ExitCode,
    Output,
    Message,
    Run,
    TaskGroup,
    TaskGroupPriority,
    /// `state` where `task_group` is set, else NULL (generated): what the group index keys on.
    GroupState,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TaskGroup {
    Table,
    Name,
    Slots,
    Description,
    CreatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum AlertChannel {
    Table,
    Name,
    Kind,
    Config,
    CreatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum Alert {
    Table,
    Id,
    WorkflowInstanceId,
    Channel,
    Event,
    Payload,
    State,
    Attempts,
    LastError,
    NextAttemptAt,
    LeaseOwner,
    LeaseUntil,
    CreatedAt,
    SentAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum AppUser {
    Table,
    Id,
    Name,
    Admin,
    Disabled,
    CreatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum ApiToken {
    Table,
    Id,
    UserId,
    Name,
    Hash,
    CreatedAt,
    ExpiresAt,
    LastUsedAt,
    RevokedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum Project {
    Table,
    Name,
    Description,
    CreatedBy,
    CreatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum ProjectMember {
    Table,
    Project,
    UserId,
    Role,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum AuditLog {
    Table,
    Id,
    At,
    Actor,
    Action,
    Target,
    Project,
    Object,
    Address,
    Result,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum Secret {
    Table,
    Project,
    Name,
    Sealed,
    Description,
    UpdatedBy,
    CreatedAt,
    UpdatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum Environment {
    Table,
    Project,
    Name,
    Config,
    Description,
    UpdatedBy,
    CreatedAt,
    UpdatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TaskLog {
    Table,
    TaskInstanceId,
    Content,
    Size,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum ExternalTask {
    Table,
    TaskInstanceId,
    WorkflowInstanceId,
    Project,
    Queue,
    Params,
    Sealed,
    LeaseMs,
    OfferedAt,
    Worker,
    TokenHash,
    LeaseExpiresAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum ExternalWorker {
    Table,
    Project,
    Queue,
    Worker,
    LastSeenAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TaskCallback {
    Table,
    TokenHash,
    TaskInstanceId,
    CreatedAt,
    SentAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TriggerCall {
    Table,
    Project,
    Workflow,
    TriggerName,
    IdempotencyKey,
    ParamsHash,
    CommandId,
    WorkflowInstanceId,
    CreatedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum WorkflowOffline {
    Table,
    Project,
    Workflow,
    Since,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum EventWait {
    Table,
    TaskInstanceId,
    WorkflowInstanceId,
    Project,
    Event,
    EventKey,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum KeptEvent {
    Table,
    Id,
    Project,
    Event,
    EventKey,
    Data,
    ReceivedAt,
    ExpiresAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TriggerMessage {
    Table,
    Project,
    Workflow,
    TriggerName,
    MessageId,
    CommandId,
    ReceivedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TriggerIgnored {
    Table,
    Id,
    Project,
    Workflow,
    TriggerName,
    Reason,
    Body,
    ReceivedAt,
}

#[derive(Iden, Clone, Copy)]
pub(super) enum TriggerConsumer {
    Table,
    Project,
    Workflow,
    TriggerName,
    Master,
    State,
    Error,
    Since,
    LastMessageAt,
    Started,
    Filtered,
    Ignored,
    Duplicate,
    Delivered,
}
