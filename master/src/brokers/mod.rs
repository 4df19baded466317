//! Broker triggers' consumers. The master that leads cron (the one master of a standalone)
//! runs one consumer per broker trigger of every online workflow's latest version: every
//! [`RECONCILE`] it reads those triggers and starts the consumers that are missing, stops
//! those whose trigger went (its workflow deleted, taken offline, or applied without it)
//! and restarts those whose workflow was applied again. A master that loses the lead
//! stops all of its own. For a moment after a change of leader two consumers of a trigger
//! may run; each message is taken once all the same (see [`shoal_store::MessageTaken`]).

mod amqp;
mod consumer;
mod message;
mod mqtt;
mod nats;

use consumer::Shared;
use message::Trigger;
use shoal_common::broker::BrokerKind;
use shoal_common::registry::Leadership;
use shoal_common::start::Params;
use shoal_common::types::CommandKind;
use shoal_store::{NewCommand, StoredDefinition};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// How often the triggers are read again (and the lead checked).
const RECONCILE: Duration = Duration::from_secs(2);

pub(crate) struct Brokers {
    shared: Arc<Shared>,
    leadership: Leadership,
}

/// A trigger, by project, workflow and name.
type Key = (String, String, String);

/// A running consumer: what it was started for, and how to stop it.
struct Running {
    version: i32,
    def: shoal_common::trigger::TriggerDef,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Brokers {
    pub(crate) fn new(
        store: shoal_store::Store,
        secrets: crate::secrets::Secrets,
        me: String,
        event_retention: Duration,
        leadership: Leadership,
    ) -> Brokers {
        let shared = Shared {
            store,
            secrets,
            me,
            event_retention,
        };
        Brokers {
            shared: Arc::new(shared),
            leadership,
        }
    }

    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut running: HashMap<Key, Running> = HashMap::new();
        loop {
            let wanted = match self.leadership.is_leader() {
                true => self.shared.store.broker_trigger_definitions().await,
                false => Ok(Vec::new()),
            };
            match wanted {
                Ok(defs) => self.reconcile(&mut running, defs).await,
                Err(e) => warn!(error = %e, "cannot read the broker triggers; trying again"),
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(RECONCILE) => {}
            }
        }
        for (_, r) in running {
            stop(r).await;
        }
    }

    /// Starts, stops and restarts consumers so that those of `defs` run.
    async fn reconcile(&self, running: &mut HashMap<Key, Running>, defs: Vec<StoredDefinition>) {
        let mut wanted: HashMap<Key, (i32, Arc<Trigger>)> = HashMap::new();
        for d in defs {
            for t in &d.definition.triggers {
                let Some(kind) = t.broker() else { continue };
                let key = (d.project.clone(), d.name.clone(), t.name.clone());
                let rule = match t.rule() {
                    Ok(rule) => rule,
                    // Compiled when the workflow was applied; a later version of the rule
                    // language may refuse it.
                    Err(e) => {
                        warn!(project = %d.project, workflow = %d.name, trigger = %t.name, error = %e, "trigger cannot run");
                        continue;
                    }
                };
                let trigger = Trigger {
                    kind,
                    project: d.project.clone(),
                    workflow: d.name.clone(),
                    version: d.version,
                    definition: d.definition.clone(),
                    def: t.clone(),
                    rule,
                    label: format!("{}/{}/{}", d.project, d.name, t.name),
                };
                wanted.insert(key, (d.version, Arc::new(trigger)));
            }
        }
        let gone: Vec<Key> = running
            .iter()
            .filter(|(key, r)| {
                wanted
                    .get(*key)
                    .is_none_or(|(version, t)| *version != r.version || t.def != r.def)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some(r) = running.remove(&key) {
                stop(r).await;
            }
        }
        for (key, (version, trigger)) in wanted {
            if running.contains_key(&key) {
                continue;
            }
            let stop = CancellationToken::new();
            let def = trigger.def.clone();
            let task = self.spawn(trigger, stop.clone());
            running.insert(
                key,
                Running {
                    version,
                    def,
                    stop,
                    task,
                },
            );
        }
    }

    fn spawn(&self, t: Arc<Trigger>, stop: CancellationToken) -> JoinHandle<()> {
        let shared = self.shared.clone();
        match t.kind {
            BrokerKind::Amqp => tokio::spawn(consumer::run::<amqp::Amqp>(shared, t, stop)),
            BrokerKind::Nats => tokio::spawn(consumer::run::<nats::Nats>(shared, t, stop)),
            BrokerKind::Mqtt => tokio::spawn(consumer::run::<mqtt::Mqtt>(shared, t, stop)),
        }
    }
}

/// Stops a consumer and waits until it has (its connection closed, its state forgotten).
async fn stop(r: Running) {
    r.stop.cancel();
    if let Err(e) = r.task.await {
        warn!(trigger = %r.def.name, error = %e, "a trigger consumer ended abnormally");
    }
}

/// The command that starts a run of `t`'s workflow with `params`.
fn start_command(t: &Trigger, params: Params) -> NewCommand {
    NewCommand {
        kind: CommandKind::Start,
        project: t.project.clone(),
        workflow: t.workflow.clone(),
        version: t.version,
        params,
        priority: None,
        workflow_instance_id: None,
        options: Default::default(),
        parent_task_id: None,
        schedule_time: None,
        due_at: None,
    }
}
