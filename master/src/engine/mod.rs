//! Drives every workflow runtime this master owns.
//!
//! One loop takes whatever arrived (claimed instances, worker events, dispatch results,
//! timers, operator requests), applies it to the runtimes, commits all resulting writes in
//! ONE transaction, and only then acknowledges the events and performs the actions:
//! queueing tasks, killing tasks, starting timers, dropping finished instances. Batching a
//! whole cycle into one commit is what keeps the per-task overhead low under load.
//!
//! The engine's parts own their state, each behind its methods: `runs` (the runs driven
//! here and their shared definitions), `places` (where each attempt is, and what a
//! waiting one waits for), `waits` (the poll of the waits), `timers`, `link` (what the
//! engine asks of the dispatcher), `ownership` (instances lost or being reloaded). The
//! rest is by concern: `handle` (each message to its function), `claims` (runs taken on,
//! and attempts adopted from a master that is gone), `events` (worker events and
//! controls through the runtime to its actions), `cycle` (a cycle's writes, their commit
//! and what follows it), `tasks` (queueing, killing, withdrawing attempts), `waiting`
//! (attempts that begin or end a wait on the master), `spec` (what a worker receives),
//! `reconcile`, `child_stop`, `groups`, `alerts`, `definitions`.

mod alerts;
mod callback;
mod child_stop;
mod claims;
mod commit;
mod cycle;
mod definitions;
mod do_while;
mod events;
mod fanout;
mod groups;
mod handle;
mod link;
mod ownership;
mod places;
mod reconcile;
pub use reconcile::sweep_soon;
mod runs;
mod spec;
mod tasks;
#[cfg(test)]
mod tests;
mod timers;
mod waiting;
mod waits;

use crate::clients::Peers;
use crate::dispatch::{DispatchMsg, Report};
use crate::environments::Environments;
use crate::runtime::{Fact, Node, Refused};
use crate::secrets::Secrets;
use cycle::{Cycle, Record};
use link::DispatchLink;
use ownership::Ownership;
use places::TaskRef;
use runs::{Run, Runs};
use shoal_common::proto::TaskEvent;
use shoal_common::registry::NodeWatch;
use shoal_common::types::WorkflowState;
use shoal_store::{ClaimedInstance, Store, TaskUpdate};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Most messages folded into one cycle, to bound a transaction's size.
const MAX_CYCLE_MSGS: usize = 4096;

/// Longest a task row update that only records (which worker took the task, that it
/// started, why it waits) waits for the task's next update, to be written with it in one
/// row update. Nothing waits on such a record, and a master that takes the run over before
/// it lands asks the live workers for the attempt (see `claims`), as it does for a dispatch
/// that just went out. A short task's dispatch, start and end so make one row update and
/// one commit, not three row updates in two commits.
const RECORD_WAIT: Duration = Duration::from_millis(10);

/// An operator request for an instance this master drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Stop,
    Pause,
    /// Kill one attempt, by its task instance id.
    KillTask(i64),
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("this master does not drive workflow instance {0}")]
    NotHere(i64),
    #[error(transparent)]
    Refused(#[from] Refused),
    /// Its writes could not be committed (the instance failed, or is being reloaded).
    #[error(
        "the request for workflow instance {0} could not be recorded; check its state and try again"
    )]
    NotRecorded(i64),
}

pub type ControlReply = oneshot::Sender<Result<WorkflowState, ControlError>>;

pub enum EngineMsg {
    Claimed(Vec<ClaimedInstance>),
    WorkerEvents {
        worker: String,
        events: Vec<TaskEvent>,
        ack: oneshot::Sender<Vec<u64>>,
    },
    /// The dispatcher handed the task to `worker`.
    Dispatched {
        id: i64,
        worker: String,
    },
    /// The task left the queue without reaching a worker (kill or pause).
    Cancelled {
        id: i64,
    },
    /// The master itself settles a task (a logic task, a dry run, a task that cannot
    /// run); the runtime decides its state from `fact`.
    Settle {
        id: i64,
        fact: Fact,
    },
    /// A task's delay or retry interval is over.
    Ready {
        instance: i64,
        node: Node,
        attempt: i32,
    },
    Control {
        instance: i64,
        control: Control,
        reply: ControlReply,
    },
    /// The workflow's timeout passed for run `run_no` of the instance.
    Timeout {
        instance: i64,
        run_no: i32,
    },
    /// These workers left the cluster: what they were running is lost.
    WorkersGone(Vec<String>),
    /// This master's lease lapsed (the `generation`-th time): others may have taken its
    /// instances; check them all.
    CheckOwnership {
        generation: u64,
    },
    /// A sub_workflow task may start its child run now.
    StartChild {
        id: i64,
    },
    /// A wait or callback task starts waiting for its completion.
    StartWait {
        id: i64,
    },
    /// A foreach task reads its list and expands into its children.
    Expand {
        id: i64,
    },
    /// A do_while task starts its first iteration.
    StartLoop {
        id: i64,
    },
    /// A do_while task's iteration passed: its condition decides whether another runs.
    CheckLoop {
        id: i64,
        iteration: u32,
    },
    /// What the last poll for waiting sub_workflow and dependent tasks found.
    Polled(waits::Polled),
    /// Which live worker has each probed attempt (absent: none has it), and which were
    /// given up by the worker that had them.
    Probed {
        found: Vec<(i64, String)>,
        abandoned: Vec<i64>,
        asked: Vec<i64>,
    },
    /// A switch task chose its branch (task names) and succeeded.
    Branched {
        id: i64,
        chosen: Vec<String>,
    },
    /// Queued tasks that cannot go out yet, and why (shown on the task).
    Waiting {
        ids: Vec<i64>,
        reason: String,
    },
    /// Time for the reconciler's sweep (see `reconcile`).
    Reconcile,
    /// Look for owned instances not driven here now (after a claim or take-over whose
    /// commit's outcome was lost); see [`sweep_soon`].
    SweepOwned,
    /// These workers registered again under their address as a new process: what they
    /// had may be lost.
    WorkersRestarted(Vec<String>),
    /// Attempts recorded on `worker` that it did not know when asked.
    Rechecked {
        worker: String,
        unknown: Vec<i64>,
    },
    /// Instances in a driven state the store says this master owns: (id, epoch).
    Unattended(Vec<(i64, i64)>),
    /// A reloaded instance had moved on (another master has it, or it ended).
    NotReloaded(i64),
}

