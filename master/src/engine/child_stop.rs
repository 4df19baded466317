//! Stopping a sub_workflow task's child run when its parent stops.
//!
//! The child may not have started yet (its command waits for a master: it is withdrawn),
//! or run on any master (asked to stop through `Master.Control`, as the api-server does).
//! A child between owners (failover under way) is asked again until it has one.

use crate::clients::Peers;
use shoal_common::proto::{ControlAction, ControlRequest};
use shoal_common::types::WorkflowState;
use shoal_store::{ChildRun, Store};
use std::time::Duration;
use tonic::Code;
use tracing::{info, warn};

const RETRY: Duration = Duration::from_secs(1);
const TRIES: u32 = 60;

/// Stops the child run of sub_workflow task `parent_task_id`, in the background.
pub(super) fn stop_child(store: Store, peers: Peers, parent_task_id: i64) {
    tokio::spawn(async move {
        for _ in 0..TRIES {
            match once(&store, &peers, parent_task_id).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => {
                    warn!(parent_task_id, %error, "stopping a child run failed; retrying")
                }
            }
            tokio::time::sleep(RETRY).await;
        }
        warn!(
            parent_task_id,
            "gave up stopping the child run of a stopped parent; stop it with `shoal stop`"
        );
    });
}

/// One try; true when there is nothing more to do.
async fn once(store: &Store, peers: &Peers, parent_task_id: i64) -> Result<bool, String> {
    let (id, owner) = match store
        .withdraw_child(parent_task_id)
        .await
        .map_err(|e| e.to_string())?
    {
        ChildRun::Withdrawn => {
            info!(
                parent_task_id,
                "child run withdrawn before it started: its parent stopped"
            );
            return Ok(true);
        }
        ChildRun::None => return Ok(true),
        ChildRun::Instance { state, .. }
            if state.is_terminal() || state == WorkflowState::ReadyStop =>
        {
            return Ok(true);
        }
        // Waiting its turn (serial workflow): no master drives it, it is discarded here.
        ChildRun::Instance {
            id,
            state: WorkflowState::SerialWait,
            ..
        } => {
            return store
                .discard_waiting_run(id, "stopped with its parent")
                .await
                .map_err(|e| e.to_string());
        }
        ChildRun::Instance { owner: None, .. } => return Ok(false),
        ChildRun::Instance {
            id,
            owner: Some(owner),
            ..
        } => (id, owner),
    };
    let mut master = peers.master(&owner).map_err(|e| e.to_string())?;
    let request = ControlRequest {
        workflow_instance_id: id,
        action: ControlAction::Stop.into(),
        ..Default::default()
    };
    match master.control(request).await {
        Ok(_) => {
            info!(
                instance_id = id,
                parent_task_id, "child run stopped with its parent"
            );
            Ok(true)
        }
        // Its state no longer allows a stop (it ended or paused meanwhile).
        Err(s) if s.code() == Code::FailedPrecondition => Ok(true),
        // Not driven there (any more): ask whoever owns it next time.
        Err(s) => Err(format!("master {owner}: {}", s.message())),
    }
}
