//! A node's own count of its lease's lapses, kept on its local clock.
//!
//! etcd expires a lease a TTL after the last renewal it received, and that renewal was
//! sent no earlier than the last one this node saw accepted. So a node that counts its
//! lease lost [`FENCE`] of a TTL after it sent that renewal has done so before anyone can
//! have seen it leave, whether or not etcd answers meanwhile: a worker cut from etcd
//! (packets dropped, connections left open) kills its tasks before a master runs them
//! elsewhere.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// The share of its TTL a lease may go unrenewed before the node counts it lost; the
/// rest is the time a worker has to kill its tasks.
const FENCE: f64 = 0.9;

pub(super) struct LeaseClock {
    state: Mutex<Renewal>,
    fence: Duration,
    /// Lapses counted so far ([`super::Membership::lost`]).
    lost: watch::Sender<u64>,
    /// When the last renewal that etcd accepted was sent ([`super::LeaseGate`]).
    renewed: watch::Sender<Instant>,
}

struct Renewal {
    sent: Instant,
    /// Whether this renewal's lapse was counted already: one count per lapse.
    counted: bool,
}

impl LeaseClock {
    pub(super) fn new(ttl: Duration, lost: watch::Sender<u64>) -> Arc<LeaseClock> {
        let now = Instant::now();
        Arc::new(LeaseClock {
            state: Mutex::new(Renewal {
                sent: now,
                counted: false,
            }),
            fence: ttl.mul_f64(FENCE),
            lost,
            renewed: watch::Sender::new(now),
        })
    }

    pub(super) fn renewed(&self) -> watch::Receiver<Instant> {
        self.renewed.subscribe()
    }

    pub(super) fn lapses(&self) -> u64 {
        *self.lost.borrow()
    }

    /// A renewal sent at `sent` was accepted (or the node registered again under a new
    /// lease). A lapse that came due before it is counted first, so that work accepted
    /// under the new lease is never mistaken for work of the lapsed one.
    pub(super) fn renewed_at(&self, sent: Instant) {
        self.count_if_due();
        let mut state = self.state.lock().expect("lease clock lock");
        *state = Renewal {
            sent,
            counted: false,
        };
        self.renewed.send_replace(sent);
    }

    /// Counts the lapse when the lease has gone unrenewed past the fence.
    fn count_if_due(&self) -> bool {
        let mut state = self.state.lock().expect("lease clock lock");
        if state.counted || state.sent.elapsed() < self.fence {
            return false;
        }
        state.counted = true;
        warn!(
            unrenewed_ms = state.sent.elapsed().as_millis() as u64,
            "registry lease not renewed in time: counted as lost before etcd can expire it"
        );
        self.lost.send_modify(|n| *n += 1);
        true
    }

    /// When the current renewal's lapse comes due, unless it was counted.
    fn due(&self) -> Option<Instant> {
        let state = self.state.lock().expect("lease clock lock");
        (!state.counted).then(|| state.sent + self.fence)
    }

    /// Counts each lapse when it comes due, until `shutdown`; it runs beside the renewals,
    /// which may be stuck waiting on etcd.
    pub(super) async fn fence(self: Arc<Self>, shutdown: CancellationToken) {
        let mut renewed = self.renewed();
        loop {
            let due = self.due();
            // All arms are cancellation-safe: a token, a sleep and a watch change.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = async { tokio::time::sleep_until(due.unwrap_or_else(Instant::now)).await },
                    if due.is_some() => {
                    self.count_if_due();
                }
                r = renewed.changed() => if r.is_err() { break },
            }
        }
    }
}
