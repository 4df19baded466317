//! The engine's side of the dispatcher: what it asks of it. The dispatcher answers
//! through the engine's inbox (`dispatch::Report`).

use crate::dispatch::DispatchMsg;
use crate::queue::QueuedTask;
use tokio::sync::mpsc;

pub(super) struct DispatchLink {
    tx: mpsc::UnboundedSender<DispatchMsg>,
}

impl DispatchLink {
    pub fn new(tx: mpsc::UnboundedSender<DispatchMsg>) -> Self {
        DispatchLink { tx }
    }

    /// Queues a task for a worker of its group.
    pub fn push(&self, task: QueuedTask) {
        let _ = self.tx.send(DispatchMsg::Push(task));
    }

    /// Takes a task out of the queue if it has not gone to a worker yet (the dispatcher
    /// answers `Cancelled` then).
    pub fn cancel(&self, id: i64) {
        let _ = self.tx.send(DispatchMsg::Cancel(id));
    }

    /// The task's slot on `worker` is free: it ended, or it is no longer this master's.
    pub fn free(&self, worker: &str, id: i64) {
        let worker = worker.to_string();
        let _ = self.tx.send(DispatchMsg::Finished { worker, id });
    }

    /// A task running on `worker` was adopted after a failover: it holds a slot there.
    pub fn adopted(&self, worker: &str, id: i64) {
        let worker = worker.to_string();
        let _ = self.tx.send(DispatchMsg::Adopted { worker, id });
    }

    /// Every instance lost up to lease lapse `generation` was dropped: work may go out.
    pub fn ownership_checked(&self, generation: u64) {
        let _ = self.tx.send(DispatchMsg::OwnershipChecked(generation));
    }
}
