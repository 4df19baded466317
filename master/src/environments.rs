//! The project environments a master sends with shell and python tasks. Like the secrets
//! ([`crate::secrets`]) they are read from the store every
//! [`REFRESH`](crate::secrets::REFRESH), and before a claimed run that names one starts,
//! so building a task spec never waits on the database and a run sees an environment set
//! before it was started.

use crate::secrets::refresh_every;
use shoal_common::definition::WorkflowDef;
use shoal_common::start::StartOptions;
use shoal_store::Store;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use tokio_util::sync::CancellationToken;

/// Environment name → config, of one project.
type Configs = HashMap<String, Arc<str>>;

/// Project → environment name → config. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Environments {
    configs: Arc<RwLock<HashMap<String, Configs>>>,
    store: Store,
}

impl Environments {
    pub(crate) fn new(store: Store) -> Environments {
        Environments {
            configs: Arc::default(),
            store,
        }
    }

    /// The config of `project`'s environment `name`; None when it has none of that name.
    pub(crate) fn get(&self, project: &str, name: &str) -> Option<Arc<str>> {
        let all = self.configs.read().expect("environments lock");
        all.get(project)?.get(name).cloned()
    }

    /// Reads every environment.
    pub(crate) async fn refresh(&self) {
        let rows = match self.store.all_environments().await {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(%error, "cannot read the environments; keeping the last ones read");
                return;
            }
        };
        let mut all: HashMap<String, Configs> = HashMap::new();
        for e in rows {
            all.entry(e.project)
                .or_default()
                .insert(e.name, Arc::from(e.config));
        }
        *self.configs.write().expect("environments lock") = all;
    }

    /// Refreshes every [`REFRESH`](crate::secrets::REFRESH) until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        refresh_every(shutdown, || self.refresh()).await
    }
}

/// Whether a run of `def` started with `options` may use an environment.
pub(crate) fn used_by(def: &WorkflowDef, options: &StartOptions) -> bool {
    options.environment.is_some() || !def.environments().is_empty()
}
