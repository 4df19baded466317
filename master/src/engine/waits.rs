//! Tasks that wait for something else: a sub_workflow task for its child run to end, a
//! dependent task for other workflows' runs on dates relative to its run's, a task of a
//! task group for a slot, a wait, callback or external task for its completion. One cheap poll of
//! the store every half second covers all of them, and only while any wait (a dependent
//! task is checked every `check_interval` of its own).

use super::EngineMsg;
use shoal_common::definition::{
    DateCycle, DependResult, Interval, OnDependFailure, Relation, TIMED_OUT, combine,
};
use shoal_common::start::Params;
use shoal_common::types::{TaskState, now_ms};
use shoal_store::{ChildState, Holder, SlotGrants, Store, TaskInstanceRow};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

const POLL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub enum Wait {
    Child,
    Dependent {
        on: Arc<Dependency>,
        next_check: Instant,
        /// What the task's row says it waits for.
        shown: Option<String>,
    },
    /// A slot of this task group.
    TaskGroup(String),
    /// A wait, callback or external task's completion: its row leaves `waiting` by one
    /// conditional write (the API, its callback, its external worker, an event, or this
    /// poll when `expiry` passed, an external worker's lease lapsed or an event was kept
    /// for it).
    Signal {
        expiry: Option<Expiry>,
        /// An external task: its lease is checked.
        leased: bool,
        /// A wait task for an event: an event kept from before it began may complete it.
        evented: bool,
    },
}

/// What a dependent task waits for, its dates resolved against its run's time.
#[derive(Debug)]
pub struct Dependency {
    pub relation: Relation,
    pub groups: Vec<(Relation, Vec<Item>)>,
    pub on_failure: OnDependFailure,
    pub deadline: Instant,
    pub every: Duration,
}

/// One awaited workflow (or task of it) over the intervals of its date cycle.
#[derive(Debug)]
pub struct Item {
    pub project: String,
    pub workflow: String,
    pub task: Option<String>,
    pub date: DateCycle,
    pub intervals: Vec<Interval>,
    pub pass_outputs: bool,
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
    /// Met, with the outputs passed on (items with `pass_outputs`).
    pub met: Vec<(i64, Params)>,
    /// A dependency failed (and the task does not wait for a rerun): why.
    pub failed: Vec<(i64, String)>,
    pub timed_out: Vec<(i64, String)>,
    /// Dependent tasks still waiting, with what they wait for.
    pub pending: Vec<(i64, String)>,
    pub grants: SlotGrants,
    /// Wait and callback tasks whose rows no longer wait.
    pub ended: Vec<TaskInstanceRow>,
}

/// The poll of the waits. What each attempt waits for lives in its place
/// (`Place::Waiting`); this only knows whether a poll is under way or may be due.
#[derive(Default)]
pub struct Waits {
    polling: bool,
    /// A wait began or a poll ended since the last look: whether anything waits is
    /// worth a look (a look reads every attempt the engine has out).
    stale: bool,
}

impl Waits {
    /// An attempt began to wait.
    pub fn began(&mut self) {
        self.stale = true;
    }

    /// Starts one poll of `waiting` if none is under way and anything waits.
    pub fn poll<'a>(
        &mut self,
        store: &Store,
        me: &mpsc::UnboundedSender<EngineMsg>,
        waiting: impl Iterator<Item = (i64, &'a Wait)>,
    ) {
        if self.polling || !self.stale {
            return;
        }
        self.stale = false;
        let waits: Vec<(i64, Wait)> = waiting.map(|(id, w)| (id, w.clone())).collect();
        if waits.is_empty() {
            return;
        }
        self.polling = true;
        let (store, me) = (store.clone(), me.clone());
        tokio::spawn(async move {
            tokio::time::sleep(POLL).await;
            let polled = check(&store, waits).await;
            let _ = me.send(EngineMsg::Polled(polled));
        });
    }

    /// A poll's answer came in: the next may start.
    pub fn polled(&mut self) {
        self.polling = false;
        self.stale = true;
    }
}

async fn check(store: &Store, waits: Vec<(i64, Wait)>) -> Polled {
    let mut polled = Polled {
        children: Vec::new(),
        met: Vec::new(),
        failed: Vec::new(),
        timed_out: Vec::new(),
        pending: Vec::new(),
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
        let Wait::Dependent { on, next_check, .. } = wait else {
            continue;
        };
        // Checked once more at its deadline, however long its interval.
        if Instant::now() < next_check.min(on.deadline) {
            continue;
        }
        match evaluate(store, &on).await {
            Ok((DependResult::Success, _, passed)) => match outputs(store, &passed).await {
                Ok(outputs) => polled.met.push((id, outputs)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a dependency's outputs; trying again")
                }
            },
            Ok((DependResult::Failed, why, _)) if on.on_failure == OnDependFailure::Fail => {
                polled.failed.push((id, why))
            }
            Ok((_, why, _)) if Instant::now() >= on.deadline => polled.timed_out.push((id, why)),
            Ok((_, why, _)) => polled.pending.push((id, why)),
            Err(e) => tracing::warn!(error = %e, "cannot check a dependency; trying again"),
        }
    }
    polled
}

