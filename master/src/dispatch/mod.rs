//! Sends queued tasks to live workers of their group over gRPC.
//!
//! The dispatcher owns the priority queue. It counts the tasks it has out on each worker
//! so that it only offers a worker what fits its slots; a worker that still rejects
//! (another master filled it) is rested briefly and the tasks keep their queue place.

use crate::clients::Peers;
use crate::queue::{Popped, QueuedTask, TaskQueue};
use shoal_common::metrics;
use shoal_common::proto::DispatchRequest;
use shoal_common::registry::{LeaseGate, NodeInfo, NodeWatch};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How long a worker that refused tasks or failed an RPC is left alone.
const REST: Duration = Duration::from_millis(200);
/// Most tasks sent to one worker in one RPC.
const MAX_BATCH: usize = 512;
/// How a worker's refusal for want of a slot starts (`worker/src/executor`): routine, not
/// shown on the waiting tasks.
const NO_FREE_SLOT: &str = "no free slot";

// Most messages are pushes: boxing them would add an allocation per dispatched task.
#[allow(clippy::large_enum_variant)]
pub enum DispatchMsg {
    Push(QueuedTask),
    /// Take the task out of the queue if it has not gone to a worker yet.
    Cancel(i64),
    /// A task that was out on `worker` ended (or is no longer this master's): its slot
    /// is free again.
    Finished {
        worker: String,
        id: i64,
    },
    /// The engine has dropped every instance it lost up to this lease lapse.
    OwnershipChecked(u64),
    /// A task already running on `worker` was adopted after a failover: it holds a slot.
    Adopted {
        worker: String,
        id: i64,
    },
}

/// What the dispatcher tells the engine about the tasks it was given.
pub enum Report {
    /// The task went to `worker`.
    Dispatched { id: i64, worker: String },
    /// The task left the queue without reaching a worker (kill or pause).
    Cancelled { id: i64 },
    /// Queued tasks that cannot go out yet, and why (shown on the task).
    Waiting { ids: Vec<i64>, reason: String },
}

/// Where the dispatcher's reports go: the engine's inbox. A function, so the dispatcher
/// names no engine type and the two modules do not import each other.
pub type ReportTo = Box<dyn Fn(Report) + Send>;

struct BatchResult {
    worker: String,
    sent: Vec<Popped>,
    /// Ids the worker accepted; `None` when the RPC itself failed.
    accepted: Option<HashSet<i64>>,
    /// Why the worker refused the others (its reasons, `; ` between them).
    reason: String,
}

/// When this master may hand out work: while its lease is fresh and it has checked which
/// instances are still its own after every lapse (a frozen master that runs again must
/// not send what it queued before others took its instances over).
pub struct LeaseCheck {
    pub gate: LeaseGate,
    pub lost: watch::Receiver<u64>,
}

pub struct Dispatcher {
    lease: LeaseCheck,
    /// The last lapse the engine has checked ownership for.
    checked: u64,
    queue: TaskQueue,
    workers: NodeWatch,
    clients: Peers,
    engine: ReportTo,
    /// Tasks this master has on each worker (sent and not yet finished).
    outstanding: HashMap<String, HashSet<i64>>,
    resting: HashMap<String, Instant>,
    /// Queued tasks the engine was told are waiting (no worker of their group, or refused
    /// for a reason other than a full worker), until one takes them.
    waiting_reported: HashSet<i64>,
    in_flight: HashSet<i64>,
    cancelled: HashSet<i64>,
    results_tx: mpsc::UnboundedSender<BatchResult>,
    results_rx: mpsc::UnboundedReceiver<BatchResult>,
}

impl Dispatcher {
    pub fn new(workers: NodeWatch, clients: Peers, engine: ReportTo, lease: LeaseCheck) -> Self {
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        Dispatcher {
            lease,
            checked: 0,
            queue: TaskQueue::default(),
            workers,
            clients,
            engine,
            outstanding: HashMap::new(),
            resting: HashMap::new(),
            waiting_reported: HashSet::new(),
            in_flight: HashSet::new(),
            cancelled: HashSet::new(),
            results_tx,
            results_rx,
        }
    }

