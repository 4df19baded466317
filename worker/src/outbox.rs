//! The event outbox: task events wait here, per owning master, until that master acks them.
//!
//! Every event gets a worker-wide, monotonically increasing `seq` and joins the queue of its
//! master address. One sender loop per master address delivers the queue:
//!
//! * it wakes on a [`Notify`] when an event is pushed (no polling, no per-event sleeps);
//! * it sends everything due, in seq order, in one `ReportEvents` call of up to
//!   [`MAX_BATCH_EVENTS`] events / [`MAX_BATCH_BYTES`] bytes;
//! * exactly one call is in flight per master, so events pushed meanwhile accumulate into
//!   the next batch and a master sees the events of one task in order;
//! * acked seqs are dropped; seqs the master answered without acking are retried after a
//!   per-event backoff; when the call itself fails (master down) the whole loop backs off
//!   (50 ms doubling to 2 s) and resends the batch.
//!
//! Each master address has one lazily connected tonic `Channel` (TCP_NODELAY), reused for
//! every call.
//!
//! Terminal events are also in the [`Journal`] (written before they are pushed here); an
//! ack, or a discard, marks them done there.

use shoal_common::cluster_secret::{ClusterSecret, PeerChannel};
use shoal_common::metrics::WORKER_EVENTS_UNACKED;
use shoal_common::proto::master_client::MasterClient;
use shoal_common::proto::{ReportEventsRequest, TaskEvent};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::journal::Journal;
use crate::{Error, Result};

/// Most events in one `ReportEvents` call.
pub(crate) const MAX_BATCH_EVENTS: usize = 1000;
/// Rough cap of one call's encoded size, far below gRPC's default 4 MiB message limit.
pub(crate) const MAX_BATCH_BYTES: usize = 2 * 1024 * 1024;
const BACKOFF_START: Duration = Duration::from_millis(50);
const BACKOFF_CAP: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A master that does not answer a call in this time is treated as down for that call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Delay before retry number `attempt` (1-based): 50 ms doubling, capped at 2 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(16);
    BACKOFF_START.saturating_mul(factor).min(BACKOFF_CAP)
}

/// Handle to the outbox; cheap to clone.
#[derive(Clone)]
pub(crate) struct Outbox {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// Carried by every call to a master.
    secret: ClusterSecret,
    queues: Mutex<HashMap<String, Arc<Queue>>>,
    loops: Mutex<Vec<JoinHandle<()>>>,
    stop: CancellationToken,
}

/// What the sender loops share with the outbox (kept apart so loops do not own `Inner`).
struct Shared {
    worker_addr: String,
    next_seq: AtomicU64,
    /// Events not yet acked, over all masters.
    pending: AtomicUsize,
    /// Signalled when `pending` drops to zero.
    drained: Notify,
    /// Where terminal events are kept until acked (none in tests of the outbox alone).
    journal: Option<Journal>,
}

/// The events waiting for one master.
struct Queue {
    master: String,
    state: Mutex<QueueState>,
    wake: Notify,
}

#[derive(Default)]
struct QueueState {
    pending: BTreeMap<u64, Pending>,
}

struct Pending {
    event: TaskEvent,
    /// Times the master answered without acking this event.
    refusals: u32,
    /// Not sent again before this instant (set after a refusal).
    not_before: Option<Instant>,
}

impl QueueState {
    /// The due events in seq order, up to the batch limits, and the earliest instant at
    /// which a not-yet-due event becomes due.
    fn take_batch(
        &self,
        now: Instant,
        max_events: usize,
        max_bytes: usize,
    ) -> (Vec<TaskEvent>, Option<Instant>) {
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        let mut next_due: Option<Instant> = None;
        for p in self.pending.values() {
            if let Some(t) = p.not_before
                && t > now
            {
                next_due = Some(next_due.map_or(t, |d| d.min(t)));
                continue;
            }
            let size = prost::Message::encoded_len(&p.event) + 8;
            if batch.len() == max_events || (!batch.is_empty() && bytes + size > max_bytes) {
                break;
            }
            bytes += size;
            batch.push(p.event.clone());
        }
        (batch, next_due)
    }

