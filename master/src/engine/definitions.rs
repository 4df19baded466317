//! Definitions shared by the runs of one workflow version. A run's runtime holds its
//! definition in an `Arc`; without sharing, every active run would hold a parsed copy of
//! its own (about 1.2 KiB per task: 10,000 waiting runs of a 100-task workflow, 1.2 GB).
//! Runs whose start options change the definition (failure strategy, worker group) share
//! only with equal ones; a foreach or do_while copies its run's on write (`Arc::make_mut`).

use shoal_common::definition::WorkflowDef;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// How often the map drops entries of versions no run holds any more.
const PRUNE_EVERY: usize = 1024;
/// Variants (start options that change the definition) kept per version.
const VARIANTS: usize = 4;

#[derive(Default)]
pub(super) struct Definitions {
    shared: HashMap<(String, String, i32), Vec<Weak<WorkflowDef>>>,
    inserted: usize,
}

impl Definitions {
    /// `def` (version `version`), or an equal one a live run holds already.
    pub(super) fn share(&mut self, version: i32, def: WorkflowDef) -> Arc<WorkflowDef> {
        let key = (def.project.clone(), def.name.clone(), version);
        let variants = self.shared.entry(key).or_default();
        if let Some(shared) = variants
            .iter()
            .filter_map(Weak::upgrade)
            .find(|d| **d == def)
        {
            return shared;
        }
        variants.retain(|held| held.strong_count() > 0);
        if variants.len() >= VARIANTS {
            variants.remove(0);
        }
        let def = Arc::new(def);
        variants.push(Arc::downgrade(&def));
        self.inserted += 1;
        if self.inserted.is_multiple_of(PRUNE_EVERY) {
            self.shared.retain(|_, variants| {
                variants.retain(|held| held.strong_count() > 0);
                !variants.is_empty()
            });
        }
        def
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(failure_strategy: &str) -> WorkflowDef {
        WorkflowDef::parse(&format!(
            "name: w\nfailure_strategy: {failure_strategy}\ntasks: [{{name: a, type: noop}}]"
        ))
        .unwrap()
    }

    #[test]
    fn equal_definitions_of_a_version_are_one_and_others_stay_apart() {
        let mut defs = Definitions::default();
        let a = defs.share(1, def("end"));
        let b = defs.share(1, def("end"));
        assert!(Arc::ptr_eq(&a, &b), "one copy for the runs of a version");
        let other_options = defs.share(1, def("continue"));
        assert!(!Arc::ptr_eq(&a, &other_options));
        assert_eq!(other_options.failure_strategy.to_string(), "continue");
        // Runs with either options keep sharing when they alternate.
        assert!(Arc::ptr_eq(&a, &defs.share(1, def("end"))));
        assert!(Arc::ptr_eq(&other_options, &defs.share(1, def("continue"))));
        let other_version = defs.share(2, def("end"));
        assert!(!Arc::ptr_eq(&a, &other_version));
        drop((a, b, other_options, other_version));
        let fresh = defs.share(1, def("end"));
        assert_eq!(
            Arc::strong_count(&fresh),
            1,
            "nothing kept once no run holds it"
        );
    }
}