/// Ends the signal waits whose expiry passed or whose external worker's lease lapsed, and
/// those an event kept from before they began completes (unless completed first), then
/// reads which of them no longer wait.
async fn signals(store: &Store, waits: &[(i64, Wait)], polled: &mut Polled) {
    let mut ids = Vec::new();
    let mut leased = Vec::new();
    let mut evented = Vec::new();
    for (id, wait) in waits {
        let Wait::Signal {
            expiry,
            leased: l,
            evented: e,
        } = wait
        else {
            continue;
        };
        ids.push(*id);
        if *l {
            leased.push(*id);
        }
        if *e {
            evented.push(*id);
        }
        let Some(e) = expiry.as_ref().filter(|e| now_ms() >= e.at_ms) else {
            continue;
        };
        let output = Params::from([(TIMED_OUT.to_string(), "true".to_string())]);
        if let Err(error) = store
            .end_waiting(*id, e.state, &output, &e.message, Holder::Anyone)
            .await
        {
            tracing::warn!(%error, task_instance_id = id, "cannot time out a waiting task; trying again");
        }
    }
    lapse_leases(store, &leased).await;
    take_kept_events(store, &evented).await;
    match store.ended_waits(&ids).await {
        Ok(rows) => polled.ended = rows,
        Err(error) => tracing::warn!(%error, "cannot read waiting tasks; trying again"),
    }
}

/// Completes the event waits among `ids` for which an event was kept from before they
/// began. Polled rather than looked up when a wait begins: an event and its wait's
/// beginning may cross in flight (each commit unseen by the other), and the next poll
/// still finds the kept event.
async fn take_kept_events(store: &Store, ids: &[i64]) {
    if ids.is_empty() {
        return;
    }
    match store.take_kept_events(ids).await {
        Ok(completed) => {
            for id in completed {
                tracing::info!(task_instance_id = id, "wait completed by a kept event");
            }
        }
        Err(error) => tracing::warn!(%error, "cannot take kept events; trying again"),
    }
}

/// Fails the external tasks among `ids` whose worker let its lease lapse: the attempt
/// is lost with it (its retries apply; the next attempt is offered again). A heartbeat
/// that renews the lease first wins.
async fn lapse_leases(store: &Store, ids: &[i64]) {
    let now = now_ms();
    let lapsed = match store.lapsed_leases(ids, now).await {
        Ok(lapsed) => lapsed,
        Err(error) => {
            return tracing::warn!(%error, "cannot read external tasks' leases; trying again");
        }
    };
    for (id, worker, at) in lapsed {
        let message = format!(
            "lost: external worker {worker} did not renew its lease, which lapsed at {}",
            shoal_common::types::ms_to_rfc3339(at)
        );
        let (state, holder) = (TaskState::Failure, Holder::LapsedBefore(now));
        match store
            .end_waiting(id, state, &Params::new(), &message, holder)
            .await
        {
            Ok(true) => {
                tracing::warn!(task_instance_id = id, %worker, "external task's lease lapsed")
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, task_instance_id = id, "cannot fail a lapsed lease; trying again")
            }
        }
    }
}

/// Where a dependency stands, the first item that decides it (or keeps it waiting)
/// described for the task's row, and the runs whose outputs pass on. An item succeeds
/// when the last run of every interval of its date cycle did.
async fn evaluate(
    store: &Store,
    on: &Dependency,
) -> shoal_common::error::Result<(DependResult, String, Vec<i64>)> {
    let mut groups = Vec::with_capacity(on.groups.len());
    let mut why: Vec<(DependResult, String)> = Vec::new();
    let mut passed = Vec::new();
    for (relation, items) in &on.groups {
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            let (result, text, last) = item_result(store, item).await?;
            match result {
                DependResult::Success => passed.extend(last.filter(|_| item.pass_outputs)),
                _ => why.push((result, text)),
            }
            results.push(result);
        }
        groups.push(combine(*relation, results));
    }
    let result = combine(on.relation, groups);
    let text = why
        .iter()
        .find(|(r, _)| *r == result)
        .or(why.first())
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    Ok((result, text, passed))
}

/// The outputs of the runs passed on, an earlier item's winning over a later one's.
async fn outputs(store: &Store, runs: &[i64]) -> shoal_common::error::Result<Params> {
    let mut all = Params::new();
    for run in runs.iter().rev() {
        all.extend(store.outputs_of(*run).await?);
    }
    Ok(all)
}

/// An item's result, what keeps it from success, and its last interval's run.
async fn item_result(
    store: &Store,
    item: &Item,
) -> shoal_common::error::Result<(DependResult, String, Option<i64>)> {
    let mut last = None;
    for interval in &item.intervals {
        let (result, text, run) = store
            .dependency_result(
                &item.project,
                &item.workflow,
                item.task.as_deref(),
                interval.start,
                interval.end,
            )
            .await?;
        if result != DependResult::Success {
            let what = match &item.task {
                Some(task) => format!("{}/{} task {task}", item.project, item.workflow),
                None => format!("{}/{}", item.project, item.workflow),
            };
            let when = format!("{} {}", item.date, interval.label);
            let text = match result {
                DependResult::Failed => format!("{what} failed ({when}): {text}"),
                _ => format!("waiting for {what} ({when}): {text}"),
            };
            return Ok((result, text, None));
        }
        last = run;
    }
    Ok((DependResult::Success, String::new(), last))
}
