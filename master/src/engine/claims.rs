//! Taking runs on: claimed commands, and attempts adopted from a master that is gone.

use super::cycle::Cycle;
use super::places::{Place, TaskRef};
use super::runs::Run;
use super::timers::Due;
use super::{Engine, EngineMsg, spec};
use crate::runtime::{Event, Fact, Node, Recorded, Recovery, Refused, WorkflowRuntime};
use crate::secrets::Secrets;
use shoal_common::metrics;
use shoal_common::proto::DispatchRequest;
use shoal_common::types::{CommandKind, TaskState, TaskType, WorkflowState};
use shoal_store::{ClaimedInstance, InstanceUpdate, TaskInstanceRow};
use std::collections::HashSet;
use tracing::{info, warn};

impl Engine {
    /// Builds the runtime of a claimed instance and starts it.
    pub(super) fn take(&mut self, c: ClaimedInstance, cycle: &mut Cycle, now: i64) {
        // Takeovers count as failovers, so started + failovers = finished + running.
        if c.kind != CommandKind::RecoverFailover {
            metrics::INSTANCES_STARTED.inc();
        }
        let id = c.instance.id;
        // Lost to another master once, ours again now: its workers' events are ours to ack.
        self.ownership.taken(id);
        let mut definition = c.definition;
        definition.apply_start(&c.instance.options);
        let def = self.runs.share(c.instance.version, definition);
        let from = c.instance.options.from_task.as_deref().map(|t| {
            (
                t,
                c.instance
                    .options
                    .scope
                    .unwrap_or(shoal_common::start::Scope::Downstream),
            )
        });
        let rerun = c.instance.options.rerun_task.as_ref();
        let rt = match (c.kind, rerun) {
            (CommandKind::Resume | CommandKind::ResubmitFailed, _) => {
                let mut rt = WorkflowRuntime::restore(def, &recorded(&c.tasks), Recovery::Rerun);
                rt.limit_to(from).map(|()| rt)
            }
            (CommandKind::RerunTask, Some(rerun)) => {
                WorkflowRuntime::rerun_task(def, &recorded(&c.tasks), rerun)
            }
            (CommandKind::RecoverFailover, _) => {
                let mut rt = WorkflowRuntime::restore(def, &recorded(&c.tasks), Recovery::Failover);
                let limited = match rerun {
                    Some(rerun) => rt.keep_to_rerun(rerun),
                    None => rt.limit_to(from),
                };
                limited.map(|()| rt)
            }
            _ => WorkflowRuntime::new(def, from),
        };
        let rt = match rt {
            Ok(rt) => rt,
            Err(Refused(reason)) => {
                warn!(instance_id = id, %reason, "instance cannot start");
                cycle.batch.instance_updates.push(InstanceUpdate {
                    id,
                    owner_epoch: c.instance.owner_epoch,
                    state: WorkflowState::Failure,
                    ended_at: Some(now),
                });
                return;
            }
        };
        info!(instance_id = id, workflow = %c.instance.workflow, kind = %c.kind, run = c.instance.run, "instance started");
        let n = rt.definition().tasks.len();
        let run = Run {
            instance_id: id,
            project: c.instance.project.clone(),
            run_no: c.instance.run,
            started_at: c.instance.started_at.unwrap_or(c.instance.created_at),
            schedule_time: c.instance.schedule_time,
            rt,
            epoch: c.instance.owner_epoch,
            priority: c.instance.priority,
            start_params: c.instance.params,
            options: c.instance.options,
            task_ids: vec![None; n],
        };
        if let Some(timeout) = run.rt.definition().timeout {
            let due = Due::Timeout {
                instance: id,
                run_no: run.run_no,
            };
            self.timers
                .at(run.started_at + timeout.as_millis() as i64, due);
        }
        let state_before = c.instance.state;
        self.runs.insert(run);
        if c.kind == CommandKind::RecoverFailover {
            self.adopt_in_flight(id, &c.tasks, cycle, now);
        }
        self.apply(id, Event::Start, cycle, now);
        // An operator's stop or pause that the previous master had not finished.
        let pending = match state_before {
            WorkflowState::ReadyStop => self.runs.get_mut(&id).and_then(|r| r.rt.stop().ok()),
            WorkflowState::ReadyPause => self.runs.get_mut(&id).and_then(|r| r.rt.pause().ok()),
            _ => None,
        };
        if let Some(actions) = pending {
            self.perform(id, actions, cycle, now);
        }
    }

