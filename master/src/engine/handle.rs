//! The engine's dispatch of each message to what it changes.

use super::*;

impl Engine {
    pub(super) fn handle(&mut self, msg: EngineMsg, cycle: &mut Cycle) {
        let now = now_ms();
        match msg {
            EngineMsg::Claimed(list) => {
                for c in list {
                    self.take(c, cycle, now);
                }
            }
            EngineMsg::WorkerEvents {
                worker,
                events,
                ack,
            } => {
                let mut seqs = Vec::with_capacity(events.len());
                for ev in events {
                    // An instance lost to another master: no ack, so the worker keeps the
                    // event until the new owner adopts the task and it is rerouted there.
                    if self.lost.contains(&ev.workflow_instance_id)
                        || self.reloading.contains(&ev.workflow_instance_id)
                    {
                        continue;
                    }
                    seqs.push((ev.seq, ev.workflow_instance_id));
                    self.on_worker_event(&worker, ev, cycle);
                }
                cycle.acks.push((ack, seqs));
            }
            EngineMsg::Dispatched { id, worker } => {
                let Some(t) = self.tasks.get_mut(&id) else {
                    // Ended or dropped meanwhile: the dispatcher counted a slot for it.
                    let _ = self.dispatcher.send(DispatchMsg::Finished { worker, id });
                    return;
                };
                let no_worker = t.place == Place::Queued { no_worker: true };
                // A kill that raced the dispatch RPC is carried out on the worker.
                if t.place.killing() {
                    cycle.kills.push((t.instance, t.node));
                }
                t.place.reached(&worker);
                let instance = t.instance;
                let mut u = TaskUpdate::state(id, TaskState::Dispatched);
                u.worker = Some(worker);
                if no_worker {
                    u.message = Some(String::new());
                }
                // Its row update only records where the task went.
                self.task_record(instance, u, cycle, now);
            }
            EngineMsg::Cancelled { id } => {
                let Some(t) = self.tasks.get(&id) else { return };
                let pausing = self.runs.get(&t.instance).is_some_and(|r| r.rt.pausing());
                let (state, why) = if pausing && !t.place.killing() {
                    (TaskState::Paused, "paused before it reached a worker")
                } else {
                    (TaskState::Killed, "cancelled before it reached a worker")
                };
                self.settle(id, state, Some(why.to_string()), cycle, now);
            }
            EngineMsg::Settle { id, state, message } => self.settle(id, state, message, cycle, now),
            EngineMsg::Ready {
                instance,
                node,
                attempt,
            } => {
                self.apply(instance, Event::Ready { node, attempt }, cycle, now);
            }
            EngineMsg::Control {
                instance,
                control,
                reply,
            } => {
                let result = self.control(instance, control, cycle, now);
                cycle.replies.push((instance, reply, result));
            }
            EngineMsg::Probed {
                found,
                abandoned,
                asked,
            } => {
                let found: HashMap<i64, String> = found.into_iter().collect();
                for id in asked {
                    if abandoned.contains(&id) {
                        let message = Some("its worker gave it up".to_string());
                        self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
                        continue;
                    }
                    let Some(t) = self.tasks.get_mut(&id) else {
                        continue;
                    };
                    match found.get(&id) {
                        Some(worker) => {
                            if t.place.killing() {
                                cycle.kills.push((t.instance, t.node));
                            }
                            t.place.reached(worker);
                            cycle.adoptions.push((t.instance, t.node));
                        }
                        // Killed while the workers were asked: it never goes out.
                        None if t.place.killing() => {
                            let _ = self.me.send(EngineMsg::Cancelled { id });
                        }
                        None => cycle.enqueues.push((t.instance, t.node)),
                    }
                }
            }
            EngineMsg::StartChild { id } => {
                let Some(t) = self.tasks.get(&id) else { return };
                // Stopped before its child was written: it never starts one.
                if t.place.killing() {
                    let _ = self.me.send(EngineMsg::Cancelled { id });
                    return;
                }
                let Some(run) = self.runs.get(&t.instance) else {
                    return;
                };
                match spec::child_start(run, t.node, id) {
                    Ok(child) => {
                        cycle.epochs.insert(t.instance, run.epoch);
                        cycle.batch.children.push(child);
                        cycle.waits.push((id, waits::Wait::Child));
                    }
                    Err(message) => self.settle(id, TaskState::Failure, Some(message), cycle, now),
                }
            }
            EngineMsg::StartWait { id } => self.start_wait(id, cycle, now),
            EngineMsg::Expand { id } => self.expand(id, cycle, now),
            EngineMsg::StartLoop { id } => self.start_loop(id, cycle, now),
            EngineMsg::CheckLoop { id, iteration } => self.check_loop(id, iteration, cycle, now),
            EngineMsg::Polled(polled) => {
                self.waits.polled();
                // A slot granted in the store is durable already: queue the task at once.
                for id in polled.grants.granted {
                    if self.waits.tasks.remove(&id).is_none() {
                        continue; // cancelled meanwhile; its end frees the slot
                    }
                    let Some(t) = self.tasks.get(&id) else {
                        continue;
                    };
                    let (instance, node) = (t.instance, t.node);
                    self.send_out(instance, node);
                }
                for (id, group) in polled.grants.no_group {
                    self.waits.tasks.remove(&id);
                    let message = format!(
                        "task group '{group}' does not exist; create it with `shoal task-group create {group} --slots N`"
                    );
                    self.settle(id, TaskState::Failure, Some(message), cycle, now);
                }
                for (id, child) in polled.children {
                    let (state, message, output) = match child {
                        ChildState::Waiting => continue,
                        ChildState::Ended {
                            instance,
                            state,
                            outputs,
                        } => {
                            let task_state = if state == WorkflowState::Success {
                                TaskState::Success
                            } else {
                                TaskState::Failure
                            };
                            (
                                task_state,
                                format!("child instance {instance} ended {state}"),
                                outputs,
                            )
                        }
                        ChildState::Failed(reason) => (TaskState::Failure, reason, Params::new()),
                    };
                    self.waits.tasks.remove(&id);
                    let mut u = TaskUpdate::state(id, state);
                    u.ended_at = Some(now);
                    u.message = Some(message);
                    u.output = (!output.is_empty()).then(|| output.clone());
                    self.task_event(id, u, output, None, cycle, now);
                }
                for (id, output) in polled.met {
                    self.waits.tasks.remove(&id);
                    let mut u = TaskUpdate::state(id, TaskState::Success);
                    u.ended_at = Some(now);
                    u.message = Some("its dependencies succeeded".into());
                    u.output = (!output.is_empty()).then(|| output.clone());
                    self.task_event(id, u, output, None, cycle, now);
                }
                for (id, why) in polled.failed {
                    self.waits.tasks.remove(&id);
                    self.settle(id, TaskState::Failure, Some(why), cycle, now);
                }
                for (id, why) in polled.pending {
                    self.dependency_pending(id, why, cycle);
                }
                // Ended by the API, a callback, this master's timeout or a failed callback
                // request: the row says how; the runtime follows it.
                for row in polled.ended {
                    if self.waits.tasks.remove(&row.id).is_none() {
                        continue;
                    }
                    let mut u = TaskUpdate::state(row.id, row.state);
                    u.ended_at = row.ended_at.or(Some(now));
                    u.message = row.message;
                    u.output = (!row.output.is_empty()).then(|| row.output.clone());
                    self.task_event(row.id, u, row.output, None, cycle, now);
                }
                for (id, why) in polled.timed_out {
                    self.waits.tasks.remove(&id);
                    let message = Some(format!("timed out: {why}"));
                    self.settle(id, TaskState::Failure, message, cycle, now);
                }
            }
            EngineMsg::CheckOwnership { generation } => {
                warn!(
                    instances = self.runs.len(),
                    "lease lapsed; checking which instances are still ours"
                );
                cycle.check_ownership = Some(generation);
                cycle
                    .epochs
                    .extend(self.runs.iter().map(|(id, run)| (*id, run.epoch)));
            }
            EngineMsg::Branched { id, chosen } => {
                let mut u = TaskUpdate::state(id, TaskState::Success);
                u.ended_at = Some(now);
                u.output = Some(Params::from([("branch".to_string(), chosen.join(","))]));
                u.message = Some(match chosen.is_empty() {
                    true => {
                        "no case held and there is no default: nothing downstream runs".to_string()
                    }
                    false => format!("chose {}", chosen.join(", ")),
                });
                self.task_event(id, u, Params::new(), Some(chosen), cycle, now);
            }
            EngineMsg::Waiting { ids, reason } => {
                for id in ids {
                    // Why it waits is a record (see `RECORD_WAIT`).
                    let record = self.tasks.get(&id).and_then(|t| self.record(t.instance));
                    let (Some(record), Some(t)) = (record, self.tasks.get_mut(&id)) else {
                        continue;
                    };
                    let Place::Queued { no_worker } = &mut t.place else {
                        continue;
                    };
                    *no_worker = true;
                    let mut u = TaskUpdate::state(id, TaskState::Submitted);
                    u.message = Some(reason.clone());
                    cycle.record(u, record);
                }
            }
            EngineMsg::WorkersGone(gone) => {
                let lost: Vec<i64> = self
                    .tasks
                    .iter()
                    .filter(|(_, t)| {
                        t.place
                            .worker()
                            .is_some_and(|w| gone.iter().any(|g| g == w))
                    })
                    .map(|(id, _)| *id)
                    .collect();
                for id in lost {
                    warn!(
                        task_instance_id = id,
                        "task lost with its worker; it runs again"
                    );
                    let message = Some("its worker left the cluster".to_string());
                    self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
                }
            }
            EngineMsg::Reconcile => {
                self.recheck(None);
                self.sweep_owned();
            }
            EngineMsg::SweepOwned => self.sweep_owned(),
            EngineMsg::WorkersRestarted(workers) => self.recheck(Some(&workers)),
            EngineMsg::Rechecked { worker, unknown } => {
                for id in self.lost_on(&worker, unknown) {
                    let message = Some(format!(
                        "worker {worker} no longer had this attempt (it restarted or gave it up)"
                    ));
                    self.settle(id, TaskState::NeedFaultTolerance, message, cycle, now);
                }
            }
            EngineMsg::Unattended(owned) => self.take_up_unattended(owned),
            EngineMsg::NotReloaded(instance) => {
                self.reloading.remove(&instance);
                self.lost.insert(instance);
            }
            EngineMsg::Timeout { instance, run_no } => {
                let Some(run) = self.runs.get_mut(&instance).filter(|r| r.run_no == run_no) else {
                    return;
                };
                let def = run.rt.definition().clone();
                warn!(instance_id = instance, timeout = ?def.timeout, strategy = ?def.timeout_strategy, "instance exceeded its timeout");
                let timed_out = alerts::on_timeout(run);
                if !timed_out.is_empty() {
                    cycle.epochs.insert(instance, run.epoch);
                    cycle.batch.alerts.extend(timed_out);
                }
                if def.timeout_strategy == TimeoutStrategy::Fail {
                    let actions = run.rt.time_out();
                    self.perform(instance, actions, cycle, now);
                }
            }
        }
    }
}

