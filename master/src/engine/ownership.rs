//! Which of the instances this master took on are no longer (surely) its own: lost to
//! another master (its writes were fenced), or being reloaded after a commit whose
//! outcome is unknown. A worker's events of such an instance are not acknowledged, so
//! the worker keeps them for whoever drives the instance next.

use std::collections::HashSet;

#[derive(Default)]
pub(super) struct Ownership {
    /// Instances another master took over from this one (its writes were fenced).
    lost: HashSet<i64>,
    /// Instances whose last commit had an unknown outcome, being reloaded from the store.
    reloading: HashSet<i64>,
    /// Owned instances the last reconciler sweep found not driven here.
    unattended: HashSet<i64>,
}

impl Ownership {
    /// The instance is driven here (again): claimed, taken over or reloaded.
    pub fn taken(&mut self, instance: i64) {
        self.reloading.remove(&instance);
        self.lost.remove(&instance);
    }

    /// Another master took these instances over.
    pub fn fenced(&mut self, instances: &[i64]) {
        self.lost.extend(instances);
    }

    /// These instances' last writes may or may not have landed: they are reloaded.
    pub fn reloading(&mut self, instances: &[i64]) {
        self.reloading.extend(instances);
    }

    /// A reloaded instance had moved on: another master has it, or it ended.
    pub fn not_reloaded(&mut self, instance: i64) {
        self.reloading.remove(&instance);
        self.lost.insert(instance);
    }

    pub fn is_lost(&self, instance: i64) -> bool {
        self.lost.contains(&instance)
    }

    pub fn is_reloading(&self, instance: i64) -> bool {
        self.reloading.contains(&instance)
    }

    /// Whether the workers' events of `instance` are this master's to acknowledge.
    pub fn answers_for(&self, instance: i64) -> bool {
        !self.is_lost(instance) && !self.is_reloading(instance)
    }

    /// Of the owned instances the store listed, those not driven here (`driven`) now and
    /// not at the previous sweep either (a claim may be on its way in between).
    pub fn unattended(
        &mut self,
        owned: Vec<(i64, i64)>,
        driven: impl Fn(i64) -> bool,
    ) -> Vec<(i64, i64)> {
        let idle: HashSet<i64> = owned
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !driven(*id) && !self.lost.contains(id))
            .collect();
        let again = owned
            .into_iter()
            .filter(|(id, _)| idle.contains(id) && self.unattended.contains(id))
            .collect();
        self.unattended = idle;
        again
    }
}
