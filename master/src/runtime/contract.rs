//! What goes into a runtime and what comes out: events in, actions out.

use super::Node;
use shoal_common::start::Params;
use shoal_common::types::{TaskState, WorkflowState};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The instance was claimed: release what may run.
    Start,
    /// A task attempt moved to `state` (dispatched, running or a terminal state).
    Task {
        node: Node,
        attempt: i32,
        state: TaskState,
        output: Params,
    },
    /// The wait before an attempt (task delay or retry interval) is over.
    Ready { node: Node, attempt: i32 },
    /// A foreach task's list was read: the run grows one child per element.
    Expanded {
        node: Node,
        attempt: i32,
        items: Vec<serde_json::Value>,
    },
    /// The condition of a do_while task after `iteration` (0: before the first, which
    /// always runs) held, did not, or could not be evaluated (why).
    LoopChecked {
        node: Node,
        attempt: i32,
        iteration: u32,
        holds: Result<bool, String>,
    },
    /// A switch task chose these downstream tasks (by name) and succeeded.
    Branched {
        node: Node,
        attempt: i32,
        chosen: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Record a new attempt of the task. Without a delay it is queued for dispatch at
    /// once; with one it is recorded as `delayed` and a timer brings `Ready` later.
    CreateTask {
        node: Node,
        attempt: i32,
        delay: Option<Duration>,
    },
    /// A delayed attempt may be queued now.
    Enqueue { node: Node, attempt: i32 },
    /// Record the task as skipped (`enabled: false`); downstream treats it as passed.
    Skip { node: Node },
    /// Kill the attempt, or take it out of the queue if it has not reached a worker.
    KillTask { node: Node, attempt: i32 },
    /// Take the attempt out of the queue if it has not reached a worker (pause).
    Withdraw { node: Node, attempt: i32 },
    /// A task the runtime ended itself (a foreach task once its children settled):
    /// record its end.
    Settled {
        node: Node,
        state: TaskState,
        output: Params,
        message: String,
    },
    /// Evaluate the do_while task's condition after `iteration` and answer with
    /// `Event::LoopChecked`.
    CheckLoop {
        node: Node,
        attempt: i32,
        iteration: u32,
    },
    /// Record where a task the runtime runs itself has got to (a do_while's iteration).
    Progress { node: Node, message: String },
    /// The instance moved to a non-final state (`ready_stop`, `ready_pause`).
    SetState { state: WorkflowState },
    /// The instance is over.
    Finish { state: WorkflowState },
}

/// Whether `apply` changed anything; ignored events are still acknowledged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    pub accepted: bool,
    /// Whether the task's attempt was seen running before this event (for timestamps).
    pub was_running: bool,
    pub actions: Vec<Action>,
}
