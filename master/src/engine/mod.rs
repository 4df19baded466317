//! Drives every workflow runtime this master owns.
//!
//! One loop takes whatever arrived (claimed instances, worker events, dispatch results,
//! timers, operator requests), applies it to the runtimes, commits all resulting writes in
//! ONE transaction, and only then acknowledges the events and performs the actions:
//! queueing tasks, killing tasks, starting timers, dropping finished instances. Batching a
//! whole cycle into one commit is what keeps the per-task overhead low under load.
//!
//! By concern: `handle` (each message to what it changes), `claims` (runs taken on, and
//! attempts adopted from a master that is gone), `events` (worker events and controls
//! through the runtime to its actions), `cycle` (the commit and what follows it), `tasks`
//! (queueing, killing, withdrawing attempts; their rows and timers), `spec` (what a worker
//! receives), `waits`, `reconcile`, `child_stop`, `groups`, `alerts`, `definitions` (one
//! definition shared by the runs of a version).

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
mod reconcile;
pub use reconcile::sweep_soon;
mod spec;
mod tasks;
#[cfg(test)]
mod tests;
mod timers;
mod waiting;
mod waits;

use crate::clients::Peers;
use crate::dispatch::{DispatchMsg, Report};
use crate::runtime::{
    Action, Event, Fact, Node, Outcome, Recorded, Recovery, Refused, WorkflowRuntime,
};
use crate::secrets::Secrets;
use shoal_common::definition::TimeoutStrategy;
use shoal_common::metrics;
use shoal_common::proto::{DispatchRequest, KillRequest, TaskEvent, TaskEventKind};
use shoal_common::registry::NodeWatch;
use shoal_common::start::{Params, StartOptions};
use shoal_common::store::{
    ChildState, ClaimedInstance, InstanceUpdate, NewTaskInstance, SerialEnd, Store,
    TaskInstanceRow, TaskUpdate, WriteBatch, WriteResult,
};
use shoal_common::types::{CommandKind, Priority, TaskState, TaskType, WorkflowState, now_ms};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

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

/// An instance this master drives.
struct Run {
    instance_id: i64,
    project: String,
    run_no: i32,
    started_at: i64,
    /// The schedule time of a cron or backfill run (or of such a run's child).
    schedule_time: Option<i64>,
    rt: WorkflowRuntime,
    epoch: i64,
    priority: Priority,
    start_params: Params,
    options: StartOptions,
    /// Current attempt's task-instance id per node.
    task_ids: Vec<Option<i64>>,
}

/// What the engine knows about a task attempt it has out.
struct TaskRef {
    instance: i64,
    node: Node,
    attempt: i32,
    place: Place,
    /// When the attempt was recorded (its row's `submitted_at`): its delay and its
    /// dependency's timeout count from here, on whichever master drives it.
    since_ms: i64,
}

/// Where an attempt the engine has out is: the one record of it on this master (its state
/// as the runtime sees it lives in the runtime; the row follows both). Every move is in
/// docs/task-life.md.
#[derive(Debug, Clone)]
enum Place {
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
    fn worker(&self) -> Option<&str> {
        match self {
            Place::OnWorker(w) | Place::Killing { worker: Some(w) } => Some(w),
            _ => None,
        }
    }

    /// A worker reported the attempt (its events may overtake the dispatcher's notice).
    fn reached(&mut self, worker: &str) {
        if self.worker() == Some(worker) {
            return; // already known (every event of the attempt names its worker)
        }
        match self {
            Place::Killing { worker: w } => *w = Some(worker.to_string()),
            p => *p = Place::OnWorker(worker.to_string()),
        }
    }

    fn killing(&self) -> bool {
        matches!(self, Place::Killing { .. })
    }

    /// Ends the attempt's wait, if it waits: it is settled on the master now.
    fn unwait(&mut self) -> Option<waits::Wait> {
        match std::mem::replace(self, Place::OnMaster) {
            Place::Waiting(wait) => Some(wait),
            other => {
                *self = other;
                None
            }
        }
    }
}

struct PendingCreate {
    instance: i64,
    node: Node,
    attempt: i32,
    /// Its row's `submitted_at`.
    at: i64,
    /// None: a skipped task, recorded only.
    start: Option<Option<Duration>>,
}

/// An event's sequence number and the instance it belongs to.
type EventOf = (u64, i64);

/// A task row update that only records (see [`RECORD_WAIT`]): its instance, the epoch it
/// was made under, and until when it may wait for the task's next update.
#[derive(Clone, Copy)]
struct Record {
    instance: i64,
    epoch: i64,
    until: Instant,
}

/// Writes and follow-ups collected during one cycle.
#[derive(Default)]
struct Cycle {
    batch: WriteBatch,
    updates: HashMap<i64, usize>,
    /// The batch's task updates that only record, by task id.
    records: HashMap<i64, Record>,
    creates: Vec<PendingCreate>,
    /// Per report: (event seq, its instance), acknowledged after the commit.
    acks: Vec<(oneshot::Sender<Vec<u64>>, Vec<EventOf>)>,
    /// Per control request: (its instance, the reply, what the engine answers).
    replies: Vec<(i64, ControlReply, Result<WorkflowState, ControlError>)>,
    kills: Vec<(i64, Node)>,
    withdraws: Vec<(i64, Node)>,
    enqueues: Vec<(i64, Node)>,
    adoptions: Vec<(i64, Node)>,
    /// Adopted attempts with no worker on record, to look for on the live workers.
    probes: Vec<i64>,
    finished: Vec<(i64, WorkflowState)>,
    ended_tasks: Vec<i64>,
    /// Owner epoch of every instance this cycle writes for (the store fences on it).
    epochs: HashMap<i64, i64>,
    /// The lease lapse whose ownership check this cycle's commit is.
    check_ownership: Option<u64>,
    /// Tasks that start waiting once the cycle is committed.
    waits: Vec<(i64, waits::Wait)>,
    /// Callback tasks whose request goes out once they wait.
    callbacks: Vec<(i64, callback::Request)>,
}

