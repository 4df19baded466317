//! Worker events and operator controls, applied to a run's runtime, and the actions
//! the runtime answers with.

use super::cycle::{Cycle, PendingCreate};
use super::tasks::new_task;
use super::{Control, ControlError, Engine, EngineMsg, alerts, groups, spec};
use crate::runtime::{Action, Event, Fact, Outcome, Refused};
use shoal_common::definition::{ERROR_EXIT_CODE, ERROR_MESSAGE, ErrorAction};
use shoal_common::metrics;
use shoal_common::proto::{TaskEvent, TaskEventKind};
use shoal_common::start::Params;
use shoal_common::types::{AlertOn, TaskState, TaskType, WorkflowState, now_ms};
use shoal_store::{InstanceUpdate, KeptLog, SerialEnd, TaskUpdate};
use tracing::info;

impl Engine {
    pub(super) fn control(
        &mut self,
        instance: i64,
        control: Control,
        cycle: &mut Cycle,
        now: i64,
    ) -> Result<WorkflowState, ControlError> {
        let run = self
            .runs
            .get_mut(&instance)
            .ok_or(ControlError::NotHere(instance))?;
        let actions = match control {
            Control::Stop => run.rt.stop()?,
            Control::Pause => run.rt.pause()?,
            Control::KillTask(id) => match self.tasks.get(&id) {
                Some(t) if t.instance == instance => run.rt.kill_task(t.node, t.attempt)?,
                _ => {
                    return Err(ControlError::Refused(Refused(format!(
                        "task instance {id} is not running in workflow instance {instance}"
                    ))));
                }
            },
        };
        info!(
            instance_id = instance,
            ?control,
            "operator request accepted"
        );
        let state = run.rt.state();
        self.perform(instance, actions, cycle, now);
        Ok(state)
    }

    pub(super) fn on_worker_event(&mut self, worker: &str, mut ev: TaskEvent, cycle: &mut Cycle) {
        let state = match ev.kind() {
            TaskEventKind::Running => Some(TaskState::Running),
            TaskEventKind::Success => Some(TaskState::Success),
            TaskEventKind::Failure => Some(TaskState::Failure),
            TaskEventKind::Killed => Some(TaskState::Killed),
            // The log so far of a running attempt: kept, nothing else changes.
            TaskEventKind::Log => None,
            TaskEventKind::Timeout => return self.task_timed_out(ev, cycle),
            TaskEventKind::Unspecified => return,
        };
        let instance = match self.tasks.get_mut(&ev.task_instance_id) {
            // Events can overtake the dispatcher's notice: remember the worker either way,
            // so its slot is given back when the task ends.
            Some(t) if t.attempt == ev.attempt => {
                t.place.reached(worker);
                t.instance
            }
            // Not ours (any more), or another attempt: acknowledged and ignored.
            _ => return,
        };
        if ev.log_size > 0 {
            // Written under the instance's epoch, like the rest of the batch.
            if let Some(run) = self.runs.get(&instance) {
                cycle.epochs.insert(instance, run.epoch);
            }
            let kept = KeptLog {
                task_instance_id: ev.task_instance_id,
                content: std::mem::take(&mut ev.log),
                size: ev.log_size,
            };
            cycle.batch.task_logs.push((ev.workflow_instance_id, kept));
        }
        let Some(state) = state else { return };
        let mut u = TaskUpdate::state(ev.task_instance_id, state);
        u.worker = Some(worker.to_string());
        // The row keeps the worker's times; what follows from the event (a retry's
        // `submitted_at`, which its interval's timer counts from) takes this master's
        // clock, on which the timer runs: a worker's clock off from it would make the
        // interval shorter or longer by the difference.
        let now = now_ms();
        if state == TaskState::Running {
            u.started_at = Some(ev.at_ms);
            // A short task's start is written with its end.
            self.task_record(instance, u, cycle, now);
            return;
        }
        u.ended_at = Some(ev.at_ms);
        u.exit_code = Some(ev.exit_code);
        u.output = (!ev.output.is_empty()).then(|| ev.output.clone().into_iter().collect());
        u.message = (!ev.message.is_empty()).then(|| ev.message.clone());
        self.task_event(
            ev.task_instance_id,
            u,
            ev.output.into_iter().collect(),
            None,
            cycle,
            now,
        );
    }

    /// A running attempt passed its timeout: its task's `task_timeout` alerts (its state
    /// is the worker's to change, by stopping it under `fail`).
    fn task_timed_out(&mut self, ev: TaskEvent, cycle: &mut Cycle) {
        let Some(t) = self
            .tasks
            .get(&ev.task_instance_id)
            .filter(|t| t.attempt == ev.attempt)
        else {
            return;
        };
        let Some(run) = self.runs.get(&t.instance) else {
            return;
        };
        let alerts = alerts::on_task(
            run,
            t.node,
            t.attempt,
            AlertOn::TaskTimeout,
            Some(&ev.message),
        );
        if !alerts.is_empty() {
            cycle.epochs.insert(t.instance, run.epoch);
            cycle.batch.alerts.extend(alerts);
        }
    }

