//! Drives every workflow runtime this master owns.
//!
//! One loop takes whatever arrived (claimed instances, worker events, dispatch results,
//! timers, operator requests), applies it to the runtimes, commits all resulting writes in
//! ONE transaction, and only then acknowledges the events and performs the actions:
//! queueing tasks, killing tasks, starting timers, dropping finished instances. Batching a
//! whole cycle into one commit is what keeps the per-task overhead low under load.

mod alerts;
mod child_stop;
mod groups;
mod reconcile;
mod spec;
mod waits;

use crate::clients::Peers;
use crate::dispatch::DispatchMsg;
use crate::runtime::{Action, Event, Node, Outcome, Recovery, Refused, WorkflowRuntime};
use crate::secrets::Secrets;
use shoal_common::definition::TimeoutStrategy;
use shoal_common::metrics;
use shoal_common::proto::{DispatchRequest, KillRequest, TaskEvent, TaskEventKind};
use shoal_common::registry::NodeWatch;
use shoal_common::store::{
    ChildState, ClaimedInstance, InstanceUpdate, NewTaskInstance, Params, SerialEnd, StartOptions,
    Store, TaskInstanceRow, TaskUpdate, WriteBatch, WriteResult,
};
use shoal_common::types::{CommandKind, Priority, TaskState, TaskType, WorkflowState, now_ms};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// Most messages folded into one cycle, to bound a transaction's size.
const MAX_CYCLE_MSGS: usize = 4096;