    /// Drops the acked seqs and schedules a retry for the sent-but-unacked ones. Returns
    /// (the removed events, how many were refused).
    fn apply_acks(&mut self, sent: &[u64], acked: &[u64], now: Instant) -> (Vec<TaskEvent>, usize) {
        let acked: HashSet<u64> = acked.iter().copied().collect();
        let mut removed = Vec::new();
        let mut refused = 0;
        for seq in sent {
            if acked.contains(seq) {
                removed.extend(self.pending.remove(seq).map(|p| p.event));
            } else if let Some(p) = self.pending.get_mut(seq) {
                p.refusals += 1;
                p.not_before = Some(now + backoff(p.refusals));
                refused += 1;
            }
        }
        (removed, refused)
    }
}

/// Whether an event ends its attempt (and so is in the journal).
fn terminal(event: &TaskEvent) -> bool {
    use shoal_common::proto::TaskEventKind as K;
    matches!(
        K::try_from(event.kind),
        Ok(K::Success | K::Failure | K::Killed)
    )
}

impl Shared {
    /// Marks these events done in the journal.
    fn settled<'a>(&self, events: impl IntoIterator<Item = &'a TaskEvent>) {
        if let Some(journal) = &self.journal {
            for e in events.into_iter().filter(|e| terminal(e)) {
                journal.acked(e.task_instance_id, e.attempt);
            }
        }
    }
}

impl Outbox {
    pub(crate) fn new(
        worker_addr: String,
        secret: ClusterSecret,
        journal: Option<Journal>,
    ) -> Self {
        Outbox {
            inner: Arc::new(Inner {
                secret,
                shared: Arc::new(Shared {
                    worker_addr,
                    next_seq: AtomicU64::new(1),
                    pending: AtomicUsize::new(0),
                    drained: Notify::new(),
                    journal,
                }),
                queues: Mutex::new(HashMap::new()),
                loops: Mutex::new(Vec::new()),
                stop: CancellationToken::new(),
            }),
        }
    }

    /// Makes sure a queue and a sender loop exist for `master`; fails if the address cannot
    /// be turned into a gRPC endpoint.
    pub(crate) fn ensure(&self, master: &str) -> Result<()> {
        self.queue(master).map(|_| ())
    }

    fn queue(&self, master: &str) -> Result<Arc<Queue>> {
        let mut queues = self.inner.queues.lock().expect("outbox lock");
        if let Some(q) = queues.get(master) {
            return Ok(q.clone());
        }
        let client = connect_lazy(master, &self.inner.secret)?;
        let queue = Arc::new(Queue {
            master: master.to_string(),
            state: Mutex::new(QueueState::default()),
            wake: Notify::new(),
        });
        queues.insert(master.to_string(), queue.clone());
        let handle = tokio::spawn(sender_loop(
            self.inner.shared.clone(),
            queue.clone(),
            client,
            self.inner.stop.clone(),
        ));
        self.inner.loops.lock().expect("outbox lock").push(handle);
        debug!(master, "outbox queue created");
        Ok(queue)
    }

    /// Writes a terminal event to the journal (before it is pushed) for the master
    /// `master` of owner epoch `epoch`.
    pub(crate) fn keep(&self, master: &str, epoch: i64, event: &TaskEvent) {
        if let Some(journal) = &self.inner.shared.journal {
            journal.finished(master, epoch, event);
        }
    }

    /// Assigns the next seq to `event` and queues it for `master`. Returns the seq.
    pub(crate) fn push(&self, master: &str, mut event: TaskEvent) -> Result<u64> {
        let queue = self.queue(master)?;
        let seq = {
            let mut state = queue.state.lock().expect("outbox lock");
            // Taken under the queue lock so that a queue's seqs are inserted in order and a
            // batch never skips over a seq that is about to be inserted.
            let seq = self.inner.shared.next_seq.fetch_add(1, Ordering::Relaxed);
            event.seq = seq;
            state.pending.insert(
                seq,
                Pending {
                    event,
                    refusals: 0,
                    not_before: None,
                },
            );
            self.inner.shared.pending.fetch_add(1, Ordering::SeqCst);
            WORKER_EVENTS_UNACKED.inc();
            seq
        };
        queue.wake.notify_one();
        Ok(seq)
    }