impl Cycle {
    /// Ends the cycle's intake: epochs go along with writes, or alone when this master
    /// must check which instances it still owns (after its lease lapsed).
    fn seal(&mut self) {
        if !self.batch.is_empty() || self.check_ownership.is_some() {
            self.batch.epochs = self.epochs.iter().map(|(i, e)| (*i, *e)).collect();
        }
    }

    /// Takes out of the batch the records still allowed to wait ([`RECORD_WAIT`]): the
    /// next cycle carries them, and writes them with the task's next update or alone
    /// once their time is up.
    fn defer_records(&mut self, now: Instant) -> Vec<(TaskUpdate, Record)> {
        let later: HashMap<i64, Record> = self.records.extract_if(|_, r| r.until > now).collect();
        if later.is_empty() {
            return Vec::new();
        }
        let (deferred, kept): (Vec<TaskUpdate>, Vec<TaskUpdate>) =
            std::mem::take(&mut self.batch.task_updates)
                .into_iter()
                .partition(|u| later.contains_key(&u.id));
        self.updates = kept.iter().enumerate().map(|(i, u)| (u.id, i)).collect();
        self.batch.task_updates = kept;
        deferred
            .into_iter()
            .map(|u| {
                let record = later[&u.id];
                (u, record)
            })
            .collect()
    }

    /// Adds a record to the batch. One that joins an update of the task already in the
    /// cycle is written with it; one that joins an earlier record keeps that one's time.
    fn record(&mut self, u: TaskUpdate, record: Record) {
        let first = !self.updates.contains_key(&u.id);
        if first {
            self.records.insert(u.id, record);
        }
        self.epochs.insert(record.instance, record.epoch);
        self.merge(u);
    }

    /// Folds a task update into the batch; a record of the task already there goes with it.
    fn update(&mut self, u: TaskUpdate) {
        self.records.remove(&u.id);
        self.merge(u);
    }

    /// Several changes of one task in a cycle become one row update (the batch must not
    /// name a row twice).
    fn merge(&mut self, u: TaskUpdate) {
        if let Some(&i) = self.updates.get(&u.id) {
            let cur = &mut self.batch.task_updates[i];
            cur.state = u.state;
            cur.worker = u.worker.or(cur.worker.take());
            cur.started_at = cur.started_at.or(u.started_at);
            cur.ended_at = u.ended_at.or(cur.ended_at);
            cur.exit_code = u.exit_code.or(cur.exit_code);
            cur.output = u.output.or(cur.output.take());
            cur.message = u.message.or(cur.message.take());
        } else {
            self.updates.insert(u.id, self.batch.task_updates.len());
            self.batch.task_updates.push(u);
        }
    }
}

pub struct Engine {
    store: Store,
    /// The project secrets tasks may name.
    secrets: Secrets,
    master_addr: String,
    runs: HashMap<i64, Run>,
    /// The definitions the runs' runtimes hold, one per version and start options.
    definitions: definitions::Definitions,
    tasks: HashMap<i64, TaskRef>,
    dispatcher: mpsc::UnboundedSender<DispatchMsg>,
    me: mpsc::UnboundedSender<EngineMsg>,
    clients: Peers,
    workers: NodeWatch,
    /// Instances another master took over from this one (its writes were fenced).
    lost: HashSet<i64>,
    /// Instances whose last commit had an unknown outcome, being reloaded from the store;
    /// like lost ones, their workers' events are not acknowledged meanwhile.
    reloading: HashSet<i64>,
    waits: waits::Waits,
    timers: timers::Timers,
    /// The master's shutdown, for the engine's background retries (set by `run`).
    shutdown: CancellationToken,
    /// Owned instances the last reconciler sweep found not driven here.
    unattended: HashSet<i64>,
    /// The api-server's URL outside systems reach, for callback tasks' callback URLs.
    api_url: Option<String>,
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
            waits: waits::Waits::default(),
            timers: timers::Timers::default(),
            shutdown: CancellationToken::new(),
            lost: HashSet::new(),
            reloading: HashSet::new(),
            unattended: HashSet::new(),
            api_url: None,
            workers,
            store,
            secrets,
            master_addr,
            runs: HashMap::new(),
            definitions: definitions::Definitions::default(),
            tasks: HashMap::new(),
            dispatcher,
            me,
            clients,
        }
    }

    /// Where callback tasks' callbacks go: the api-server's URL outside systems reach.
    pub(crate) fn with_api_url(mut self, url: Option<String>) -> Self {
        self.api_url = url;
        self
    }

    pub async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<EngineMsg>,
        shutdown: CancellationToken,
    ) {
        self.shutdown = shutdown.clone();
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