    /// Ends an attempt the master settles, in the state its runtime decides for `fact`.
    pub(super) fn settle(&mut self, id: i64, fact: Fact, cycle: &mut Cycle, now: i64) {
        self.settle_with(id, fact, Params::new(), cycle, now);
    }

    /// [`Self::settle`] with the outputs the attempt passes on.
    pub(super) fn settle_with(
        &mut self,
        id: i64,
        fact: Fact,
        output: Params,
        cycle: &mut Cycle,
        now: i64,
    ) {
        let Some(run) = self.tasks.get(&id).and_then(|t| self.runs.get(&t.instance)) else {
            return;
        };
        let (state, message) = run.rt.decide(fact);
        let mut u = TaskUpdate::state(id, state);
        u.ended_at = Some(now);
        u.message = message;
        u.output = (!output.is_empty()).then(|| output.clone());
        self.task_event(id, u, output, None, cycle, now);
    }

    /// Applies a task's state change to its runtime and writes it if accepted;
    /// `chosen` carries a switch task's branch.
    pub(super) fn task_event(
        &mut self,
        id: i64,
        u: TaskUpdate,
        output: Params,
        chosen: Option<Vec<String>>,
        cycle: &mut Cycle,
        at: i64,
    ) {
        if let Some(u) = self.accepted(id, u, output, chosen, cycle, at) {
            cycle.update(u);
        }
    }

    /// `task_event` for an update that only records (see `RECORD_WAIT`): it waits for the
    /// task's next update and is written with it, or alone once the wait is up.
    pub(super) fn task_record(&mut self, instance: i64, u: TaskUpdate, cycle: &mut Cycle, at: i64) {
        if let Some(u) = self.accepted(u.id, u, Params::new(), None, cycle, at)
            && let Some(record) = self.record(instance)
        {
            cycle.record(u, record);
        }
    }

    /// `task_event` but the row write: the update to write if the runtime accepted it.
    pub(super) fn accepted(
        &mut self,
        id: i64,
        mut u: TaskUpdate,
        mut output: Params,
        chosen: Option<Vec<String>>,
        cycle: &mut Cycle,
        at: i64,
    ) -> Option<TaskUpdate> {
        let t = self.tasks.get(&id)?;
        let (instance, node, attempt) = (t.instance, t.node, t.attempt);
        let state = u.state;
        // A failure a handler may catch carries what the handler sees, in its row too (a
        // master taking the run over reads it there).
        let caught = self.runs.get(&instance).and_then(|r| {
            let (action, _) = r.rt.definition().tasks[node].error_action()?;
            Some(action == ErrorAction::Catch)
        });
        if state == TaskState::Failure && caught == Some(true) {
            let message = u.message.clone().unwrap_or_default();
            output.insert(ERROR_MESSAGE.to_string(), message);
            if let Some(code) = u.exit_code {
                output.insert(ERROR_EXIT_CODE.to_string(), code.to_string());
            }
            u.output = Some(output.clone());
        }
        let event = match chosen {
            Some(chosen) => Event::Branched {
                node,
                attempt,
                chosen,
            },
            None => Event::Task {
                node,
                attempt,
                state,
                output,
            },
        };
        let outcome = self.apply(instance, event, cycle, at)?;
        if !outcome.accepted {
            return None;
        }
        if state == TaskState::Failure
            && let Some(run) = self.runs.get(&instance)
            && run.rt.failed_for_good(node)
        {
            let failed = alerts::on_task(
                run,
                node,
                attempt,
                AlertOn::TaskFailure,
                u.message.as_deref(),
            );
            cycle.batch.alerts.extend(failed);
        }
        if state == TaskState::NeedFaultTolerance {
            metrics::TASKS_LOST.inc();
        }
        if state.is_terminal() {
            if !outcome.was_running {
                // It never reported running (e.g. a noop): it started when it ended.
                u.started_at = u.started_at.or(u.ended_at);
            }
            self.ended(id, cycle);
        }
        Some(u)
    }

    /// An attempt ended: it leaves the engine once the cycle is committed, and its worker
    /// slot goes back to the dispatcher now. The worker freed the slot before it reported
    /// the end, and whatever the dispatcher sends into it is another task, already
    /// recorded, so the slot need not wait for this commit.
    fn ended(&self, id: i64, cycle: &mut Cycle) {
        cycle.ended_tasks.push(id);
        // An external task or event wait that ended here (a stop, a pause) is offered, or
        // waits, no longer.
        if let Some(t) = self.tasks.get(&id)
            && let Some(run) = self.runs.get(&t.instance)
            && let Some(def) = run.rt.definition().tasks.get(t.node)
            && (def.kind() == TaskType::External || def.event.is_some())
        {
            cycle.batch.withdrawn.push((t.instance, id));
        }
        if let Some(worker) = self.tasks.get(&id).and_then(|t| t.place.worker()) {
            self.dispatch.free(worker, id);
        }
    }