    /// Moves the unacked events of one task attempt to `master` (the task's new owner after
    /// a failover). Events keep their seqs.
    pub(crate) fn reroute(&self, task_instance_id: i64, attempt: i32, master: &str) -> Result<()> {
        let target = self.queue(master)?;
        let others: Vec<Arc<Queue>> = {
            let queues = self.inner.queues.lock().expect("outbox lock");
            queues
                .values()
                .filter(|q| q.master != master)
                .cloned()
                .collect()
        };
        let mut moved = Vec::new();
        for q in others {
            let mut state = q.state.lock().expect("outbox lock");
            let seqs: Vec<u64> = state
                .pending
                .iter()
                .filter(|(_, p)| {
                    p.event.task_instance_id == task_instance_id && p.event.attempt == attempt
                })
                .map(|(seq, _)| *seq)
                .collect();
            moved.extend(
                seqs.into_iter()
                    .filter_map(|seq| state.pending.remove_entry(&seq)),
            );
        }
        if moved.is_empty() {
            return Ok(());
        }
        debug!(
            task_instance_id,
            attempt,
            master,
            events = moved.len(),
            "events rerouted"
        );
        let mut state = target.state.lock().expect("outbox lock");
        for (seq, mut p) in moved {
            p.not_before = None;
            p.refusals = 0;
            state.pending.insert(seq, p);
        }
        drop(state);
        target.wake.notify_one();
        Ok(())
    }

    /// Drops the unacked events of one task attempt (an attempt the worker abandoned, whose
    /// events no master wants any more). Returns how many were dropped. An event already in
    /// a call may still arrive; its master ignores it as stale.
    pub(crate) fn discard(&self, task_instance_id: i64, attempt: i32) -> usize {
        let queues: Vec<Arc<Queue>> = {
            let queues = self.inner.queues.lock().expect("outbox lock");
            queues.values().cloned().collect()
        };
        let mut dropped = 0;
        for q in queues {
            let mut state = q.state.lock().expect("outbox lock");
            let before = state.pending.len();
            state.pending.retain(|_, p| {
                p.event.task_instance_id != task_instance_id || p.event.attempt != attempt
            });
            dropped += before - state.pending.len();
        }
        // Nobody wants them any more: not after a restart either.
        if let Some(journal) = &self.inner.shared.journal {
            journal.acked(task_instance_id, attempt);
        }
        if dropped > 0 {
            WORKER_EVENTS_UNACKED.dec_by(dropped as i64);
            if self
                .inner
                .shared
                .pending
                .fetch_sub(dropped, Ordering::SeqCst)
                == dropped
            {
                self.inner.shared.drained.notify_waiters();
            }
            debug!(task_instance_id, attempt, dropped, "events discarded");
        }
        dropped
    }

    /// Events not yet acked, over all masters.
    pub(crate) fn pending(&self) -> usize {
        self.inner.shared.pending.load(Ordering::SeqCst)
    }

    /// Waits until every event is acked or `wait` has passed; true when drained.
    pub(crate) async fn flush(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            let drained = self.inner.shared.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so a drain between check and await is not missed.
            drained.as_mut().enable();
            if self.pending() == 0 {
                return true;
            }
            tokio::select! {
                _ = drained => {}
                _ = tokio::time::sleep_until(deadline) => return self.pending() == 0,
            }
        }
    }

    /// Stops the sender loops; unacked events are dropped.
    pub(crate) async fn stop(&self) {
        self.inner.stop.cancel();
        let loops = std::mem::take(&mut *self.inner.loops.lock().expect("outbox lock"));
        for handle in loops {
            if let Err(e) = handle.await {
                warn!(error = %e, "outbox sender loop failed");
            }
        }
        // What is left stays in the journal for the next start on this data dir.
        if let Some(journal) = &self.inner.shared.journal {
            journal.flush().await;
        }
        // The loops are gone, so nothing acks any more: what is left is dropped, and leaves
        // the process-wide gauge (other workers of the process keep their share).
        let dropped = self.inner.shared.pending.swap(0, Ordering::SeqCst);
        WORKER_EVENTS_UNACKED.dec_by(dropped as i64);
    }
}

fn connect_lazy(master: &str, secret: &ClusterSecret) -> Result<MasterClient<PeerChannel>> {
    let bad = |reason: String| Error::MasterAddr {
        addr: master.to_string(),
        reason,
    };
    if master.is_empty() {
        return Err(bad("empty".into()));
    }
    let endpoint = secret
        .endpoint(master)
        .map_err(bad)?
        .tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(CALL_TIMEOUT);
    Ok(MasterClient::new(
        secret.channel(master, endpoint.connect_lazy()),
    ))
}

