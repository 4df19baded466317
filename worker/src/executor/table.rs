//! The task table: which attempts run here and which finished here, each with the master it
//! reports to, and the per-instance owner fences ([`super::fence`]).

use super::fence::Fences;
use super::kill::{KillSwitch, StopReason};
use shoal_common::proto::TaskSpec;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Finished attempts remembered to recognise a duplicate dispatch.
pub(super) const FINISHED_MEMORY: usize = 100_000;

/// One attempt of one task instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct TaskKey {
    pub(super) task_instance_id: i64,
    pub(super) attempt: i32,
}

impl TaskKey {
    pub(super) fn of(spec: &TaskSpec) -> Self {
        TaskKey {
            task_instance_id: spec.task_instance_id,
            attempt: spec.attempt,
        }
    }
}

/// The master a task reports to. Shared by the running task and the dispatch path, which
/// moves it to a new owner after a failover (a re-dispatch with a newer epoch).
pub(super) struct Route {
    pub(super) master_addr: String,
    pub(super) epoch: i64,
}

pub(super) type SharedRoute = Arc<Mutex<Route>>;

/// A task accepted and not yet finished.
pub(super) struct RunningTask {
    pub(super) kill: KillSwitch,
    pub(super) route: SharedRoute,
    /// The registry lease generation ([`super::Executor::follow_lease`]) it was accepted in.
    pub(super) generation: u64,
}

impl RunningTask {
    pub(super) fn abandoned(&self) -> bool {
        self.kill.reason() == Some(StopReason::Abandoned)
    }
}

/// A task that ended here, remembered to recognise a duplicate dispatch.
pub(super) struct Finished {
    pub(super) route: SharedRoute,
    /// Given up by the worker: a dispatch of the same attempt is refused.
    pub(super) abandoned: bool,
}

pub(super) struct Table {
    pub(super) running: HashMap<TaskKey, Arc<RunningTask>>,
    pub(super) finished: HashMap<TaskKey, Finished>,
    /// Insertion order of `finished`, oldest first, to forget beyond [`FINISHED_MEMORY`].
    pub(super) finished_order: VecDeque<TaskKey>,
    pub(super) fences: Fences,
    pub(super) accepting: bool,
}

impl Table {
    /// An attempt running or finished here: its route, and whether it was abandoned.
    pub(super) fn known(&self, key: &TaskKey) -> Option<(SharedRoute, bool)> {
        match self.running.get(key) {
            Some(task) => Some((task.route.clone(), task.abandoned())),
            None => self
                .finished
                .get(key)
                .map(|f| (f.route.clone(), f.abandoned)),
        }
    }
}
