//! Taking an instance over when a COMMIT's outcome can be lost: the take-over itself may
//! have landed unseen, and a retry then finds the epoch moved, by this master.

use shoal_common::{Failure, Result};
use shoal_store::{ClaimedInstance, Store};

/// Tries before giving up on an instance whose take-overs keep ending unknown.
const TRIES: usize = 8;

/// Makes `me` the driver of instance `id` if its epoch is still `epoch` (or moved on only
/// by an earlier take-over of `me` whose commit's answer was lost); None when another
/// master has it or it no longer needs a driver.
pub async fn take_over(
    store: &Store,
    id: i64,
    epoch: i64,
    me: &str,
) -> Result<Option<ClaimedInstance>> {
    let mut epoch = epoch;
    let mut last = None;
    for _ in 0..TRIES {
        match store.take_over(id, epoch, me).await {
            Ok(Some(claimed)) => return Ok(Some(claimed)),
            Ok(None) => {}
            Err(e) if e.failure() == Failure::Unknown => last = Some(e),
            Err(e) => return Err(e),
        }
        // Not taken, or not known to be: it is ours only if the store says so.
        let owned = store.owned_instances(me).await?;
        match owned.into_iter().find(|(i, _)| *i == id) {
            Some((_, now)) => epoch = now,
            None => return Ok(None),
        }
    }
    Err(last.unwrap_or_else(|| {
        shoal_common::Error::Invalid(format!("instance {id} could not be taken over"))
    }))
}