    /// After a failover restore: attempts on a live worker are adopted (the worker is
    /// told to report here; it does not run them again), queued or waiting ones go back
    /// to the queue or timer, and those on a worker that is gone run again.
    pub(super) fn adopt_in_flight(
        &mut self,
        instance: i64,
        rows: &[TaskInstanceRow],
        cycle: &mut Cycle,
        now: i64,
    ) {
        let Some(run) = self.runs.get_mut(&instance) else {
            return;
        };
        let live: HashSet<String> = self
            .ctx
            .workers
            .current()
            .into_iter()
            .map(|w| w.addr)
            .collect();
        let mut lost = Vec::new();
        for (node, attempt, state) in run.rt.in_flight() {
            let name = &run.rt.definition().tasks[node].name;
            let Some(row) = rows
                .iter()
                .find(|r| &r.name == name && r.attempt == attempt)
            else {
                continue;
            };
            run.task_ids[node] = Some(row.id);
            // A delayed attempt of a group has not asked for its slot yet, one that waits
            // for it is routed again; a submitted one holds its slot still.
            let place = match &row.worker {
                // Resumed, not restarted: due where the old owner's timer was.
                _ if state == TaskState::Delayed => {
                    let def = &run.rt.definition().tasks[node];
                    let wait = def.retry_wait().or(def.delay).unwrap_or_default();
                    let due = Due::Ready {
                        instance,
                        node,
                        attempt,
                    };
                    self.timers
                        .at(row.submitted_at + wait.as_millis() as i64, due);
                    Place::Delayed
                }
                // Waiting for its completion: the wait goes on, its timeout where it was.
                _ if state == TaskState::Waiting => {
                    let started = row.started_at.unwrap_or(row.submitted_at);
                    cycle.waits.push((row.id, spec::signal(run, node, started)));
                    let api = self.ctx.api_url.as_deref();
                    resend_callback(run, node, row.id, &self.ctx.secrets, api, cycle);
                    Place::OnMaster
                }
                // An expanded foreach task or a running loop: its children are adopted
                // on their own, and it ends when they have settled.
                None if state == TaskState::Running
                    && matches!(
                        run.rt.definition().tasks[node].kind(),
                        TaskType::Foreach | TaskType::DoWhile
                    ) =>
                {
                    Place::OnMaster
                }
                None if state == TaskState::WaitingTaskGroup => {
                    cycle.enqueues.push((instance, node));
                    Place::New
                }
                // Never recorded on a worker, but it may have reached one just before the
                // old master died: ask the workers before queueing it again.
                None => {
                    cycle.probes.push(row.id);
                    Place::Probing
                }
                Some(w) => {
                    match live.contains(w) {
                        true => cycle.adoptions.push((instance, node)),
                        false => lost.push(row.id),
                    }
                    Place::OnWorker(w.clone())
                }
            };
            self.tasks.insert(
                row.id,
                TaskRef {
                    instance,
                    node,
                    attempt,
                    place,
                    since_ms: row.submitted_at,
                },
            );
        }
        for id in lost {
            let why = "its worker was gone when a new master took the instance over";
            self.settle(id, Fact::Lost(why.into()), cycle, now);
        }
    }

    /// Re-sends an adopted attempt to the worker that runs it, naming this master: the
    /// worker recognises the attempt, does not start it again, and reports here.
    pub(super) fn adopt(&mut self, instance: i64, node: Node) {
        let Some(run) = self.runs.get(&instance) else {
            return;
        };
        let Some(id) = run.task_ids[node] else { return };
        let Some(t) = self.tasks.get(&id) else { return };
        let Some(worker) = t.place.worker().map(str::to_string) else {
            return;
        };
        let task = match spec::build(run, node, id, t.attempt, &self.ctx) {
            Ok(task) => task,
            Err(message) => {
                let fact = Fact::Unrunnable(message);
                let _ = self.ctx.me.send(EngineMsg::Settle { id, fact });
                return;
            }
        };
        self.dispatch.adopted(&worker, id);
        let (client, me) = (self.ctx.clients.worker(&worker), self.ctx.me.clone());
        tokio::spawn(async move {
            let accepted = match client {
                Ok(mut c) => c
                    .dispatch(DispatchRequest {
                        tasks: vec![task.spec],
                        adopt_only: true,
                    })
                    .await
                    .map(|r| r.into_inner().accepted.contains(&id))
                    .unwrap_or(false),
                Err(_) => false,
            };
            if !accepted {
                warn!(task_instance_id = id, %worker, "worker did not take the adopted task back; it runs again");
                let fact = Fact::Lost(format!(
                    "worker {worker} could not be reached after a master failover"
                ));
                let _ = me.send(EngineMsg::Settle { id, fact });
            }
        });
    }
}

/// The runtime's view of the attempts the store recorded.
fn recorded(rows: &[TaskInstanceRow]) -> Vec<Recorded<'_>> {
    rows.iter()
        .map(|r| Recorded {
            name: &r.name,
            attempt: r.attempt,
            state: r.state,
            output: &r.output,
        })
        .collect()
}

/// A callback task taken over while waiting sends its request again, unless the master
/// before marked it sent (`callback::send` checks).
fn resend_callback(
    run: &Run,
    node: Node,
    id: i64,
    secrets: &Secrets,
    api: Option<&str>,
    cycle: &mut Cycle,
) {
    if run.rt.definition().tasks[node].kind() != TaskType::Callback {
        return;
    }
    match spec::callback_request(run, node, id, secrets, api) {
        Ok(request) => cycle.callbacks.push((id, request)),
        // Its request may have gone out already: the wait and its timeout go on.
        Err(reason) => warn!(
            task_instance_id = id,
            reason, "cannot send a callback request again"
        ),
    }
}
