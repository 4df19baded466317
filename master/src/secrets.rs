//! The project secrets a master expands in tasks (`${secret.NAME}`, and a sql task's
//! `datasource` named like a secret). They are read from the store and opened with the
//! master's key every [`REFRESH`], and before a claimed run that uses secrets starts, so
//! building a task spec never waits on the database and a run sees a secret set before
//! it was started.

use shoal_common::definition::WorkflowDef;
use shoal_common::secret_key::SecretKey;
use shoal_store::Store;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the secrets are read again.
pub(crate) const REFRESH: Duration = Duration::from_secs(2);

/// A secret's value, or why this master cannot give it.
pub(crate) type Opened = Result<String, String>;

/// Project → secret name → value. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Secrets {
    opened: Arc<RwLock<HashMap<String, HashMap<String, Opened>>>>,
    store: Store,
    key: Option<SecretKey>,
}

impl Secrets {
    pub(crate) fn new(store: Store, key: Option<SecretKey>) -> Secrets {
        Secrets {
            opened: Arc::default(),
            store,
            key,
        }
    }

    /// The secret `name` of `project`; None when the project has none of that name.
    pub(crate) fn get(&self, project: &str, name: &str) -> Option<Opened> {
        let all = self.opened.read().expect("secrets lock");
        all.get(project)?.get(name).cloned()
    }

    /// Seals `value` (which holds an opened secret) under `context` with this master's
    /// key, which it has whenever it opened a secret.
    pub(crate) fn seal(&self, context: &str, value: &str) -> Result<String, String> {
        let key = self
            .key
            .as_ref()
            .ok_or("this master has no secret key to seal with")?;
        key.seal(context, value)
    }

    /// Whether `project` has any secret (most have none: their tasks skip the lookup).
    pub(crate) fn any(&self, project: &str) -> bool {
        let all = self.opened.read().expect("secrets lock");
        all.get(project).is_some_and(|s| !s.is_empty())
    }

    /// Reads every secret and opens it with the key.
    pub(crate) async fn refresh(&self) {
        let sealed = match self.store.sealed_secrets().await {
            Ok(sealed) => sealed,
            Err(error) => {
                tracing::warn!(%error, "cannot read the secrets; keeping the last ones read");
                return;
            }
        };
        let mut all: HashMap<String, HashMap<String, Opened>> = HashMap::new();
        for s in sealed {
            let context = format!("{}/{}", s.project, s.name);
            let opened = match &self.key {
                Some(key) => key.open(&context, &s.sealed),
                None => Err(format!(
                    "this master has no secret key to decrypt secret {context}: start it with SHOAL_SECRET_KEY, the api-server's"
                )),
            };
            all.entry(s.project).or_default().insert(s.name, opened);
        }
        *self.opened.write().expect("secrets lock") = all;
    }

    /// Refreshes every [`REFRESH`] until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        refresh_every(shutdown, || self.refresh()).await
    }
}

/// Runs `refresh` now and then every [`REFRESH`] until `shutdown`.
pub(crate) async fn refresh_every<F: Future<Output = ()>>(
    shutdown: CancellationToken,
    mut refresh: impl FnMut() -> F,
) {
    loop {
        refresh().await;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(REFRESH) => {}
        }
    }
}

/// Whether a run of `def` may need a secret: a task names one, or runs sql (whose
/// datasource may be one).
pub(crate) fn used_by(def: &WorkflowDef) -> bool {
    def.tasks
        .iter()
        .any(|t| t.sql.is_some() || t.texts().any(|text| text.contains("${secret.")))
}

/// The names `text` refers to as `${secret.NAME}`.
pub(crate) fn referenced(text: &str) -> impl Iterator<Item = &str> {
    text.split("${secret.")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_found_in_text() {
        let names: Vec<&str> =
            referenced("curl -H 'x: ${secret.api_key}' ${url} ${secret.b} ${secret.open").collect();
        assert_eq!(names, ["api_key", "b"]);
        assert_eq!(referenced("echo ${dt}").count(), 0);
    }
}