    pub async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<DispatchMsg>,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(REST);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Every arm is cancellation-safe: mpsc receives and watch changes lose nothing
            // when another arm wins, and the tick only triggers a retry of rested workers.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                msg = inbox.recv() => {
                    let Some(msg) = msg else { break };
                    self.handle(msg);
                    while let Ok(msg) = inbox.try_recv() {
                        self.handle(msg);
                    }
                }
                Some(result) = self.results_rx.recv() => self.on_result(result),
                r = self.workers.changed() => if r.is_err() { break },
                _ = tick.tick(), if !self.queue.is_empty() => {}
            }
            self.dispatch_pass();
            metrics::QUEUE_DEPTH.set(self.queue.len() as i64);
        }
    }

    fn handle(&mut self, msg: DispatchMsg) {
        match msg {
            DispatchMsg::Push(task) => self.queue.push(task),
            DispatchMsg::Cancel(id) => {
                // A queued task leaves at once; an in-flight one when the worker's answer
                // comes back. Anything else already reached a worker: the engine kills it.
                self.waiting_reported.remove(&id);
                if self.queue.remove(id) {
                    (self.engine)(Report::Cancelled { id });
                } else if self.in_flight.contains(&id) {
                    self.cancelled.insert(id);
                }
            }
            DispatchMsg::OwnershipChecked(generation) => {
                self.checked = self.checked.max(generation)
            }
            DispatchMsg::Adopted { worker, id } => {
                self.outstanding.entry(worker).or_default().insert(id);
            }
            // By id, so a task reported ended twice frees its slot once.
            DispatchMsg::Finished { worker, id } => {
                if let Some(ids) = self.outstanding.get_mut(&worker) {
                    ids.remove(&id);
                }
            }
        }
    }

    fn on_result(&mut self, r: BatchResult) {
        let count = r.sent.len() as u32;
        let accepted = r.accepted.unwrap_or_default();
        let mut refused = 0;
        let mut waiting = Vec::new();
        for p in r.sent {
            let id = p.task.spec.task_instance_id;
            self.in_flight.remove(&id);
            if accepted.contains(&id) {
                // Reported once per wait: the engine clears the reason on dispatch.
                self.waiting_reported.remove(&id);
                metrics::DISPATCH_LATENCY.observe(p.task.queued_at.elapsed().as_secs_f64());
                // A cancel that raced the RPC is the engine's to finish: it kills on the worker.
                self.cancelled.remove(&id);
                (self.engine)(Report::Dispatched {
                    id,
                    worker: r.worker.clone(),
                });
            } else {
                refused += 1;
                if let Some(ids) = self.outstanding.get_mut(&r.worker) {
                    ids.remove(&id);
                }
                if self.requeue_or_cancel(p) {
                    waiting.push(id);
                }
            }
        }
        if refused > 0 {
            self.resting.insert(r.worker.clone(), Instant::now() + REST);
            debug!(worker = %r.worker, refused, sent = count, reason = %r.reason, "worker refused tasks");
            // A full worker is routine; any other refusal (a full disk, say) is worth
            // showing on the tasks that wait because of it.
            let only_full = r
                .reason
                .split("; ")
                .all(|why| why.starts_with(NO_FREE_SLOT));
            if !only_full && !r.reason.is_empty() {
                let reason = format!("waiting: worker {} refused it: {}", r.worker, r.reason);
                self.report_waiting_ids(waiting, reason);
            }
        }
    }

    /// Puts a refused task back in the queue, or ends a cancel that raced it; true when
    /// it went back.
    fn requeue_or_cancel(&mut self, p: Popped) -> bool {
        let id = p.task.spec.task_instance_id;
        if self.cancelled.remove(&id) {
            (self.engine)(Report::Cancelled { id });
            false
        } else {
            self.queue.requeue(p);
            true
        }
    }

    /// Hands out as many queued tasks as live workers have room for, each to the worker
    /// of its group with the most free capacity (weighted); tasks of a group without a
    /// live worker wait, and the engine is told why once.
    fn dispatch_pass(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        if !self.lease.gate.fresh() || *self.lease.lost.borrow() > self.checked {
            // Held until the lease is renewed and ownership re-checked; the tick retries.
            return;
        }
        let now = Instant::now();
        self.resting.retain(|_, until| *until > now);
        let live = self.workers.current();
        let mut batches: HashMap<String, Vec<Popped>> = HashMap::new();
        for group in self.queue.waiting_groups() {
            let members: Vec<&NodeInfo> =
                live.iter().filter(|w| w.groups.contains(&group)).collect();
            if members.is_empty() {
                self.report_waiting(&group);
                continue;
            }
            loop {
                let out = |addr: &str| {
                    let sent = self.outstanding.get(addr).map_or(0, HashSet::len);
                    let full = batches.get(addr).is_some_and(|b| b.len() >= MAX_BATCH);
                    (!self.resting.contains_key(addr) && !full).then_some(sent as u32)
                };
                let Some(w) = choose(&members, out) else {
                    break;
                };
                let Some(p) = self.queue.pop(&group) else {
                    break;
                };
                let id = p.task.spec.task_instance_id;
                self.outstanding
                    .entry(w.addr.clone())
                    .or_default()
                    .insert(id);
                self.in_flight.insert(id);
                batches.entry(w.addr.clone()).or_default().push(p);
            }
        }
        for (worker, sent) in batches {
            self.send(worker, sent);
        }
    }

    /// Tells the engine, once per task, that its group has no live worker.
    fn report_waiting(&mut self, group: &str) {
        let ids: Vec<i64> = self.queue.ids(group).collect();
        let reason = format!(
            "waiting: no live worker serves group '{group}'; start one with --groups {group}"
        );
        self.report_waiting_ids(ids, reason);
    }

    /// Tells the engine why tasks `ids` wait, once per task (until it is dispatched).
    fn report_waiting_ids(&mut self, ids: Vec<i64>, reason: String) {
        let new: Vec<i64> = ids
            .into_iter()
            .filter(|id| self.waiting_reported.insert(*id))
            .collect();
        if !new.is_empty() {
            (self.engine)(Report::Waiting { ids: new, reason });
        }
    }

    fn send(&self, worker: String, sent: Vec<Popped>) {
        let client = self.clients.worker(&worker);
        let results = self.results_tx.clone();
        let gate = self.lease.gate.clone();
        let tasks = sent.iter().map(|p| p.task.spec.clone()).collect();
        tokio::spawn(async move {
            let mut reason = String::new();
            let accepted = match client {
                // Checked again right before the call: a master frozen since the pass
                // must not send what another master may have queued again meanwhile
                // (workers fence what still slips through, see the Probe RPC).
                Ok(_) if !gate.fresh() => None,
                Ok(mut c) => match c
                    .dispatch(DispatchRequest {
                        tasks,
                        adopt_only: false,
                    })
                    .await
                {
                    Ok(resp) => {
                        let resp = resp.into_inner();
                        reason = resp.reason;
                        Some(resp.accepted.into_iter().collect())
                    }
                    Err(status) => {
                        warn!(%worker, error = %status, "dispatch to worker failed");
                        None
                    }
                },
                Err(e) => {
                    warn!(%worker, error = %e, "cannot reach worker");
                    None
                }
            };
            let _ = results.send(BatchResult {
                worker,
                sent,
                accepted,
                reason,
            });
        });
    }
}