impl Engine {
    /// Records a wait or callback task as waiting (and its callback request, sent once the
    /// record is committed).
    fn start_wait(&mut self, id: i64, cycle: &mut Cycle, now: i64) {
        let Some(t) = self.tasks.get(&id) else { return };
        if t.place.killing() {
            let _ = self.me.send(EngineMsg::Cancelled { id });
            return;
        }
        let Some(run) = self.runs.get(&t.instance) else {
            return;
        };
        let node = t.node;
        let mut message = format!(
            "waiting to be completed: `shoal task complete {id}` or POST /api/v1/task-instances/{id}/complete"
        );
        if run.rt.definition().tasks[node].kind() == TaskType::Callback {
            let api = self.api_url.as_deref();
            match spec::callback_request(run, node, id, &self.secrets, api) {
                Ok(request) => {
                    let to = request.shown_url();
                    message = format!("waiting for its callback (request to {to})");
                    cycle.callbacks.push((id, request));
                }
                Err(message) => {
                    return self.settle(id, TaskState::Failure, Some(message), cycle, now);
                }
            }
        }
        let wait = spec::signal(run, node, now);
        let mut u = TaskUpdate::state(id, TaskState::Waiting);
        u.started_at = Some(now);
        u.message = Some(message);
        self.task_event(id, u, Params::new(), None, cycle, now);
        cycle.waits.push((id, wait));
    }

    /// A dependent task still waits: checked again after its interval, and its row says
    /// what it waits for whenever that changes.
    fn dependency_pending(&mut self, id: i64, why: String, cycle: &mut Cycle) {
        let Some(waits::Wait::Dependent {
            on,
            next_check,
            shown,
        }) = self.waits.tasks.get_mut(&id)
        else {
            return;
        };
        *next_check = tokio::time::Instant::now() + on.every;
        if shown.as_deref() == Some(why.as_str()) {
            return;
        }
        let Some(run) = self.tasks.get(&id).and_then(|t| self.runs.get(&t.instance)) else {
            return;
        };
        cycle.epochs.insert(run.instance_id, run.epoch);
        let mut u = TaskUpdate::state(id, TaskState::Submitted);
        u.message = Some(why.clone());
        cycle.update(u);
        *shown = Some(why);
    }
}
