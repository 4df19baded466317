//! Operator actions on a workflow instance. Stop and pause go to the master driving the
//! instance, which answers once it has committed the request; resume, rerun and
//! resubmit-failed are commands that a master claims, like a start.

use crate::Ctx;
use crate::access::Caller;
use crate::channels::call;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::ApiPath;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;
use shoal_common::proto::master_client::MasterClient;
use shoal_common::proto::{ControlAction, ControlRequest};
use shoal_common::types::{CommandKind, WorkflowState};
use shoal_store::{InstanceRow, NewCommand, recovery_allowed};
use std::time::Duration;
use tonic::Code;
use utoipa::{IntoParams, ToSchema};

/// How long the master may take to answer a stop or pause, connecting included.
const MASTER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Stop,
    Pause,
    Resume,
    Rerun,
    ResubmitFailed,
}

/// What the 404 for an unknown action lists.
const VALID_ACTIONS: &str = "stop, pause, resume, rerun, resubmit-failed";

impl Action {
    fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "stop" => Action::Stop,
            "pause" => Action::Pause,
            "resume" => Action::Resume,
            "rerun" => Action::Rerun,
            "resubmit-failed" | "resubmit_failed" => Action::ResubmitFailed,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Action::Stop => "stop",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Rerun => "rerun",
            Action::ResubmitFailed => "resubmit-failed",
        }
    }

    /// Whether an instance in `state` takes this action; the reason when it does not.
    fn allowed(self, state: WorkflowState) -> std::result::Result<(), &'static str> {
        match self {
            // Waiting its turn (serial execution type), a run can be stopped too.
            Action::Stop if state == WorkflowState::SerialWait => Ok(()),
            Action::Stop => Control::STOP.allowed(state),
            Action::Pause => Control::PAUSE.allowed(state),
            Action::Resume => recovery_allowed(CommandKind::Resume, state),
            Action::Rerun => recovery_allowed(CommandKind::Rerun, state),
            Action::ResubmitFailed => recovery_allowed(CommandKind::ResubmitFailed, state),
        }
    }
}

const ALL_ACTIONS: [Action; 5] = [
    Action::Stop,
    Action::Pause,
    Action::Resume,
    Action::Rerun,
    Action::ResubmitFailed,
];

/// Whether the instance's state allows an action, for the UI to offer or grey it out.
#[derive(Serialize, ToSchema)]
pub struct ActionOffer {
    pub action: InstanceAction,
    pub allowed: bool,
    /// Why it is not allowed (null when it is).
    #[schema(required = true)]
    pub reason: Option<String>,
}

/// Every action with whether an instance in `state` takes it.
pub(crate) fn offers(state: WorkflowState) -> Vec<ActionOffer> {
    ALL_ACTIONS
        .iter()
        .map(|&a| {
            let reason = a.allowed(state).err();
            ActionOffer {
                action: a.into(),
                allowed: reason.is_none(),
                reason: reason.map(|r| format!("the instance is {state}; {r}")),
            }
        })
        .collect()
}

/// An accepted action.
#[derive(Serialize, ToSchema)]
pub struct ActionAccepted {
    /// The workflow instance.
    pub id: i64,
    /// The action, as named in the path (`resubmit_failed` is answered `resubmit-failed`).
    pub action: String,
    /// For stop and pause: the state the master reports (e.g. `ready_stop`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<WorkflowState>, nullable = false)]
    pub state: Option<String>,
    /// For resume, rerun and resubmit-failed: the command written
    /// (`GET /commands/{command_id}` tells when a master took it up).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub command_id: Option<i64>,
}

/// The actions of `POST /instances/{id}/{action}`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceAction {
    Stop,
    Pause,
    Resume,
    Rerun,
    ResubmitFailed,
}

