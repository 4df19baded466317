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

#[derive(Default)]
pub(super) struct Definitions {
    shared: HashMap<(String, String, i32), Weak<WorkflowDef>>,
    inserted: usize,
}

impl Definitions {
    /// `def` (version `version`), or an equal one a live run holds already.
    pub(super) fn share(&mut self, version: i32, def: WorkflowDef) -> Arc<WorkflowDef> {
        let key = (def.project.clone(), def.name.clone(), version);
        if let Some(shared) = self.shared.get(&key).and_then(Weak::upgrade)
            && *shared == def
        {
            return shared;
        }
        let def = Arc::new(def);
        self.shared.insert(key, Arc::downgrade(&def));
        self.inserted += 1;
        if self.inserted.is_multiple_of(PRUNE_EVERY) {
            self.shared.retain(|_, held| held.strong_count() > 0);
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