    pub(super) fn apply(
        &mut self,
        instance: i64,
        event: Event,
        cycle: &mut Cycle,
        now: i64,
    ) -> Option<Outcome> {
        let run = self.runs.get_mut(&instance)?;
        cycle.epochs.insert(instance, run.epoch);
        let mut outcome = run.rt.apply(event);
        // A foreach task's children or a loop's iteration were appended to the run.
        run.task_ids.resize(run.rt.definition().tasks.len(), None);
        if outcome.accepted {
            metrics::EVENTS_APPLIED.inc();
        } else {
            metrics::EVENTS_IGNORED.inc();
        }
        let actions = std::mem::take(&mut outcome.actions);
        self.perform(instance, actions, cycle, now);
        Some(outcome)
    }

    /// Turns a runtime's actions into this cycle's writes and follow-ups.
    pub(super) fn perform(
        &mut self,
        instance: i64,
        actions: Vec<Action>,
        cycle: &mut Cycle,
        now: i64,
    ) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        cycle.epochs.insert(instance, run.epoch);
        for action in actions {
            match action {
                Action::CreateTask {
                    node,
                    attempt,
                    delay,
                } => {
                    let state = if delay.is_some() {
                        TaskState::Delayed
                    } else {
                        TaskState::Submitted
                    };
                    cycle
                        .batch
                        .new_tasks
                        .push(new_task(run, node, attempt, state, now));
                    cycle.creates.push(PendingCreate {
                        instance,
                        node,
                        attempt,
                        at: now,
                        start: Some(delay),
                    });
                }
                Action::Skip { node } => {
                    cycle
                        .batch
                        .new_tasks
                        .push(new_task(run, node, 1, TaskState::Skipped, now));
                    cycle.creates.push(PendingCreate {
                        instance,
                        node,
                        attempt: 1,
                        at: now,
                        start: None,
                    });
                }
                Action::Enqueue { node, .. } => {
                    if let Some(id) = run.task_ids[node] {
                        let u = match groups::slot_group(run, node) {
                            Some(group) => groups::waiting_update(id, group),
                            None => TaskUpdate::state(id, TaskState::Submitted),
                        };
                        cycle.update(u);
                        cycle.enqueues.push((instance, node));
                    }
                }
                Action::Settled {
                    node,
                    state,
                    output,
                    message,
                } => {
                    if let Some(id) = run.task_ids[node] {
                        let mut u = TaskUpdate::state(id, state);
                        u.ended_at = Some(now);
                        u.output = Some(output);
                        u.message = Some(message);
                        cycle.update(u);
                        self.ended(id, cycle);
                    }
                }
                Action::CheckLoop {
                    node, iteration, ..
                } => {
                    if let Some(id) = run.task_ids[node] {
                        let _ = self.ctx.me.send(EngineMsg::CheckLoop { id, iteration });
                    }
                }
                Action::Progress { node, message } => {
                    if let Some(id) = run.task_ids[node] {
                        let mut u = TaskUpdate::state(id, TaskState::Running);
                        u.message = Some(message);
                        cycle.update(u);
                    }
                }
                Action::KillTask { node, .. } => cycle.kills.push((instance, node)),
                Action::Withdraw { node, .. } => cycle.withdraws.push((instance, node)),
                Action::SetState { state } => {
                    cycle.batch.instance_updates.push(InstanceUpdate {
                        id: instance,
                        owner_epoch: run.epoch,
                        state,
                        ended_at: None,
                    });
                }
                Action::Finish { state } => {
                    info!(instance_id = instance, %state, "instance finished");
                    cycle.batch.instance_updates.push(InstanceUpdate {
                        id: instance,
                        owner_epoch: run.epoch,
                        state,
                        ended_at: Some(now),
                    });
                    let def = run.rt.definition();
                    let exception = spec::exception_run(run, state);
                    let message = match (run.rt.end_message(), &exception) {
                        (Some(message), _) => Some(message.to_string()),
                        (None, Some(c)) => Some(format!(
                            "its exception workflow '{}' was started",
                            c.workflow
                        )),
                        (None, None) => None,
                    };
                    if let Some(message) = message {
                        cycle.batch.instance_messages.push((instance, message));
                    }
                    if let Some(command) = exception {
                        cycle.batch.exception_runs.push((instance, command));
                    }
                    cycle.batch.alerts.extend(alerts::on_end(run, state, now));
                    if !def.execution_type.is_parallel() {
                        cycle.batch.serial_ended.push(SerialEnd {
                            instance,
                            project: run.project.clone(),
                            workflow: def.name.clone(),
                            owner: self.ctx.master_addr.clone(),
                        });
                    }
                    cycle.finished.push((instance, state));
                }
            }
        }
    }
}
