//! Wakes waiting polls when external tasks are offered: one listener per api-server (a
//! Postgres LISTEN, or standalone's in-process signal) counts offers into a watch channel
//! every poll subscribes to.

use shoal_store::Store;
use std::time::Duration;
use tokio::sync::{OnceCell, watch};
use tokio_util::sync::CancellationToken;

/// The offers seen, counted; started by the first poll.
#[derive(Default)]
pub(crate) struct Offers {
    seen: OnceCell<watch::Receiver<u64>>,
}

impl Offers {
    /// A receiver whose value changes when tasks may have been offered.
    pub(crate) async fn receiver(
        &self,
        store: &Store,
        shutdown: &CancellationToken,
    ) -> watch::Receiver<u64> {
        let start = || async {
            let (tx, rx) = watch::channel(0);
            tokio::spawn(listen(store.clone(), tx, shutdown.clone()));
            rx
        };
        self.seen.get_or_init(start).await.clone()
    }
}

async fn listen(store: Store, offers: watch::Sender<u64>, shutdown: CancellationToken) {
    loop {
        let mut signal = match store.external_signal().await {
            Ok(signal) => signal,
            Err(error) => {
                // Polls still look every second; try again.
                tracing::warn!(%error, "cannot listen for external task offers");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = shutdown.cancelled() => return,
                }
            }
        };
        loop {
            tokio::select! {
                _ = signal.recv() => offers.send_modify(|n| *n = n.wrapping_add(1)),
                _ = shutdown.cancelled() => return,
            }
        }
    }
}