impl From<Action> for InstanceAction {
    fn from(a: Action) -> Self {
        match a {
            Action::Stop => InstanceAction::Stop,
            Action::Pause => InstanceAction::Pause,
            Action::Resume => InstanceAction::Resume,
            Action::Rerun => InstanceAction::Rerun,
            Action::ResubmitFailed => InstanceAction::ResubmitFailed,
        }
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct ActionPath {
    /// The workflow instance.
    id: i64,
    /// The action (`resubmit_failed` is accepted too).
    action: InstanceAction,
}

/// `POST /instances/{id}/{action}`. Answers 202 with `{"id", "action", "state"}` for stop
/// and pause (the state the master reports, e.g. `ready_stop`), and with `{"command_id",
/// "id", "action"}` for the others (`GET /commands/{command_id}` tells when a master took
/// it up). 409 when the instance's state does not allow the action, 503 when the master
/// driving it cannot be reached.
#[utoipa::path(
    post,
    path = "/instances/{id}/{action}",
    operation_id = "actOnInstance",
    tag = "instances",
    params(ActionPath),
    responses(
        (status = 202, body = ActionAccepted),
        (status = 404, description = "No such instance, or an unknown action", body = ErrorBody),
        (status = 409, description = "The instance's state does not allow the action, or an action on it is pending", body = ErrorBody),
        (status = 502, description = "The master failed to answer", body = ErrorBody),
        (status = 503, description = "No master drives the instance at the moment (failover will take it over)", body = ErrorBody),
    )
)]
pub async fn act(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, action)): ApiPath<(i64, String)>,
) -> Result<(StatusCode, Json<ActionAccepted>)> {
    let action = Action::parse(&action).ok_or_else(|| {
        Error::NotFound(format!(
            "unknown action '{action}' on workflow instance {id}; valid actions: {VALID_ACTIONS}"
        ))
    })?;
    let instance = ctx
        .store
        .get_instance(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("workflow instance {id} does not exist")))?;
    match action {
        // Waiting its turn (serial execution type), it has no master yet: discarded here.
        Action::Stop if instance.state == WorkflowState::SerialWait => {
            if !ctx
                .store
                .discard_waiting_run(id, "stopped by an operator while waiting its turn")
                .await?
            {
                return Err(Error::Conflict(format!(
                    "workflow instance {id} started meanwhile; ask again to stop it"
                )));
            }
            tracing::info!(instance = id, "waiting run stopped");
            let body = ActionAccepted {
                id,
                action: Action::Stop.name().to_string(),
                state: Some(WorkflowState::Stopped.to_string()),
                command_id: None,
            };
            Ok((StatusCode::ACCEPTED, Json(body)))
        }
        Action::Stop => control(&ctx, &instance, Control::STOP, 0).await,
        Action::Pause => control(&ctx, &instance, Control::PAUSE, 0).await,
        Action::Resume => recover(&ctx, &caller, instance, action, CommandKind::Resume).await,
        Action::Rerun => recover(&ctx, &caller, instance, action, CommandKind::Rerun).await,
        Action::ResubmitFailed => {
            recover(&ctx, &caller, instance, action, CommandKind::ResubmitFailed).await
        }
    }
}

/// A request to the master driving an instance (stop, pause, kill a task): the states it
/// applies to and what the refusal says otherwise.
pub(crate) struct Control {
    name: &'static str,
    grpc: ControlAction,
    /// Asking again while the request is under way is answered, not refused.
    allowed: &'static [WorkflowState],
    only: &'static str,
}

impl Control {
    const STOP: Control = Control {
        name: "stop",
        grpc: ControlAction::Stop,
        allowed: &[
            WorkflowState::Running,
            WorkflowState::ReadyPause,
            WorkflowState::ReadyStop,
        ],
        only: "only a running or pausing instance can be stopped",
    };
    const PAUSE: Control = Control {
        name: "pause",
        grpc: ControlAction::Pause,
        allowed: &[WorkflowState::Running, WorkflowState::ReadyPause],
        only: "only a running instance can be paused",
    };
    pub(crate) const KILL_TASK: Control = Control {
        name: "kill",
        grpc: ControlAction::KillTask,
        allowed: &[
            WorkflowState::Running,
            WorkflowState::ReadyPause,
            WorkflowState::ReadyStop,
        ],
        only: "only a task of a running instance can be killed",
    };

    fn allowed(&self, state: WorkflowState) -> std::result::Result<(), &'static str> {
        if self.allowed.contains(&state) {
            Ok(())
        } else {
            Err(self.only)
        }
    }

    fn check(&self, id: i64, state: WorkflowState) -> Result<()> {
        self.allowed(state)
            .map_err(|only| Error::Conflict(format!("workflow instance {id} is {state}; {only}")))
    }
}

