//! A task's way out: queued for dispatch, killed, withdrawn; and the rows and timers of
//! new attempts.

use super::*;

impl Engine {
    /// Hands a recorded attempt to the dispatcher (or, in a dry run, settles it at once).
    pub(super) fn enqueue(&mut self, instance: i64, node: Node) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let Some(id) = run.task_ids[node] else { return };
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        t.delayed = false;
        if t.needs_slot
            && let Some(group) = groups::slot_group(run, node)
        {
            self.waits
                .tasks
                .insert(id, waits::Wait::TaskGroup(group.to_string()));
            self.waits.poll(&self.store, &self.me);
            return;
        }
        let kind = run.rt.definition().tasks[node].kind();
        if kind.on_master() {
            // Logic tasks end here, on the master: a delay task has waited its delay
            // already, a conditions task's branch is taken by the runtime.
            let msg = match kind {
                TaskType::SubWorkflow => EngineMsg::StartChild { id },
                TaskType::Dependent => {
                    let wait = spec::dependency(run, node);
                    self.waits.tasks.insert(id, wait);
                    self.waits.poll(&self.store, &self.me);
                    return;
                }
                TaskType::Switch => match spec::switch_choice(run, node, id) {
                    Ok(chosen) => EngineMsg::Branched { id, chosen },
                    Err(message) => EngineMsg::Settle {
                        id,
                        state: TaskState::Failure,
                        message: Some(message),
                    },
                },
                _ => EngineMsg::Settle {
                    id,
                    state: TaskState::Success,
                    message: None,
                },
            };
            let _ = self.me.send(msg);
            return;
        }
        if run.options.dry_run {
            let message = Some("dry run: not executed".to_string());
            let _ = self.me.send(EngineMsg::Settle {
                id,
                state: TaskState::Success,
                message,
            });
            return;
        }
        match spec::build(run, node, id, t.attempt, &self.master_addr, &self.secrets) {
            Ok(task) => {
                let _ = self.dispatcher.send(DispatchMsg::Push(task));
            }
            Err(message) => {
                let _ = self.me.send(EngineMsg::Settle {
                    id,
                    state: TaskState::Failure,
                    message: Some(message),
                });
            }
        }
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
        t.kill_requested = true;
        // Waiting in no queue and on no worker: cancelled right here; a sub_workflow's
        // child run is stopped too.
        let wait = self.waits.tasks.remove(&id);
        if matches!(wait, Some(waits::Wait::Child)) {
            child_stop::stop_child(self.store.clone(), self.clients.clone(), id);
        }
        if t.delayed || wait.is_some() {
            let _ = self.me.send(EngineMsg::Cancelled { id });
            return;
        }
        let Some(worker) = t.worker.clone() else {
            let _ = self.dispatcher.send(DispatchMsg::Cancel(id));
            return;
        };
        let request = KillRequest {
            task_instance_id: id,
            attempt: t.attempt,
            workflow_instance_id: instance,
            owner_epoch: self.runs.get(&instance).map_or(0, |r| r.epoch),
        };
        let client = self.clients.worker(&worker);
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
        let Some(t) = self.tasks.get(&id) else { return };
        let waiting = match self.waits.tasks.get(&id) {
            Some(waits::Wait::Child) => return,
            Some(_) => self.waits.tasks.remove(&id).is_some(),
            None => false,
        };
        if t.delayed || waiting {
            let _ = self.me.send(EngineMsg::Cancelled { id });
        } else if t.worker.is_none() {
            let _ = self.dispatcher.send(DispatchMsg::Cancel(id));
        }
    }

    pub(super) fn drop_run(&mut self, instance: i64) {
        if let Some(run) = self.runs.remove(&instance) {
            metrics::INSTANCES_RUNNING.dec();
            for id in run.task_ids.into_iter().flatten() {
                match self.tasks.remove(&id).map(|t| t.worker) {
                    // A lost run's queued tasks must not go out from here any more.
                    Some(None) => {
                        let _ = self.dispatcher.send(DispatchMsg::Cancel(id));
                    }
                    // Its slot on the worker is no longer this master's to count.
                    Some(Some(worker)) => {
                        let _ = self.dispatcher.send(DispatchMsg::Finished { worker, id });
                    }
                    None => {}
                }
            }
        }
    }
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

/// Brings `Ready` for the attempt after `wait`.
pub(super) fn timer(
    me: &mpsc::UnboundedSender<EngineMsg>,
    instance: i64,
    node: Node,
    attempt: i32,
    wait: Duration,
) {
    let me = me.clone();
    // A timer holds no thread and no worker slot; the runtime ignores it if the
    // attempt was cancelled meanwhile.
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let _ = me.send(EngineMsg::Ready {
            instance,
            node,
            attempt,
        });
    });
}
