//! Where each attempt the engine has out is (see docs/task-life.md).

use super::waits;
use crate::runtime::Node;

/// What the engine knows about a task attempt it has out.
pub(super) struct TaskRef {
    pub instance: i64,
    pub node: Node,
    pub attempt: i32,
    pub place: Place,
    /// When the attempt was recorded (its row's `submitted_at`): its delay and its
    /// dependency's timeout count from here, on whichever master drives it.
    pub since_ms: i64,
}

/// Where an attempt the engine has out is: the one record of it on this master (its state
/// as the runtime sees it lives in the runtime; the row follows both). Every move is in
/// docs/task-life.md.
#[derive(Debug, Clone)]
pub(super) enum Place {
    /// Recorded, not yet routed: `enqueue` sends it to a slot wait, the master or the queue.
    New,
    /// Waiting out a delay or retry interval; a timer brings `Ready`.
    Delayed,
    /// Waiting for a task-group slot, a child run, a dependency or its completion; the
    /// wait poll (`waits`) reads what every waiting attempt waits for from here.
    Waiting(waits::Wait),
    /// Being settled on the master by a message the engine sent itself: a logic task, a
    /// dry run, a sub_workflow task whose child run is being written.
    OnMaster,
    /// With the dispatcher, in its queue or in a dispatch RPC; `no_worker`: its row says
    /// no live worker serves its group.
    Queued {
        no_worker: bool,
    },
    /// Adopted after a failover with no worker on record: the live workers are asked.
    Probing,
    OnWorker(String),
    /// Taken out of its wait by a pause; it settles as paused.
    Withdrawn,
    /// Asked to end: taken out of the queue or its wait, or killed on its worker.
    Killing {
        worker: Option<String>,
    },
}

impl Place {
    /// The worker the attempt is on, if it reached one.
    pub fn worker(&self) -> Option<&str> {
        match self {
            Place::OnWorker(w) | Place::Killing { worker: Some(w) } => Some(w),
            _ => None,
        }
    }

    /// A worker reported the attempt (its events may overtake the dispatcher's notice).
    pub fn reached(&mut self, worker: &str) {
        if self.worker() == Some(worker) {
            return; // already known (every event of the attempt names its worker)
        }
        match self {
            Place::Killing { worker: w } => *w = Some(worker.to_string()),
            p => *p = Place::OnWorker(worker.to_string()),
        }
    }

    pub fn killing(&self) -> bool {
        matches!(self, Place::Killing { .. })
    }

    /// Ends the attempt's wait, if it waits: it is settled on the master now.
    pub fn unwait(&mut self) -> Option<waits::Wait> {
        match std::mem::replace(self, Place::OnMaster) {
            Place::Waiting(wait) => Some(wait),
            other => {
                *self = other;
                None
            }
        }
    }
}
