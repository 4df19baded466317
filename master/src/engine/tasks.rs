//! A task's way out: queued for dispatch, killed, withdrawn; and the rows and timers of
//! new attempts.

use super::places::{Place, TaskRef};
use super::runs::Run;
use super::{Engine, EngineMsg, child_stop, groups, spec, waits};
use crate::runtime::{Fact, Node};
use shoal_common::proto::KillRequest;
use shoal_common::types::{TaskState, TaskType};
use shoal_store::NewTaskInstance;
use tracing::warn;

impl Engine {
    /// Routes a recorded attempt that may start now: to a wait for its task group's slot
    /// if it has not held one, otherwise out (see `send_out`).
    pub(super) fn enqueue(&mut self, instance: i64, node: Node) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let Some(id) = run.task_ids[node] else { return };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        match t.place {
            // Stopped or paused meanwhile (a timer's `Ready` can cross a kill): its
            // `Cancelled` settles it.
            Place::Killing { .. } | Place::Withdrawn => return,
            Place::New | Place::Delayed => {
                if let Some(group) = groups::slot_group(run, node) {
                    t.place = Place::Waiting(waits::Wait::TaskGroup(group.to_string()));
                    self.waits.began();
                    return;
                }
            }
            _ => {}
        }
        self.send_out(instance, node);
    }

    /// Sends an attempt that may start (its slot, if any, held) where it runs: to the
    /// dispatcher's queue, or settles it on the master (logic tasks, a dry run).
    pub(super) fn send_out(&mut self, instance: i64, node: Node) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let Some(id) = run.task_ids[node] else { return };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        let kind = run.rt.definition().tasks[node].kind();
        let msg = if kind.on_master() {
            // Logic tasks end here, on the master: a delay task has waited its delay
            // already, a conditions task's branch is taken by the runtime.
            match kind {
                TaskType::SubWorkflow => EngineMsg::StartChild { id },
                TaskType::Wait | TaskType::Callback | TaskType::External => {
                    EngineMsg::StartWait { id }
                }
                TaskType::Foreach => EngineMsg::Expand { id },
                TaskType::DoWhile => EngineMsg::StartLoop { id },
                TaskType::Terminate => {
                    let spec = run.rt.definition().tasks[node].terminate.as_ref();
                    let state = spec.map_or("", |t| t.state.as_str());
                    settle_msg(id, Fact::Done(Some(format!("ended the run as {state}"))))
                }
                TaskType::Dependent => {
                    t.place = Place::Waiting(spec::dependency(run, node, t.since_ms));
                    self.waits.began();
                    return;
                }
                TaskType::Conditions => match spec::conditions_choice(run, node, id) {
                    Ok(Some(chosen)) => EngineMsg::Branched { id, chosen },
                    // Without `when`, the runtime takes the branch as the task ends.
                    Ok(None) => settle_msg(id, Fact::Done(None)),
                    Err(why) => settle_msg(id, Fact::Unrunnable(why)),
                },
                TaskType::Switch => match spec::switch_choice(run, node, id) {
                    Ok(chosen) => EngineMsg::Branched { id, chosen },
                    Err(why) => settle_msg(id, Fact::Unrunnable(why)),
                },
                _ => settle_msg(id, Fact::Done(None)),
            }
        } else if run.options.dry_run {
            settle_msg(id, Fact::Done(Some("dry run: not executed".into())))
        } else {
            match spec::build(run, node, id, t.attempt, &self.ctx) {
                Ok(task) => {
                    t.place = Place::Queued { no_worker: false };
                    self.dispatch.push(task);
                    return;
                }
                Err(why) => settle_msg(id, Fact::Unrunnable(why)),
            }
        };
        t.place = Place::OnMaster;
        let _ = self.ctx.me.send(msg);
    }

    /// The attempt a message from `send_out` starts, unless a kill reached it meanwhile:
    /// then it never starts (it is cancelled now).
    pub(super) fn to_start(&self, id: i64) -> Option<&TaskRef> {
        let t = self.tasks.get(&id)?;
        if t.place.killing() {
            let _ = self.ctx.me.send(EngineMsg::Cancelled { id });
            return None;
        }
        Some(t)
    }

    /// Kills the current attempt of a task: on its worker if it reached one, otherwise by
    /// taking it out of the queue (or cancelling its wait).
    pub(super) fn kill(&mut self, instance: i64, node: Node) {
        let Some(id) = self.runs.get(&instance).and_then(|r| r.task_ids[node]) else {
            return;
        };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        let was = std::mem::replace(&mut t.place, Place::Killing { worker: None });
        // A sub_workflow's child run is stopped too.
        if let Place::Waiting(waits::Wait::Child) = was {
            child_stop::stop_child(self.ctx.store.clone(), self.ctx.clients.clone(), id);
        }
        let worker = match was {
            // In no queue and on no worker: cancelled right here.
            Place::New | Place::Delayed | Place::Waiting(_) | Place::Withdrawn => {
                let _ = self.ctx.me.send(EngineMsg::Cancelled { id });
                return;
            }
            // Its message, or the workers' answer, finds it killing.
            Place::OnMaster | Place::Probing => return,
            Place::Queued { .. } | Place::Killing { worker: None } => {
                self.dispatch.cancel(id);
                return;
            }
            Place::OnWorker(worker)
            | Place::Killing {
                worker: Some(worker),
            } => worker,
        };
        t.place = Place::Killing {
            worker: Some(worker.clone()),
        };
        let request = KillRequest {
            task_instance_id: id,
            attempt: t.attempt,
            workflow_instance_id: instance,
            owner_epoch: self.runs.get(&instance).map_or(0, |r| r.epoch),
        };
        let client = self.ctx.clients.worker(&worker);
        tokio::spawn(async move {
            let result = match client {
                Ok(mut c) => c.kill(request).await.map(|_| ()),
                Err(e) => Err(tonic::Status::unavailable(e.to_string())),
            };
            if let Err(e) = result {
                warn!(task_instance_id = id, %worker, error = %e, "kill request failed");
            }
        });
    }

    /// Takes an attempt that has not reached a worker out of the queue; one that has
    /// keeps running, and so does a sub_workflow's child run (the parent pauses once it
    /// ended).
    pub(super) fn withdraw(&mut self, instance: i64, node: Node) {
        let Some(id) = self.runs.get(&instance).and_then(|r| r.task_ids[node]) else {
            return;
        };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        match t.place {
            Place::Waiting(waits::Wait::Child) => {}
            Place::New | Place::Delayed | Place::Waiting(_) => {
                t.place = Place::Withdrawn;
                let _ = self.ctx.me.send(EngineMsg::Cancelled { id });
            }
            Place::Queued { .. } => {
                self.dispatch.cancel(id);
            }
            _ => {}
        }
    }

    /// Starts a poll of what the waiting attempts wait for, if one is due.
    pub(super) fn poll_waits(&mut self) {
        let waiting = self.tasks.iter().filter_map(|(id, t)| match &t.place {
            Place::Waiting(wait) => Some((*id, wait)),
            _ => None,
        });
        self.waits.poll(&self.ctx.store, &self.ctx.me, waiting);
    }

    /// Ends the wait of attempt `id`, if it waits (see [`Place::unwait`]).
    pub(super) fn unwait(&mut self, id: i64) -> Option<waits::Wait> {
        self.tasks.get_mut(&id)?.place.unwait()
    }

    pub(super) fn drop_run(&mut self, instance: i64) {
        if let Some(run) = self.runs.remove(&instance) {
            for id in run.task_ids.into_iter().flatten() {
                let Some(t) = self.tasks.remove(&id) else {
                    continue;
                };
                match t.place.worker() {
                    // Its slot on the worker is no longer this master's to count.
                    Some(worker) => self.dispatch.free(worker, id),
                    // A lost run's queued tasks must not go out from here any more.
                    None => {
                        self.dispatch.cancel(id);
                    }
                }
            }
        }
    }
}

fn settle_msg(id: i64, fact: Fact) -> EngineMsg {
    EngineMsg::Settle { id, fact }
}

pub(super) fn new_task(
    run: &Run,
    node: Node,
    attempt: i32,
    state: TaskState,
    now: i64,
) -> NewTaskInstance {
    let t = &run.rt.definition().tasks[node];
    let group = groups::slot_group(run, node);
    let (state, message) = match group {
        Some(group) if state == TaskState::Submitted => (
            TaskState::WaitingTaskGroup,
            Some(groups::waiting_message(group)),
        ),
        _ => (state, None),
    };
    NewTaskInstance {
        task_group: group.map(str::to_string),
        task_group_priority: t.task_group_priority,
        message,
        workflow_instance_id: run.instance_id,
        run: run.run_no,
        name: t.name.clone(),
        task_type: t.task_type.clone(),
        attempt,
        priority: t.priority,
        worker_group: t.worker_group.clone(),
        state,
        submitted_at: now,
    }
}