/// Delivers one master's queue until `stop` is cancelled.
async fn sender_loop(
    shared: Arc<Shared>,
    queue: Arc<Queue>,
    mut client: MasterClient<PeerChannel>,
    stop: CancellationToken,
) {
    let master = queue.master.as_str();
    let mut failures: u32 = 0;
    loop {
        let (batch, next_due) = {
            let state = queue.state.lock().expect("outbox lock");
            state.take_batch(Instant::now(), MAX_BATCH_EVENTS, MAX_BATCH_BYTES)
        };
        if batch.is_empty() {
            // Cancellation-safe: `cancelled`, `notified` and `sleep_until` hold no data. A
            // push while we are not waiting leaves a Notify permit, so it is never missed.
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = queue.wake.notified() => {}
                _ = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {}
            }
            continue;
        }

        let sent: Vec<u64> = batch.iter().map(|e| e.seq).collect();
        let request = ReportEventsRequest {
            worker: shared.worker_addr.clone(),
            events: batch,
        };
        // Dropping the call on stop loses nothing: the events stay pending until acked.
        let result = tokio::select! {
            _ = stop.cancelled() => break,
            r = client.report_events(request) => r,
        };
        match result {
            Ok(response) => {
                failures = 0;
                let acked = response.into_inner().acked;
                let (removed, refused) = {
                    let mut state = queue.state.lock().expect("outbox lock");
                    state.apply_acks(&sent, &acked, Instant::now())
                };
                shared.settled(&removed);
                let removed = removed.len();
                WORKER_EVENTS_UNACKED.dec_by(removed as i64);
                if removed > 0 && shared.pending.fetch_sub(removed, Ordering::SeqCst) == removed {
                    shared.drained.notify_waiters();
                }
                if refused > 0 {
                    warn!(
                        master,
                        sent = sent.len(),
                        refused,
                        "master did not ack some events; retrying them later"
                    );
                } else {
                    debug!(master, sent = sent.len(), "events acked");
                }
            }
            Err(status) => {
                failures += 1;
                let delay = backoff(failures);
                warn!(master, code = ?status.code(), error = %status.message(), events = sent.len(), retry_in = ?delay, "cannot report events to master");
                // Cancellation-safe: nothing is held across the sleep.
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
    debug!(master, "outbox sender loop stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_common::proto::TaskEventKind;

    fn event(seq: u64, task: i64) -> Pending {
        Pending {
            event: TaskEvent {
                seq,
                task_instance_id: task,
                attempt: 1,
                kind: TaskEventKind::Running as i32,
                ..Default::default()
            },
            refusals: 0,
            not_before: None,
        }
    }

    #[test]
    fn backoff_doubles_from_50ms_up_to_2s() {
        let delays: Vec<u64> = (1..=8).map(|a| backoff(a).as_millis() as u64).collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
    }

    #[test]
    fn batches_follow_seq_order_and_limits() {
        let mut state = QueueState::default();
        for seq in [3, 1, 2, 5, 4] {
            state.pending.insert(seq, event(seq, 10));
        }
        let now = Instant::now();
        let (batch, next) = state.take_batch(now, 3, usize::MAX);
        assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(next, None);
        // A byte budget smaller than one event still sends one event.
        let (batch, _) = state.take_batch(now, 100, 1);
        assert_eq!(batch.len(), 1);
    }

    #[test]
    fn acked_events_leave_and_refused_ones_wait() {
        let mut state = QueueState::default();
        for seq in 1..=4 {
            state.pending.insert(seq, event(seq, seq as i64));
        }
        let now = Instant::now();
        let (batch, _) = state.take_batch(now, 100, usize::MAX);
        let sent: Vec<u64> = batch.iter().map(|e| e.seq).collect();
        // The master acks 1 and 3 (and an unknown seq, which is ignored).
        let (removed, refused) = state.apply_acks(&sent, &[1, 3, 99], now);
        assert_eq!((removed.len(), refused), (2, 2));
        assert_eq!(state.pending.keys().copied().collect::<Vec<_>>(), [2, 4]);

        // The refused ones are not due right away; a new event is.
        state.pending.insert(5, event(5, 5));
        let (batch, next) = state.take_batch(now, 100, usize::MAX);
        assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [5]);
        assert_eq!(next, Some(now + backoff(1)));

        // Once their backoff has passed they are sent again, in seq order.
        let later = now + backoff(1);
        let (batch, next) = state.take_batch(later, 100, usize::MAX);
        assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 4, 5]);
        assert_eq!(next, None);
    }

    #[tokio::test]
    async fn seqs_increase_across_masters_and_reroute_keeps_them() {
        let _metrics = crate::tests::METRICS_LOCK.lock().await;
        let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
        // Nothing listens on these ports; the sender loops just retry in the background.
        let a = outbox.push("127.0.0.1:9", event(0, 7).event).unwrap();
        let b = outbox.push("127.0.0.1:10", event(0, 8).event).unwrap();
        let c = outbox.push("127.0.0.1:9", event(0, 8).event).unwrap();
        assert!(a < b && b < c);
        assert_eq!(outbox.pending(), 3);

        outbox.reroute(8, 1, "127.0.0.1:11").unwrap();
        let seqs = |m: &str| {
            let queue = outbox.inner.queues.lock().unwrap()[m].clone();
            queue
                .state
                .lock()
                .unwrap()
                .pending
                .keys()
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(seqs("127.0.0.1:9"), [a]);
        assert!(seqs("127.0.0.1:10").is_empty());
        assert_eq!(seqs("127.0.0.1:11"), [b, c]);
        assert_eq!(outbox.pending(), 3);
        assert!(!outbox.flush(Duration::from_millis(10)).await);
        outbox.stop().await;
    }

    #[tokio::test]
    async fn discard_drops_one_attempt_everywhere_and_can_drain() {
        let _metrics = crate::tests::METRICS_LOCK.lock().await;
        let base = WORKER_EVENTS_UNACKED.get();
        let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
        // Nothing listens on these ports: the events stay until discarded.
        outbox.push("127.0.0.1:9", event(0, 7).event).unwrap();
        outbox.push("127.0.0.1:10", event(0, 7).event).unwrap();
        let mut other_attempt = event(0, 7).event;
        other_attempt.attempt = 2;
        outbox.push("127.0.0.1:9", other_attempt).unwrap();
        outbox.push("127.0.0.1:9", event(0, 8).event).unwrap();
        assert_eq!(outbox.pending(), 4);

        assert_eq!(outbox.discard(7, 1), 2);
        assert_eq!(outbox.discard(7, 1), 0);
        assert_eq!(outbox.pending(), 2);
        assert_eq!(WORKER_EVENTS_UNACKED.get(), base + 2);

        // Discarding the last ones wakes a flush: nothing is left to deliver.
        let flush = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.flush(Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        assert_eq!(outbox.discard(7, 2) + outbox.discard(8, 1), 2);
        assert!(flush.await.unwrap(), "flush sees the outbox drained");
        assert_eq!(WORKER_EVENTS_UNACKED.get(), base);
        outbox.stop().await;
    }

    /// A master that acks every event.
    struct AckAll;

    #[tonic::async_trait]
    impl shoal_common::proto::master_server::Master for AckAll {
        async fn report_events(
            &self,
            request: tonic::Request<ReportEventsRequest>,
        ) -> Result<tonic::Response<shoal_common::proto::ReportEventsResponse>, tonic::Status>
        {
            let acked = request.into_inner().events.iter().map(|e| e.seq).collect();
            Ok(tonic::Response::new(
                shoal_common::proto::ReportEventsResponse { acked },
            ))
        }

        async fn control(
            &self,
            _: tonic::Request<shoal_common::proto::ControlRequest>,
        ) -> Result<tonic::Response<shoal_common::proto::ControlResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("not used"))
        }
    }

    #[tokio::test]
    async fn the_unacked_gauge_follows_pushes_acks_and_drops() {
        let _metrics = crate::tests::METRICS_LOCK.lock().await;
        let base = WORKER_EVENTS_UNACKED.get();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let master = listener.local_addr().unwrap().to_string();
        let stop_master = CancellationToken::new();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(shoal_common::proto::master_server::MasterServer::new(
                    AckAll,
                ))
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    stop_master.clone().cancelled_owned(),
                ),
        );

        let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
        for task in 1..=3 {
            outbox.push(&master, event(0, task).event).unwrap();
        }
        assert!(outbox.flush(Duration::from_secs(10)).await, "acked");
        assert_eq!(WORKER_EVENTS_UNACKED.get(), base);

        // Nothing listens on port 9: these stay unacked until the outbox stops.
        outbox.push("127.0.0.1:9", event(0, 4).event).unwrap();
        outbox.push("127.0.0.1:9", event(0, 5).event).unwrap();
        assert_eq!(WORKER_EVENTS_UNACKED.get(), base + 2);
        outbox.stop().await;
        assert_eq!(WORKER_EVENTS_UNACKED.get(), base);
        stop_master.cancel();
    }

    #[tokio::test]
    async fn bad_master_addresses_are_refused() {
        assert!(connect_lazy("", &ClusterSecret::default()).is_err());
        assert!(connect_lazy("not a host:1", &ClusterSecret::default()).is_err());
    }
}