/// The member with the most free slots, weighted by its weight (ties: the lowest address).
/// `out` gives the tasks this master has out on a worker, or None if it must not be
/// offered more now (resting, or its batch of this pass is full). A worker's free slots
/// are its slots less the larger of what this master has out there and what it reports
/// running (other masters' tasks included).
fn choose<'a>(members: &[&'a NodeInfo], out: impl Fn(&str) -> Option<u32>) -> Option<&'a NodeInfo> {
    members
        .iter()
        .filter_map(|w| {
            let free = w.slots.saturating_sub(out(&w.addr)?.max(w.running));
            Some((u64::from(free) * u64::from(w.weight.max(1)), *w))
        })
        .filter(|(score, _)| *score > 0)
        .max_by_key(|(score, w)| (*score, std::cmp::Reverse(w.addr.clone())))
        .map(|(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_common::registry::Role;

    fn worker(addr: &str, slots: u32, running: u32, weight: u32) -> NodeInfo {
        NodeInfo {
            role: Role::Worker,
            addr: addr.into(),
            groups: vec!["default".into()],
            slots,
            running,
            weight,
            started_at: 0,
            lapses: 0,
            overloaded: None,
        }
    }

    fn chosen(members: &[NodeInfo], out: impl Fn(&str) -> Option<u32>) -> Option<&str> {
        let refs: Vec<&NodeInfo> = members.iter().collect();
        choose(&refs, out).map(|w| w.addr.as_str())
    }

    #[test]
    fn the_worker_with_most_weighted_free_slots_is_chosen() {
        let ws = [worker("a", 4, 0, 100), worker("b", 8, 0, 100)];
        assert_eq!(chosen(&ws, |_| Some(0)), Some("b"), "more free slots");
        assert_eq!(
            chosen(&ws, |w| Some(if w == "b" { 6 } else { 0 })),
            Some("a"),
            "what this master has out there counts"
        );
        let ws = [worker("a", 4, 0, 300), worker("b", 8, 0, 100)];
        assert_eq!(chosen(&ws, |_| Some(0)), Some("a"), "4 x 300 beats 8 x 100");
    }

    #[test]
    fn running_tasks_of_other_masters_and_resting_workers_are_respected() {
        let ws = [worker("a", 4, 4, 100), worker("b", 2, 0, 100)];
        assert_eq!(
            chosen(&ws, |_| Some(0)),
            Some("b"),
            "a is full of others' tasks"
        );
        assert_eq!(
            chosen(&ws, |w| (w != "b").then_some(0)),
            None,
            "b rests and a is full: nobody"
        );
        let ws = [worker("b", 2, 0, 100), worker("a", 2, 0, 100)];
        assert_eq!(
            chosen(&ws, |_| Some(0)),
            Some("a"),
            "a tie goes to the lowest address"
        );
    }
}
