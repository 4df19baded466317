//! Tasks that wait for something else: a sub_workflow task for its child run to end, a
//! dependent task for another workflow's success on the run's date, a task of a task
//! group for a slot, a wait or callback task for its completion. One cheap poll of the
//! store every half second covers all of them, and only while any wait.

use super::EngineMsg;
use shoal_common::definition::TIMED_OUT;
use shoal_common::start::Params;
use shoal_common::store::{ChildState, SlotGrants, Store, TaskInstanceRow};
use shoal_common::types::{TaskState, now_ms};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

const POLL: Duration = Duration::from_millis(500);
/// A dependent task without its own timeout gives up after this long.
pub const DEFAULT_DEPENDENT_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
pub enum Wait {
    Child,
    Dependent {
        project: String,
        workflow: String,
        from_ms: i64,
        to_ms: i64,
        deadline: Instant,
    },
    /// A slot of this task group.
    TaskGroup(String),
    /// A wait or callback task's completion: its row leaves `waiting` by one conditional
    /// write (the API, its callback, or this poll when `expiry` passed).
    Signal {
        expiry: Option<Expiry>,
    },
}

/// How a wait or callback task ends when nothing completed it in time.
#[derive(Debug, Clone)]
pub struct Expiry {
    pub at_ms: i64,
    pub state: TaskState,
    pub message: String,
}

/// What one poll found.
pub struct Polled {
    pub children: Vec<(i64, ChildState)>,
    pub met: Vec<i64>,
    pub timed_out: Vec<i64>,
    pub grants: SlotGrants,
    /// Wait and callback tasks whose rows no longer wait.
    pub ended: Vec<TaskInstanceRow>,
}

#[derive(Default)]
pub struct Waits {
    pub tasks: HashMap<i64, Wait>,
    polling: bool,
}

impl Waits {
    /// Starts one poll if anything waits and none is under way.
    pub fn poll(&mut self, store: &Store, me: &mpsc::UnboundedSender<EngineMsg>) {
        if self.polling || self.tasks.is_empty() {
            return;
        }
        self.polling = true;
        let (store, me, waits) = (store.clone(), me.clone(), self.tasks.clone());
        tokio::spawn(async move {
            tokio::time::sleep(POLL).await;
            let polled = check(&store, waits).await;
            let _ = me.send(EngineMsg::Polled(polled));
        });
    }

    pub fn polled(&mut self) {
        self.polling = false;
    }
}

async fn check(store: &Store, waits: HashMap<i64, Wait>) -> Polled {
    let mut polled = Polled {
        children: Vec::new(),
        met: Vec::new(),
        timed_out: Vec::new(),
        grants: SlotGrants::default(),
        ended: Vec::new(),
    };
    signals(store, &waits, &mut polled).await;
    let slots: Vec<(i64, String)> = waits
        .iter()
        .filter_map(|(id, w)| match w {
            Wait::TaskGroup(group) => Some((*id, group.clone())),
            _ => None,
        })
        .collect();
    if !slots.is_empty() {
        match store.acquire_task_group_slots(&slots).await {
            Ok(grants) => polled.grants = grants,
            Err(e) => tracing::warn!(error = %e, "cannot acquire task group slots; trying again"),
        }
    }
    let parents: Vec<i64> = waits
        .iter()
        .filter(|(_, w)| matches!(w, Wait::Child))
        .map(|(id, _)| *id)
        .collect();
    match store.children(&parents).await {
        Ok(children) => polled.children = children,
        Err(e) => tracing::warn!(error = %e, "cannot read sub-workflow runs; trying again"),
    }
    for (id, wait) in waits {
        let Wait::Dependent {
            project,
            workflow,
            from_ms,
            to_ms,
            deadline,
        } = wait
        else {
            continue;
        };
        match store
            .succeeded_between(&project, &workflow, from_ms, to_ms)
            .await
        {
            Ok(true) => polled.met.push(id),
            Ok(false) if Instant::now() >= deadline => polled.timed_out.push(id),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot check a dependency; trying again"),
        }
    }
    polled
}

/// Ends the signal waits whose expiry passed (unless completed first), then reads which
/// of them no longer wait.
async fn signals(store: &Store, waits: &HashMap<i64, Wait>, polled: &mut Polled) {
    let mut ids = Vec::new();
    for (id, wait) in waits {
        let Wait::Signal { expiry } = wait else {
            continue;
        };
        ids.push(*id);
        let Some(e) = expiry.as_ref().filter(|e| now_ms() >= e.at_ms) else {
            continue;
        };
        let output = Params::from([(TIMED_OUT.to_string(), "true".to_string())]);
        if let Err(error) = store.end_waiting(*id, e.state, &output, &e.message).await {
            tracing::warn!(%error, task_instance_id = id, "cannot time out a waiting task; trying again");
        }
    }
    match store.ended_waits(&ids).await {
        Ok(rows) => polled.ended = rows,
        Err(error) => tracing::warn!(%error, "cannot read waiting tasks; trying again"),
    }
}