impl From<Report> for EngineMsg {
    fn from(r: Report) -> Self {
        match r {
            Report::Dispatched { id, worker } => EngineMsg::Dispatched { id, worker },
            Report::Cancelled { id } => EngineMsg::Cancelled { id },
            Report::Waiting { ids, reason } => EngineMsg::Waiting { ids, reason },
        }
    }
}

/// What the engine's parts share and do not change.
struct Context {
    store: Store,
    /// The project secrets tasks may name.
    secrets: Secrets,
    /// The project environments shell and python tasks may run in.
    environments: Environments,
    master_addr: String,
    /// The api-server's URL outside systems reach, for callback tasks' callback URLs.
    api_url: Option<String>,
    /// The engine's own inbox, for what it finishes later or in the background.
    me: mpsc::UnboundedSender<EngineMsg>,
    clients: Peers,
    workers: NodeWatch,
    /// The master's shutdown, for the engine's background retries (set by `run`).
    shutdown: CancellationToken,
}

/// The engine: its parts each own their state, behind their own methods.
pub struct Engine {
    ctx: Context,
    runs: Runs,
    /// Every attempt the engine has out, by task instance id, with its place.
    tasks: HashMap<i64, TaskRef>,
    dispatch: DispatchLink,
    ownership: Ownership,
    waits: waits::Waits,
    timers: timers::Timers,
}

impl Engine {
    /// A new cycle with the records the last one deferred, but those of runs dropped or
    /// taken on again since.
    fn carrying(&self, records: Vec<(TaskUpdate, Record)>) -> Cycle {
        let mut cycle = Cycle::default();
        for (u, r) in records {
            if self
                .runs
                .get(&r.instance)
                .is_some_and(|run| run.epoch == r.epoch)
            {
                cycle.record(u, r);
            }
        }
        cycle
    }

    /// A record for a task of `instance` made now, if this master drives it.
    fn record(&self, instance: i64) -> Option<Record> {
        let epoch = self.runs.get(&instance)?.epoch;
        let until = Instant::now() + RECORD_WAIT;
        Some(Record {
            instance,
            epoch,
            until,
        })
    }

    pub(crate) fn new(
        store: Store,
        secrets: Secrets,
        master_addr: String,
        dispatcher: mpsc::UnboundedSender<DispatchMsg>,
        me: mpsc::UnboundedSender<EngineMsg>,
        clients: Peers,
        workers: NodeWatch,
    ) -> Self {
        Engine {
            ctx: Context {
                environments: Environments::new(store.clone()),
                store,
                secrets,
                master_addr,
                api_url: None,
                me,
                clients,
                workers,
                shutdown: CancellationToken::new(),
            },
            runs: Runs::default(),
            tasks: HashMap::new(),
            dispatch: DispatchLink::new(dispatcher),
            ownership: Ownership::default(),
            waits: waits::Waits::default(),
            timers: timers::Timers::default(),
        }
    }

    /// The environments its tasks' specs take their shell lines from (refreshed elsewhere;
    /// without it, none the engine read itself).
    pub(crate) fn with_environments(mut self, environments: Environments) -> Self {
        self.ctx.environments = environments;
        self
    }

    /// Where callback tasks' callbacks go: the api-server's URL outside systems reach.
    pub(crate) fn with_api_url(mut self, url: Option<String>) -> Self {
        self.ctx.api_url = url;
        self
    }

    pub async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<EngineMsg>,
        shutdown: CancellationToken,
    ) {
        self.ctx.shutdown = shutdown.clone();
        // Records waiting for their task's next update (see `RECORD_WAIT`).
        let mut records: Vec<(TaskUpdate, Record)> = Vec::new();
        loop {
            // Cancellation-safe: a message is either received whole or left in the channel.
            let due = records.iter().map(|(_, r)| r.until).min();
            let next = match (self.timers.next(), due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let first = tokio::select! {
                _ = shutdown.cancelled() => break,
                m = inbox.recv() => match m { Some(m) => Some(m), None => break },
                _ = sleep_until(next), if next.is_some() => None,
            };
            let mut cycle = self.carrying(std::mem::take(&mut records));
            let mut n = 0;
            for m in first.into_iter().chain(self.timers.due()) {
                self.handle(m, &mut cycle);
                n += 1;
            }
            while n < MAX_CYCLE_MSGS {
                let Ok(m) = inbox.try_recv() else { break };
                self.handle(m, &mut cycle);
                n += 1;
            }
            records = cycle.defer_records(Instant::now());
            cycle.seal();
            let Some(committed) = self.commit(&cycle.batch, &shutdown).await else {
                break;
            };
            self.after_commit(cycle, committed);
        }
        info!(instances = self.runs.len(), "engine stopped");
    }
}

/// Sleeps until `at` (forever without one; the caller guards the branch).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