/// An operator request for an instance this master drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Stop,
    Pause,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("this master does not drive workflow instance {0}")]
    NotHere(i64),
    #[error(transparent)]
    Refused(#[from] Refused),
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
    /// The master itself settles a task: a dry run, or an undefined parameter.
    Settle {
        id: i64,
        state: TaskState,
        message: Option<String>,
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
    worker: Option<String>,
    /// Waiting out a delay or retry interval: in no queue, on no worker.
    delayed: bool,
    /// Its row says it waits for a worker of its group (cleared when dispatched).
    waiting: bool,
    /// Needs a slot of its task group before it may be queued (cleared when granted).
    needs_slot: bool,
    kill_requested: bool,
}

struct PendingCreate {
    instance: i64,
    node: Node,
    attempt: i32,
    /// None: a skipped task, recorded only.
    start: Option<Option<Duration>>,
}

/// An event's sequence number and the instance it belongs to.
type EventOf = (u64, i64);

/// Writes and follow-ups collected during one cycle.
#[derive(Default)]
struct Cycle {
    batch: WriteBatch,
    updates: HashMap<i64, usize>,
    creates: Vec<PendingCreate>,
    /// Per report: (event seq, its instance), acknowledged after the commit.
    acks: Vec<(oneshot::Sender<Vec<u64>>, Vec<EventOf>)>,
    replies: Vec<(ControlReply, Result<WorkflowState, ControlError>)>,
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
}

impl Cycle {
    /// Folds a task update into the batch; several events for one task in a cycle become
    /// one row update (the batch must not name a row twice).
    fn update(&mut self, u: TaskUpdate) {
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
    tasks: HashMap<i64, TaskRef>,
    dispatcher: mpsc::UnboundedSender<DispatchMsg>,
    me: mpsc::UnboundedSender<EngineMsg>,
    clients: Peers,
    workers: NodeWatch,
    /// Instances another master took over from this one (its writes were fenced).
    lost: HashSet<i64>,
    waits: waits::Waits,
    /// Owned instances the last reconciler sweep found not driven here.
    unattended: HashSet<i64>,
}

impl Engine {
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
            lost: HashSet::new(),
            unattended: HashSet::new(),
            workers,
            store,
            secrets,
            master_addr,
            runs: HashMap::new(),
            tasks: HashMap::new(),
            dispatcher,
            me,
            clients,
        }
    }

    pub async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<EngineMsg>,
        shutdown: CancellationToken,
    ) {
        loop {
            // Cancellation-safe: a message is either received whole or left in the channel.
            let first = tokio::select! {
                _ = shutdown.cancelled() => break,
                m = inbox.recv() => match m { Some(m) => m, None => break },
            };
            let mut cycle = Cycle::default();
            self.handle(first, &mut cycle);
            let mut n = 1;
            while n < MAX_CYCLE_MSGS {
                let Ok(m) = inbox.try_recv() else { break };
                self.handle(m, &mut cycle);
                n += 1;
            }
            // Epochs go along with writes, or alone when this master must check which
            // instances it still owns (after its lease lapsed).
            if !cycle.batch.is_empty() || cycle.check_ownership.is_some() {
                cycle.batch.epochs = cycle.epochs.iter().map(|(i, e)| (*i, *e)).collect();
            }
            let Some(result) = self.commit(&cycle.batch, &shutdown).await else {
                break;
            };
            self.after_commit(cycle, result);
        }
        info!(instances = self.runs.len(), "engine stopped");
    }

    fn handle(&mut self, msg: EngineMsg, cycle: &mut Cycle) {
        let now = now_ms();
        match msg {
            EngineMsg::Claimed(list) => {
                for c in list {
                    self.take(c, cycle, now);
                }
            }
            EngineMsg::WorkerEvents {
                worker,
                events,
                ack,
            } => {
                let mut seqs = Vec::with_capacity(events.len());
                for ev in events {
                    // An instance lost to another master: no ack, so the worker keeps the
                    // event until the new owner adopts the task and it is rerouted there.
                    if self.lost.contains(&ev.workflow_instance_id) {
                        continue;
                    }
                    seqs.push((ev.seq, ev.workflow_instance_id));
                    self.on_worker_event(&worker, ev, cycle);
                }
                cycle.acks.push((ack, seqs));
            }
            EngineMsg::Dispatched { id, worker } => {
                let Some(t) = self.tasks.get_mut(&id) else {
                    // Ended or dropped meanwhile: the dispatcher counted a slot for it.
                    let _ = self.dispatcher.send(DispatchMsg::Finished { worker, id });
                    return;
                };
                t.worker = Some(worker.clone());
                if t.kill_requested {
                    cycle.kills.push((t.instance, t.node));
                }
                let mut u = TaskUpdate::state(id, TaskState::Dispatched);
                u.worker = Some(worker);
                if std::mem::take(&mut t.waiting) {
                    u.message = Some(String::new());
                }
                self.task_event(id, u, Params::new(), None, cycle, now);
            }
            EngineMsg::Cancelled { id } => {
                let Some(t) = self.tasks.get(&id) else { return };
                let pausing = self.runs.get(&t.instance).is_some_and(|r| r.rt.pausing());
                let (state, why) = if pausing && !t.kill_requested {
                    (TaskState::Paused, "paused before it reached a worker")
                } else {
                    (TaskState::Killed, "cancelled before it reached a worker")
                };
                self.settle(id, state, Some(why.to_string()), cycle, now);
            }
            EngineMsg::Settle { id, state, message } => self.settle(id, state, message, cycle, now),
            EngineMsg::Ready {
                instance,
                node,
                attempt,
            } => {
                self.apply(instance, Event::Ready { node, attempt }, cycle, now);
            }
            EngineMsg::Control {
                instance,
                control,
                reply,
            } => {
                let result = self.control(instance, control, cycle, now);
                cycle.replies.push((reply, result));
            }
            EngineMsg::Probed {
                found,
                abandoned,
                asked,
            } => {
                let found: HashMap<i64, String> = found.into_iter().collect();
                for id in asked {
                    if abandoned.contains(&id) {
                        let message = Some("its worker gave it up".to_string());
                        self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
                        continue;
                    }
                    let Some(t) = self.tasks.get_mut(&id) else {
                        continue;
                    };
                    match found.get(&id) {
                        Some(worker) => {
                            t.worker = Some(worker.clone());
                            cycle.adoptions.push((t.instance, t.node));
                        }
                        None => cycle.enqueues.push((t.instance, t.node)),
                    }
                }
            }
            EngineMsg::StartChild { id } => {
                let Some(t) = self.tasks.get(&id) else { return };
                // Stopped before its child was written: it never starts one.
                if t.kill_requested {
                    let _ = self.me.send(EngineMsg::Cancelled { id });
                    return;
                }
                let Some(run) = self.runs.get(&t.instance) else {
                    return;
                };
                match spec::child_start(run, t.node, id) {
                    Ok(child) => {
                        cycle.epochs.insert(t.instance, run.epoch);
                        cycle.batch.children.push(child);
                        cycle.waits.push((id, waits::Wait::Child));
                    }
                    Err(message) => self.settle(id, TaskState::Failure, Some(message), cycle, now),
                }
            }
            EngineMsg::Polled(polled) => {
                self.waits.polled();
                // A slot granted in the store is durable already: queue the task at once.
                for id in polled.grants.granted {
                    if self.waits.tasks.remove(&id).is_none() {
                        continue; // cancelled meanwhile; its end frees the slot
                    }
                    let Some(t) = self.tasks.get_mut(&id) else {
                        continue;
                    };
                    t.needs_slot = false;
                    let (instance, node) = (t.instance, t.node);
                    self.enqueue(instance, node);
                }
                for (id, group) in polled.grants.no_group {
                    self.waits.tasks.remove(&id);
                    let message = format!(
                        "task group '{group}' does not exist; create it with `shoal task-group create {group} --slots N`"
                    );
                    self.settle(id, TaskState::Failure, Some(message), cycle, now);
                }
                for (id, child) in polled.children {
                    let (state, message, output) = match child {
                        ChildState::Waiting => continue,
                        ChildState::Ended {
                            instance,
                            state,
                            outputs,
                        } => {
                            let task_state = if state == WorkflowState::Success {
                                TaskState::Success
                            } else {
                                TaskState::Failure
                            };
                            (
                                task_state,
                                format!("child instance {instance} ended {state}"),
                                outputs,
                            )
                        }
                        ChildState::Failed(reason) => (TaskState::Failure, reason, Params::new()),
                    };
                    self.waits.tasks.remove(&id);
                    let mut u = TaskUpdate::state(id, state);
                    u.ended_at = Some(now);
                    u.message = Some(message);
                    u.output = (!output.is_empty()).then(|| output.clone());
                    self.task_event(id, u, output, None, cycle, now);
                }
                for id in polled.met {
                    self.waits.tasks.remove(&id);
                    self.settle(
                        id,
                        TaskState::Success,
                        Some("its dependency succeeded".into()),
                        cycle,
                        now,
                    );
                }
                for id in polled.timed_out {
                    self.waits.tasks.remove(&id);
                    let message = Some("timed out waiting for its dependency to succeed".into());
                    self.settle(id, TaskState::Failure, message, cycle, now);
                }
            }
            EngineMsg::CheckOwnership { generation } => {
                warn!(
                    instances = self.runs.len(),
                    "lease lapsed; checking which instances are still ours"
                );
                cycle.check_ownership = Some(generation);
                cycle
                    .epochs
                    .extend(self.runs.iter().map(|(id, run)| (*id, run.epoch)));
            }
            EngineMsg::Branched { id, chosen } => {
                let mut u = TaskUpdate::state(id, TaskState::Success);
                u.ended_at = Some(now);
                u.output = Some(Params::from([("branch".to_string(), chosen.join(","))]));
                u.message = Some(match chosen.is_empty() {
                    true => {
                        "no case held and there is no default: nothing downstream runs".to_string()
                    }
                    false => format!("chose {}", chosen.join(", ")),
                });
                self.task_event(id, u, Params::new(), Some(chosen), cycle, now);
            }
            EngineMsg::Waiting { ids, reason } => {
                for id in ids {
                    let Some(t) = self.tasks.get_mut(&id) else {
                        continue;
                    };
                    let Some(run) = self.runs.get(&t.instance) else {
                        continue;
                    };
                    t.waiting = true;
                    cycle.epochs.insert(t.instance, run.epoch);
                    let mut u = TaskUpdate::state(id, TaskState::Submitted);
                    u.message = Some(reason.clone());
                    cycle.update(u);
                }
            }
            EngineMsg::WorkersGone(gone) => {
                let lost: Vec<i64> = self
                    .tasks
                    .iter()
                    .filter(|(_, t)| t.worker.as_ref().is_some_and(|w| gone.contains(w)))
                    .map(|(id, _)| *id)
                    .collect();
                for id in lost {
                    warn!(
                        task_instance_id = id,
                        "task lost with its worker; it runs again"
                    );
                    let message = Some("its worker left the cluster".to_string());
                    self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
                }
            }
            EngineMsg::Reconcile => {
                self.recheck(None);
                self.sweep_owned();
            }
            EngineMsg::WorkersRestarted(workers) => self.recheck(Some(&workers)),
            EngineMsg::Rechecked { worker, unknown } => {
                for id in self.lost_on(&worker, unknown) {
                    let message = Some(format!(
                        "worker {worker} no longer had this attempt (it restarted or gave it up)"
                    ));
                    self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
                }
            }
            EngineMsg::Unattended(owned) => self.take_up_unattended(owned),
            EngineMsg::Timeout { instance, run_no } => {
                let Some(run) = self.runs.get_mut(&instance).filter(|r| r.run_no == run_no) else {
                    return;
                };
                let def = run.rt.definition().clone();
                warn!(instance_id = instance, timeout = ?def.timeout, strategy = ?def.timeout_strategy, "instance exceeded its timeout");
                let timed_out = alerts::on_timeout(run);
                if !timed_out.is_empty() {
                    cycle.epochs.insert(instance, run.epoch);
                    cycle.batch.alerts.extend(timed_out);
                }
                if def.timeout_strategy == TimeoutStrategy::Fail {
                    let actions = run.rt.time_out();
                    self.perform(instance, actions, cycle, now);
                }
            }
        }
    }

    /// Builds the runtime of a claimed instance and starts it.
    fn take(&mut self, c: ClaimedInstance, cycle: &mut Cycle, now: i64) {
        // Takeovers count as failovers, so started + failovers = finished + running.
        if c.kind != CommandKind::RecoverFailover {
            metrics::INSTANCES_STARTED.inc();
        }
        let id = c.instance.id;
        let mut definition = c.definition;
        c.instance.options.apply_to(&mut definition);
        let def = Arc::new(definition);
        let from = c.instance.options.from_task.as_deref().map(|t| {
            (
                t,
                c.instance
                    .options
                    .scope
                    .unwrap_or(shoal_common::store::Scope::Downstream),
            )
        });
        let rt = match c.kind {
            CommandKind::Resume | CommandKind::ResubmitFailed => {
                let mut rt = WorkflowRuntime::restore(def, &c.tasks, Recovery::Rerun);
                rt.limit_to(from).map(|()| rt)
            }
            CommandKind::RecoverFailover => {
                let mut rt = WorkflowRuntime::restore(def, &c.tasks, Recovery::Failover);
                rt.limit_to(from).map(|()| rt)
            }
            _ => WorkflowRuntime::new(def, from),
        };
        let rt = match rt {
            Ok(rt) => rt,
            Err(Refused(reason)) => {
                warn!(instance_id = id, %reason, "instance cannot start");
                cycle.batch.instance_updates.push(InstanceUpdate {
                    id,
                    owner_epoch: c.instance.owner_epoch,
                    state: WorkflowState::Failure,
                    ended_at: Some(now),
                });
                return;
            }
        };
        info!(instance_id = id, workflow = %c.instance.workflow, kind = %c.kind, run = c.instance.run, "instance started");
        let n = rt.definition().tasks.len();
        let run = Run {
            instance_id: id,
            project: c.instance.project.clone(),
            run_no: c.instance.run,
            started_at: c.instance.started_at.unwrap_or(c.instance.created_at),
            schedule_time: c.instance.schedule_time,
            rt,
            epoch: c.instance.owner_epoch,
            priority: c.instance.priority,
            start_params: c.instance.params,
            options: c.instance.options,
            task_ids: vec![None; n],
        };
        if let Some(timeout) = run.rt.definition().timeout {
            let left = Duration::from_millis(
                (run.started_at + timeout.as_millis() as i64 - now).max(0) as u64,
            );
            let (me, run_no) = (self.me.clone(), run.run_no);
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                let _ = me.send(EngineMsg::Timeout {
                    instance: id,
                    run_no,
                });
            });
        }
        let state_before = c.instance.state;
        if self.runs.insert(id, run).is_none() {
            metrics::INSTANCES_RUNNING.inc();
        }
        if c.kind == CommandKind::RecoverFailover {
            self.adopt_in_flight(id, &c.tasks, cycle, now);
        }
        self.apply(id, Event::Start, cycle, now);
        // An operator's stop or pause that the previous master had not finished.
        let pending = match state_before {
            WorkflowState::ReadyStop => self.runs.get_mut(&id).and_then(|r| r.rt.stop().ok()),
            WorkflowState::ReadyPause => self.runs.get_mut(&id).and_then(|r| r.rt.pause().ok()),
            _ => None,
        };
        if let Some(actions) = pending {
            self.perform(id, actions, cycle, now);
        }
    }

    /// After a failover restore: attempts on a live worker are adopted (the worker is
    /// told to report here; it does not run them again), queued or waiting ones go back
    /// to the queue or timer, and those on a worker that is gone run again.
    fn adopt_in_flight(
        &mut self,
        instance: i64,
        rows: &[TaskInstanceRow],
        cycle: &mut Cycle,
        now: i64,
    ) {
        let Some(run) = self.runs.get_mut(&instance) else {
            return;
        };
        let live: HashSet<String> = self.workers.current().into_iter().map(|w| w.addr).collect();
        let mut lost = Vec::new();
        for (node, attempt, state) in run.rt.in_flight() {
            let name = &run.rt.definition().tasks[node].name;
            let Some(row) = rows
                .iter()
                .find(|r| &r.name == name && r.attempt == attempt)
            else {
                continue;
            };
            run.task_ids[node] = Some(row.id);
            let delayed = state == TaskState::Delayed;
            let worker = row.worker.clone();
            // A delayed attempt of a group never held a slot; a granted one holds it still.
            let needs_slot = state == TaskState::WaitingTaskGroup
                || (delayed && groups::slot_group(run, node).is_some());
            self.tasks.insert(
                row.id,
                TaskRef {
                    instance,
                    node,
                    attempt,
                    worker: worker.clone(),
                    delayed,
                    waiting: false,
                    needs_slot,
                    kill_requested: false,
                },
            );
            match worker {
                _ if delayed => {
                    let def = &run.rt.definition().tasks[node];
                    let wait = def.retry_interval.or(def.delay).unwrap_or_default();
                    timer(&self.me, instance, node, attempt, wait);
                }
                // Still waiting for a slot: it never reached the queue.
                None if needs_slot => cycle.enqueues.push((instance, node)),
                // Never recorded on a worker, but it may have reached one just before the
                // old master died: ask the workers before queueing it again.
                None => cycle.probes.push(row.id),
                Some(w) if live.contains(&w) => cycle.adoptions.push((instance, node)),
                Some(_) => lost.push(row.id),
            }
        }
        for id in lost {
            let message =
                Some("its worker was gone when a new master took the instance over".to_string());
            self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
        }
    }

    /// Re-sends an adopted attempt to the worker that runs it, naming this master: the
    /// worker recognises the attempt, does not start it again, and reports here.
    fn adopt(&mut self, instance: i64, node: Node) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let Some(id) = run.task_ids[node] else { return };
        let Some(t) = self.tasks.get(&id) else { return };
        let Some(worker) = t.worker.clone() else {
            return;
        };
        let task = match spec::build(run, node, id, t.attempt, &self.master_addr, &self.secrets) {
            Ok(task) => task,
            Err(message) => {
                let _ = self.me.send(EngineMsg::Settle {
                    id,
                    state: TaskState::Failure,
                    message: Some(message),
                });
                return;
            }
        };
        let _ = self.dispatcher.send(DispatchMsg::Adopted {
            worker: worker.clone(),
            id,
        });
        let (client, me) = (self.clients.worker(&worker), self.me.clone());
        tokio::spawn(async move {
            let accepted = match client {
                Ok(mut c) => c
                    .dispatch(DispatchRequest {
                        tasks: vec![task.spec],
                        adopt_only: true,
                    })
                    .await
                    .map(|r| r.into_inner().accepted.contains(&id))
                    .unwrap_or(false),
                Err(_) => false,
            };
            if !accepted {
                warn!(task_instance_id = id, %worker, "worker did not take the adopted task back; it runs again");
                let message = Some(format!(
                    "worker {worker} could not be reached after a master failover"
                ));
                let _ = me.send(EngineMsg::Settle {
                    id,
                    state: TaskState::NeedFaultTolerance,
                    message,
                });
            }
        });
    }

    fn control(
        &mut self,
        instance: i64,
        control: Control,
        cycle: &mut Cycle,
        now: i64,
    ) -> Result<WorkflowState, ControlError> {
        let run = self
            .runs
            .get_mut(&instance)
            .ok_or(ControlError::NotHere(instance))?;
        let actions = match control {
            Control::Stop => run.rt.stop()?,
            Control::Pause => run.rt.pause()?,
        };
        info!(
            instance_id = instance,
            ?control,
            "operator request accepted"
        );
        let state = run.rt.state();
        self.perform(instance, actions, cycle, now);
        Ok(state)
    }

    fn on_worker_event(&mut self, worker: &str, ev: TaskEvent, cycle: &mut Cycle) {
        let state = match ev.kind() {
            TaskEventKind::Running => TaskState::Running,
            TaskEventKind::Success => TaskState::Success,
            TaskEventKind::Failure => TaskState::Failure,
            TaskEventKind::Killed => TaskState::Killed,
            TaskEventKind::Unspecified => return,
        };
        match self.tasks.get_mut(&ev.task_instance_id) {
            // Events can overtake the dispatcher's notice: remember the worker either way,
            // so its slot is given back when the task ends.
            Some(t) if t.attempt == ev.attempt => t.worker = Some(worker.to_string()),
            // Not ours (any more), or another attempt: acknowledged and ignored.
            _ => return,
        }
        let mut u = TaskUpdate::state(ev.task_instance_id, state);
        u.worker = Some(worker.to_string());
        if state == TaskState::Running {
            u.started_at = Some(ev.at_ms);
        } else {
            u.ended_at = Some(ev.at_ms);
            u.exit_code = Some(ev.exit_code);
            u.output = (!ev.output.is_empty()).then(|| ev.output.clone().into_iter().collect());
            u.message = (!ev.message.is_empty()).then(|| ev.message.clone());
        }
        self.task_event(
            ev.task_instance_id,
            u,
            ev.output.into_iter().collect(),
            None,
            cycle,
            ev.at_ms,
        );
    }

    fn settle(
        &mut self,
        id: i64,
        state: TaskState,
        message: Option<String>,
        cycle: &mut Cycle,
        now: i64,
    ) {
        let mut u = TaskUpdate::state(id, state);
        u.ended_at = Some(now);
        u.message = message;
        self.task_event(id, u, Params::new(), None, cycle, now);
    }

    /// Applies a task's state change to its runtime and records it if accepted;
    /// `chosen` carries a switch task's branch.
    fn task_event(
        &mut self,
        id: i64,
        mut u: TaskUpdate,
        output: Params,
        chosen: Option<Vec<String>>,
        cycle: &mut Cycle,
        at: i64,
    ) {
        let Some(t) = self.tasks.get(&id) else { return };
        let (instance, node, attempt) = (t.instance, t.node, t.attempt);
        let state = u.state;
        let event = match chosen {
            Some(chosen) => Event::Branched {
                node,
                attempt,
                chosen,
            },
            None => Event::Task {
                node,
                attempt,
                state,
                output,
            },
        };
        let Some(outcome) = self.apply(instance, event, cycle, at) else {
            return;
        };
        if !outcome.accepted {
            return;
        }
        if state == TaskState::NeedFaultTolerance {
            metrics::TASKS_LOST.inc();
        }
        if state.is_terminal() {
            if !outcome.was_running {
                // It never reported running (e.g. a noop): it started when it ended.
                u.started_at = u.started_at.or(u.ended_at);
            }
            cycle.ended_tasks.push(id);
        }
        cycle.update(u);
    }

    fn apply(
        &mut self,
        instance: i64,
        event: Event,
        cycle: &mut Cycle,
        now: i64,
    ) -> Option<Outcome> {
        let run = self.runs.get_mut(&instance)?;
        cycle.epochs.insert(instance, run.epoch);
        let mut outcome = run.rt.apply(event);
        if outcome.accepted {
            metrics::EVENTS_APPLIED.inc();
        } else {
            metrics::EVENTS_IGNORED.inc();
        }
        let actions = std::mem::take(&mut outcome.actions);
        self.perform(instance, actions, cycle, now);
        Some(outcome)
    }

    /// Turns a runtime's actions into this cycle's writes and follow-ups.
    fn perform(&mut self, instance: i64, actions: Vec<Action>, cycle: &mut Cycle, now: i64) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        cycle.epochs.insert(instance, run.epoch);
        for action in actions {
            match action {
                Action::CreateTask {
                    node,
                    attempt,
                    delay,
                } => {
                    let state = if delay.is_some() {
                        TaskState::Delayed
                    } else {
                        TaskState::Submitted
                    };
                    cycle
                        .batch
                        .new_tasks
                        .push(new_task(run, node, attempt, state, now));
                    cycle.creates.push(PendingCreate {
                        instance,
                        node,
                        attempt,
                        start: Some(delay),
                    });
                }
                Action::Skip { node } => {
                    cycle
                        .batch
                        .new_tasks
                        .push(new_task(run, node, 1, TaskState::Skipped, now));
                    cycle.creates.push(PendingCreate {
                        instance,
                        node,
                        attempt: 1,
                        start: None,
                    });
                }
                Action::Enqueue { node, .. } => {
                    if let Some(id) = run.task_ids[node] {
                        let u = match groups::slot_group(run, node) {
                            Some(group) => groups::waiting_update(id, group),
                            None => TaskUpdate::state(id, TaskState::Submitted),
                        };
                        cycle.update(u);
                        cycle.enqueues.push((instance, node));
                    }
                }
                Action::KillTask { node, .. } => cycle.kills.push((instance, node)),
                Action::Withdraw { node, .. } => cycle.withdraws.push((instance, node)),
                Action::SetState { state } => {
                    cycle.batch.instance_updates.push(InstanceUpdate {
                        id: instance,
                        owner_epoch: run.epoch,
                        state,
                        ended_at: None,
                    });
                }
                Action::Finish { state } => {
                    info!(instance_id = instance, %state, "instance finished");
                    cycle.batch.instance_updates.push(InstanceUpdate {
                        id: instance,
                        owner_epoch: run.epoch,
                        state,
                        ended_at: Some(now),
                    });
                    let def = run.rt.definition();
                    cycle.batch.alerts.extend(alerts::on_end(run, state, now));
                    if !def.execution_type.is_parallel() {
                        cycle.batch.serial_ended.push(SerialEnd {
                            instance,
                            project: run.project.clone(),
                            workflow: def.name.clone(),
                            owner: self.master_addr.clone(),
                        });
                    }
                    cycle.finished.push((instance, state));
                }
            }
        }
    }

    /// Commits the cycle's writes, retrying while the database is unreachable. Returns
    /// None when shutdown interrupted the retries.
    async fn commit(
        &self,
        batch: &WriteBatch,
        shutdown: &CancellationToken,
    ) -> Option<WriteResult> {
        if batch.is_empty() {
            return Some(WriteResult::default());
        }
        let mut delay = Duration::from_millis(100);
        loop {
            match self.store.write_batch(batch).await {
                Ok(r) => return Some(r),
                Err(e) => {
                    error!(error = %e, retry_in_ms = delay.as_millis() as u64, "cannot commit engine writes");
                    tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    fn after_commit(&mut self, cycle: Cycle, result: WriteResult) {
        self.lost.extend(result.fenced_instances.iter().copied());
        // Serial runs that start now that their predecessor ended: ours to drive.
        if !result.woken.is_empty() {
            let _ = self.me.send(EngineMsg::Claimed(result.woken));
        }
        for (ack, seqs) in cycle.acks {
            let durable = seqs
                .into_iter()
                .filter(|(_, instance)| !self.lost.contains(instance));
            let _ = ack.send(durable.map(|(seq, _)| seq).collect());
        }
        for (reply, outcome) in cycle.replies {
            let _ = reply.send(outcome);
        }
        for &instance in &result.fenced_instances {
            warn!(
                instance_id = instance,
                "instance was taken over by another master; dropping it"
            );
            self.drop_run(instance);
        }
        for id in cycle.ended_tasks {
            if let Some(t) = self.tasks.remove(&id)
                && let Some(worker) = t.worker
            {
                let _ = self.dispatcher.send(DispatchMsg::Finished { worker, id });
            }
        }
        // The store wrote no task of a fenced instance: line up the ids with the rest.
        let fenced: HashSet<i64> = result.fenced_instances.iter().copied().collect();
        let creates = cycle
            .creates
            .into_iter()
            .filter(|pc| !fenced.contains(&pc.instance));
        for (pc, id) in creates.zip(result.new_task_ids) {
            let Some(run) = self.runs.get_mut(&pc.instance) else {
                continue;
            };
            let Some(delay) = pc.start else { continue };
            run.task_ids[pc.node] = Some(id);
            let delayed = delay.is_some();
            let needs_slot = groups::slot_group(run, pc.node).is_some();
            self.tasks.insert(
                id,
                TaskRef {
                    instance: pc.instance,
                    node: pc.node,
                    attempt: pc.attempt,
                    worker: None,
                    delayed,
                    waiting: false,
                    needs_slot,
                    kill_requested: false,
                },
            );
            match delay {
                Some(delay) => timer(&self.me, pc.instance, pc.node, pc.attempt, delay),
                None => self.enqueue(pc.instance, pc.node),
            }
        }
        for (instance, node) in cycle.enqueues {
            self.enqueue(instance, node);
        }
        for (id, wait) in cycle.waits {
            if self.tasks.contains_key(&id) {
                self.waits.tasks.insert(id, wait);
            }
        }
        self.waits.tasks.retain(|id, _| self.tasks.contains_key(id));
        self.waits.poll(&self.store, &self.me);
        for (instance, node) in cycle.adoptions {
            self.adopt(instance, node);
        }
        if !cycle.probes.is_empty() {
            self.probe(cycle.probes);
        }
        // After the lost runs were dropped (their queued tasks withdrawn) above.
        if let Some(generation) = cycle.check_ownership {
            let _ = self
                .dispatcher
                .send(DispatchMsg::OwnershipChecked(generation));
        }
        for (instance, node) in cycle.kills {
            self.kill(instance, node);
        }
        for (instance, node) in cycle.withdraws {
            self.withdraw(instance, node);
        }
        for (instance, state) in cycle.finished {
            // Counted after the commit: a fenced run was dropped above and is not counted.
            if self.runs.contains_key(&instance)
                && let Some(counter) = metrics::instances_finished(state)
            {
                counter.inc();
            }
            self.drop_run(instance);
        }
    }

    /// Hands a recorded attempt to the dispatcher (or, in a dry run, settles it at once).
    fn enqueue(&mut self, instance: i64, node: Node) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let Some(id) = run.task_ids[node] else { return };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        t.delayed = false;
        if t.needs_slot
            && let Some(group) = groups::slot_group(run, node)
        {
            self.waits
                .tasks
                .insert(id, waits::Wait::TaskGroup(group.to_string()));
            self.waits.poll(&self.store, &self.me);
            return;
        }
        let kind = run.rt.definition().tasks[node].kind();
        if kind.on_master() {
            // Logic tasks end here, on the master: a delay task has waited its delay
            // already, a conditions task's branch is taken by the runtime.
            let msg = match kind {
                TaskType::SubWorkflow => EngineMsg::StartChild { id },
                TaskType::Dependent => {
                    let wait = spec::dependency(run, node);
                    self.waits.tasks.insert(id, wait);
                    self.waits.poll(&self.store, &self.me);
                    return;
                }
                TaskType::Switch => match spec::switch_choice(run, node, id) {
                    Ok(chosen) => EngineMsg::Branched { id, chosen },
                    Err(message) => EngineMsg::Settle {
                        id,
                        state: TaskState::Failure,
                        message: Some(message),
                    },
                },
                _ => EngineMsg::Settle {
                    id,
                    state: TaskState::Success,
                    message: None,
                },
            };
            let _ = self.me.send(msg);
            return;
        }
        if run.options.dry_run {
            let message = Some("dry run: not executed".to_string());
            let _ = self.me.send(EngineMsg::Settle {
                id,
                state: TaskState::Success,
                message,
            });
            return;
        }
        match spec::build(run, node, id, t.attempt, &self.master_addr, &self.secrets) {
            Ok(task) => {
                let _ = self.dispatcher.send(DispatchMsg::Push(task));
            }
            Err(message) => {
                let _ = self.me.send(EngineMsg::Settle {
                    id,
                    state: TaskState::Failure,
                    message: Some(message),
                });
            }
        }
    }

    /// Kills the current attempt of a task: on its worker if it reached one, otherwise by
    /// taking it out of the queue (or cancelling its wait).
    fn kill(&mut self, instance: i64, node: Node) {
        let Some(id) = self.runs.get(&instance).and_then(|r| r.task_ids[node]) else {
            return;
        };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        t.kill_requested = true;
        // Waiting in no queue and on no worker: cancelled right here; a sub_workflow's
        // child run is stopped too.
        let wait = self.waits.tasks.remove(&id);
        if matches!(wait, Some(waits::Wait::Child)) {
            child_stop::stop_child(self.store.clone(), self.clients.clone(), id);
        }
        if t.delayed || wait.is_some() {
            let _ = self.me.send(EngineMsg::Cancelled { id });
            return;
        }
        let Some(worker) = t.worker.clone() else {
            let _ = self.dispatcher.send(DispatchMsg::Cancel(id));
            return;
        };
        let request = KillRequest {
            task_instance_id: id,
            attempt: t.attempt,
            workflow_instance_id: instance,
            owner_epoch: self.runs.get(&instance).map_or(0, |r| r.epoch),
        };
        let client = self.clients.worker(&worker);
        tokio::spawn(async move {
            let result = match client {
                Ok(mut c) => c.kill(request).await.map(|_| ()),
                Err(e) => Err(tonic::Status::unavailable(e.to_string())),
            };
            if let Err(e) = result {
                warn!(task_instance_id = id, %worker, error = %e, "kill request failed");
            }
        });
    }

    /// Takes an attempt that has not reached a worker out of the queue; one that has
    /// keeps running, and so does a sub_workflow's child run (the parent pauses once it
    /// ended).
    fn withdraw(&mut self, instance: i64, node: Node) {
        let Some(id) = self.runs.get(&instance).and_then(|r| r.task_ids[node]) else {
            return;
        };
        let Some(t) = self.tasks.get(&id) else { return };
        let waiting = match self.waits.tasks.get(&id) {
            Some(waits::Wait::Child) => return,
            Some(_) => self.waits.tasks.remove(&id).is_some(),
            None => false,
        };
        if t.delayed || waiting {
            let _ = self.me.send(EngineMsg::Cancelled { id });
        } else if t.worker.is_none() {
            let _ = self.dispatcher.send(DispatchMsg::Cancel(id));
        }
    }

    fn drop_run(&mut self, instance: i64) {
        if let Some(run) = self.runs.remove(&instance) {
            metrics::INSTANCES_RUNNING.dec();
            for id in run.task_ids.into_iter().flatten() {
                match self.tasks.remove(&id).map(|t| t.worker) {
                    // A lost run's queued tasks must not go out from here any more.
                    Some(None) => {
                        let _ = self.dispatcher.send(DispatchMsg::Cancel(id));
                    }
                    // Its slot on the worker is no longer this master's to count.
                    Some(Some(worker)) => {
                        let _ = self.dispatcher.send(DispatchMsg::Finished { worker, id });
                    }
                    None => {}
                }
            }
        }
    }
}

fn new_task(run: &Run, node: Node, attempt: i32, state: TaskState, now: i64) -> NewTaskInstance {
    let t = &run.rt.definition().tasks[node];
    let group = groups::slot_group(run, node);
    let (state, message) = match group {
        Some(group) if state == TaskState::Submitted => (
            TaskState::WaitingTaskGroup,
            Some(groups::waiting_message(group)),
        ),
        _ => (state, None),
    };
    NewTaskInstance {
        task_group: group.map(str::to_string),
        task_group_priority: t.task_group_priority,
        message,
        workflow_instance_id: run.instance_id,
        run: run.run_no,
        name: t.name.clone(),
        task_type: t.task_type.clone(),
        attempt,
        priority: t.priority,
        worker_group: t.worker_group.clone(),
        state,
        submitted_at: now,
    }
}

/// Brings `Ready` for the attempt after `wait`.
fn timer(
    me: &mpsc::UnboundedSender<EngineMsg>,
    instance: i64,
    node: Node,
    attempt: i32,
    wait: Duration,
) {
    let me = me.clone();
    // A timer holds no thread and no worker slot; the runtime ignores it if the
    // attempt was cancelled meanwhile.
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let _ = me.send(EngineMsg::Ready {
            instance,
            node,
            attempt,
        });
    });
}