/// Asks the master driving the instance to stop or pause it, or to kill its attempt
/// `task_instance_id` (0 for none).
pub(crate) async fn control(
    ctx: &Ctx,
    instance: &InstanceRow,
    control: Control,
    task_instance_id: i64,
) -> Result<(StatusCode, Json<ActionAccepted>)> {
    let id = instance.id;
    let action = control.name;
    control.check(id, instance.state)?;
    let Some(addr) = instance.owner.as_deref().filter(|a| !a.is_empty()) else {
        return Err(Error::Unavailable(format!(
            "no master drives workflow instance {id} at the moment; failover will take it \
             over, try again shortly"
        )));
    };
    let unreachable = |detail: &str| {
        tracing::warn!(instance = id, master = addr, detail, "master unreachable");
        Error::Unavailable(format!(
            "the master driving workflow instance {id} ({addr}) is unreachable; failover \
             will take it over, try again shortly"
        ))
    };
    let channel = ctx.peers.get(addr).map_err(|e| unreachable(&e))?;
    let request = ControlRequest {
        workflow_instance_id: id,
        action: control.grpc.into(),
        task_instance_id,
    };
    let status = match call(MASTER_TIMEOUT, MasterClient::new(channel).control(request)).await {
        Ok(answer) => {
            let state = answer.state.as_str();
            tracing::info!(
                instance = id,
                action,
                master = addr,
                state,
                "control requested"
            );
            let body = ActionAccepted {
                id,
                action: action.to_string(),
                state: Some(answer.state),
                command_id: None,
            };
            return Ok((StatusCode::ACCEPTED, Json(body)));
        }
        Err(status) => status,
    };
    Err(match status.code() {
        Code::FailedPrecondition => Error::Conflict(status.message().to_string()),
        Code::NotFound => {
            // The run may have ended between the read above and the master's answer.
            let now = ctx.store.get_instance(id).await?;
            if let Some(now) = now
                && let Err(refused) = control.check(id, now.state)
            {
                return Err(refused);
            }
            tracing::warn!(
                instance = id,
                master = addr,
                "the owner does not drive the instance"
            );
            Error::Unavailable(format!(
                "the master at {addr} no longer drives workflow instance {id}; failover will \
                 take it over, try again shortly"
            ))
        }
        Code::Unavailable => unreachable(status.message()),
        Code::DeadlineExceeded => Error::Unavailable(format!(
            "the master driving workflow instance {id} ({addr}) did not answer within {}s; \
             the {action} may still take effect, see `shoal status {id}`",
            MASTER_TIMEOUT.as_secs()
        )),
        code => Error::Peer {
            action: format!("{action} workflow instance {id} through master {addr}"),
            reason: format!("master answered {code:?}: {}", status.message()),
        },
    })
}

/// Writes the resume, rerun or resubmit-failed command for an instance. It pins the
/// instance's version, parameters, priority and start options; the caller becomes who
/// started it.
async fn recover(
    ctx: &Ctx,
    caller: &Caller,
    instance: InstanceRow,
    action: Action,
    kind: CommandKind,
) -> Result<(StatusCode, Json<ActionAccepted>)> {
    let id = instance.id;
    if let Err(reason) = action.allowed(instance.state) {
        return Err(Error::Conflict(format!(
            "workflow instance {id} is {}; {reason}",
            instance.state
        )));
    }
    let mut cmd = NewCommand::recovery(kind, &instance);
    cmd.options.started_by = caller.user_id;
    let command_id = ctx.store.insert_command(&cmd).await?;
    tracing::info!(
        command_id,
        kind = %cmd.kind,
        instance = id,
        project = %cmd.project,
        workflow = %cmd.workflow,
        version = cmd.version,
        "command written"
    );
    let body = ActionAccepted {
        id,
        action: action.name().to_string(),
        state: None,
        command_id: Some(command_id),
    };
    Ok((StatusCode::ACCEPTED, Json(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_have_one_name_each_and_accept_the_underscore_spelling() {
        for a in ALL_ACTIONS {
            assert_eq!(Action::parse(a.name()), Some(a));
            assert!(VALID_ACTIONS.contains(a.name()));
        }
        assert_eq!(
            Action::parse("resubmit_failed"),
            Some(Action::ResubmitFailed)
        );
        assert_eq!(Action::parse("kill"), None);
    }

    #[test]
    fn stop_and_pause_name_the_state_they_refuse() {
        let e = Control::PAUSE
            .check(7, WorkflowState::Success)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "workflow instance 7 is success; only a running instance can be paused"
        );
        assert!(Control::STOP.check(7, WorkflowState::ReadyStop).is_ok());
        assert!(Control::STOP.check(7, WorkflowState::ReadyPause).is_ok());
        assert!(Control::STOP.check(7, WorkflowState::Stopped).is_err());
        assert!(Control::PAUSE.check(7, WorkflowState::ReadyStop).is_err());
    }

    #[test]
    fn offers_follow_the_state() {
        let allowed = |state| -> Vec<&str> {
            offers(state)
                .iter()
                .zip(ALL_ACTIONS)
                .filter(|(o, _)| o.allowed)
                .map(|(_, a)| a.name())
                .collect()
        };
        assert_eq!(allowed(WorkflowState::Running), ["stop", "pause"]);
        assert_eq!(allowed(WorkflowState::SerialWait), ["stop"]);
        assert_eq!(allowed(WorkflowState::Paused), ["resume", "rerun"]);
        assert_eq!(
            allowed(WorkflowState::Failure),
            ["rerun", "resubmit-failed"]
        );
        assert_eq!(allowed(WorkflowState::Success), ["rerun"]);
        let refused = &offers(WorkflowState::Success)[0];
        assert_eq!(
            refused.reason.as_deref(),
            Some("the instance is success; only a running or pausing instance can be stopped")
        );
        assert!(offers(WorkflowState::Running)[0].reason.is_none());
    }
}
