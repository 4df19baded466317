//! The worker's side of failover fencing: the newest owner epoch it has seen for each
//! workflow instance.
//!
//! A master that takes an instance over raises the epoch here (with its probe) before it
//! queues an attempt again; a dispatch with an older epoch (a call its frozen previous
//! owner had under way) is then refused, so that attempt cannot start twice.

use std::collections::{HashMap, VecDeque};

/// Instances remembered; the oldest are forgotten beyond this.
const MEMORY: usize = 100_000;

#[derive(Default)]
pub(super) struct Fences {
    epochs: HashMap<i64, i64>,
    /// First-seen order of `epochs`, oldest first.
    order: VecDeque<i64>,
}

impl Fences {
    /// Records that `epoch` owns `instance`; false if a newer owner is already known, in
    /// which case nothing changes.
    pub(super) fn admit(&mut self, instance: i64, epoch: i64) -> bool {
        match self.epochs.get_mut(&instance) {
            Some(newest) if epoch < *newest => false,
            Some(newest) => {
                *newest = epoch;
                true
            }
            None => {
                self.epochs.insert(instance, epoch);
                self.order.push_back(instance);
                if self.order.len() > MEMORY
                    && let Some(old) = self.order.pop_front()
                {
                    self.epochs.remove(&old);
                }
                true
            }
        }
    }

    /// The newest epoch known for `instance`.
    pub(super) fn newest(&self, instance: i64) -> Option<i64> {
        self.epochs.get(&instance).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_epoch_is_refused_once_a_newer_one_was_seen() {
        let mut f = Fences::default();
        assert!(f.admit(7, 1));
        assert!(f.admit(7, 2));
        assert!(!f.admit(7, 1), "the old owner is fenced out");
        assert!(f.admit(7, 2), "the current owner may send again");
        assert!(f.admit(8, 1), "other instances are independent");
        assert_eq!(f.newest(7), Some(2));
    }
}
