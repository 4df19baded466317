//! Claims commands and hands the instances they became to the engine; on its fallback
//! tick it also starts waiting serial runs that nothing woke (see `wake_stranded_runs`).
//! While the master is overloaded (see `crate::overload`) it claims nothing. Runs at a
//! later time (commands with `due_at`) are claimed when due: it sleeps until the earliest.

use crate::engine::EngineMsg;
use crate::environments::{self, Environments};
use crate::secrets::{self, Secrets};
use shoal_common::metrics;
use shoal_common::types::now_ms;
use shoal_store::Store;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error};

pub struct Intake {
    pub store: Store,
    pub(crate) secrets: Secrets,
    pub(crate) environments: Environments,
    pub owner: String,
    pub batch: usize,
    /// Fallback poll while no signal arrives; a signal can be lost when the listener
    /// reconnects.
    pub poll: Duration,
    /// Why the master claims no new commands now; None while it may.
    pub overloaded: watch::Receiver<Option<String>>,
}

impl Intake {
    pub async fn run(
        mut self,
        engine: mpsc::UnboundedSender<EngineMsg>,
        shutdown: CancellationToken,
    ) {
        let mut signal = match self.store.command_signal().await {
            Ok(s) => Some(s),
            Err(e) => {
                error!(error = %e, "cannot listen for commands; polling only");
                None
            }
        };
        let mut tick = tokio::time::interval(self.poll);
        // A timer to the earliest run at a later time, set again on every pass: a new
        // command's signal re-arms it for a sooner one.
        let mut due: Option<Pin<Box<Sleep>>> = None;
        loop {
            // Cancellation-safe: a signal or tick that loses the race only causes one more
            // claim pass, which is harmless.
            let ticked = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = async { signal.as_mut().expect("guarded").recv().await }, if signal.is_some() => false,
                _ = tick.tick() => true,
                // Recovered from an overload: claim what waited meanwhile.
                Ok(()) = self.overloaded.changed() => false,
                // A run at a later time became due.
                () = async { due.as_mut().expect("guarded").await }, if due.is_some() => false,
            };
            due = match self.store.next_due_at().await {
                Ok(Some(at)) => {
                    // Milliseconds are what the claim compares; one more never wakes early.
                    let wait = u64::try_from(at - now_ms() + 1).unwrap_or(0);
                    debug!(due_in_ms = wait, "next run at a later time");
                    Some(Box::pin(tokio::time::sleep(Duration::from_millis(wait))))
                }
                Ok(None) => None,
                Err(e) => {
                    error!(error = %e, "reading when the next command is due failed");
                    None
                }
            };
            if ticked {
                match self.store.wake_stranded_runs(&self.owner).await {
                    Ok(woken) if !woken.is_empty() => {
                        if engine.send(EngineMsg::Claimed(woken)).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => error!(error = %e, "waking waiting serial runs failed"),
                }
            }
            if self.overloaded.borrow_and_update().is_some() {
                continue;
            }
            // Drain: keep claiming while full batches come back.
            loop {
                match self.store.claim_batch(&self.owner, 1, self.batch).await {
                    Ok((claimed, taken)) => {
                        metrics::COMMANDS_CLAIMED.inc_by(taken as u64);
                        let full = taken == self.batch;
                        if !claimed.is_empty() {
                            debug!(count = claimed.len(), "commands claimed");
                            // A secret set just before the start is seen by the run.
                            if claimed.iter().any(|c| secrets::used_by(&c.definition)) {
                                self.secrets.refresh().await;
                            }
                            // And an environment.
                            let envs = |c: &shoal_store::ClaimedInstance| {
                                environments::used_by(&c.definition, &c.instance.options)
                            };
                            if claimed.iter().any(envs) {
                                self.environments.refresh().await;
                            }
                            if engine.send(EngineMsg::Claimed(claimed)).is_err() {
                                return;
                            }
                        }
                        if !full {
                            break;
                        }
                    }
                    Err(e) => {
                        error!(error = %e, "claiming commands failed");
                        if e.failure() == shoal_common::Failure::Unknown {
                            crate::engine::sweep_soon(&engine);
                        }
                        break;
                    }
                }
            }
        }
    }
}
