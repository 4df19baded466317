//! What each API operation requires, by operation id. Every operation of the OpenAPI
//! document must have a rule here (a test checks); one without is refused to all but
//! global admins, so a new route cannot be left open by mistake.

use shoal_common::access::Role;
use shoal_store::Owned;

/// Who may call an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Anyone, without a token.
    Open,
    /// Any signed-in user; lists show only the projects they may see, and a handler checks
    /// what it acts on (e.g. their own tokens).
    SignedIn,
    /// A global admin.
    GlobalAdmin,
    /// At least `role` in the project the request is about.
    Project(Role, Scope),
}

/// Where a request's project comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The `{project}` path parameter.
    Path,
    /// The project of the object whose id is the `{id}` path parameter.
    Instance,
    TaskInstance,
    Command,
    Backfill,
}

impl Scope {
    /// The object `id` names, for the scopes that are found through one.
    pub fn owned(self, id: i64) -> Option<Owned> {
        match self {
            Scope::Path => None,
            Scope::Instance => Some(Owned::Instance(id)),
            Scope::TaskInstance => Some(Owned::TaskInstance(id)),
            Scope::Command => Some(Owned::Command(id)),
            Scope::Backfill => Some(Owned::Backfill(id)),
        }
    }

    /// What the `{id}` of this scope names, for the 404 of one that does not exist.
    pub fn noun(self) -> &'static str {
        match self {
            Scope::Path => "project",
            Scope::Instance => "workflow instance",
            Scope::TaskInstance => "task instance",
            Scope::Command => "command",
            Scope::Backfill => "backfill",
        }
    }
}

/// The rule of operation `op`; None for an operation this table does not know.
pub fn rule(op: &str) -> Option<Need> {
    use Need::*;
    use Role::*;
    use Scope::*;
    Some(match op {
        // Metrics are aggregate counters without names, like the masters' and workers'.
        "health" | "getOpenApi" | "getWorkflowSchema" | "getSession" | "getMetrics" => Open,
        // The trigger's own token or password, and its address allowlist (see `hooks`).
        "callTrigger" | "callTriggerGet" | "callTriggerPut" => Open,
        // Its one-time token is the credential (see `completions`).
        "completeCallback" => Open,
        "listProjects" | "createProject" | "listNodes" | "previewCron" | "listTaskGroups"
        | "listAlertChannels" | "listInstances" | "listBackfills" | "listAlerts" | "listTokens"
        | "createToken" | "revokeToken" | "listExternalQueues" => SignedIn,
        "createTaskGroup" | "deleteTaskGroup" | "createAlertChannel" | "deleteAlertChannel"
        | "listUsers" | "createUser" | "disableUser" | "enableUser" | "listAudit" => GlobalAdmin,
        "getProject"
        | "listMembers"
        | "listWorkflows"
        | "getWorkflow"
        | "listWorkflowVersions"
        | "listSchedules"
        | "getSchedule"
        | "previewSchedule"
        | "listSecrets"
        | "listEnvironments"
        | "getEnvironment"
        | "listTriggers"
        | "listIgnoredMessages"
        | "listCommands" => Project(Viewer, Path),
        "startWorkflow" | "createBackfill" | "sendEvent" => Project(Operator, Path),
        "applyWorkflow" | "validateWorkflow" | "createSchedule" | "updateSchedule"
        | "deleteSchedule" | "enableSchedule" | "disableSchedule" | "setSecret"
        | "deleteSecret" | "setEnvironment" | "deleteEnvironment" | "onlineWorkflow"
        | "offlineWorkflow" | "rollbackWorkflow" | "deleteWorkflow" => Project(Editor, Path),
        "deleteProject" | "setMember" | "removeMember" => Project(Admin, Path),
        "getInstance" => Project(Viewer, Instance),
        "actOnInstance" | "deleteInstance" => Project(Operator, Instance),
        "completeTaskInstance" | "actOnTaskInstance" => Project(Operator, TaskInstance),
        // The handlers poll, and complete the tasks of, only the projects the caller works
        // in (a batch's tasks checked one by one, as the guard checks a single one's).
        "pollExternalTasks" | "completeExternalTasks" => SignedIn,
        // A worker role, or operator and up (see `Caller::check`); the lease token too.
        "heartbeatExternalTask"
        | "appendExternalTaskLog"
        | "releaseExternalTask"
        | "completeExternalTask" => Project(Worker, TaskInstance),
        "getTaskInstance" | "getTaskLog" => Project(Viewer, TaskInstance),
        "getCommand" => Project(Viewer, Command),
        "cancelCommand" => Project(Operator, Command),
        "getBackfill" => Project(Viewer, Backfill),
        "cancelBackfill" => Project(Operator, Backfill),
        _ => return None,
    })
}

/// Whether the `{project}` of operation `op` must exist (else 404, see
/// [`super::guard`]): every operation of [`Scope::Path`] but applying a workflow, which
/// creates a project it names, and validating one, which answers as applying would.
pub fn needs_existing_project(op: &str) -> bool {
    matches!(rule(op), Some(Need::Project(_, Scope::Path)))
        && !matches!(op, "applyWorkflow" | "validateWorkflow")
}

/// Operations that change nothing although they are not GETs, or nothing worth a record
/// (an external task's heartbeats and log lines, every few seconds): not audited.
pub fn is_read(op: &str) -> bool {
    matches!(
        op,
        "validateWorkflow" | "heartbeatExternalTask" | "appendExternalTaskLog"
    )
}
