//! Running tasks: admission against the slots, one tokio task per accepted task, and the
//! RUNNING / SUCCESS / FAILURE / KILLED events each one reports through the outbox.
//!
//! Task types: `noop` succeeds at once; `shell` runs its command (see [`shell`]); any other
//! type fails with a message naming the types this worker runs.

mod kill;
mod set_value;
mod shell;

use crate::logs;
use crate::outbox::Outbox;
use kill::KillSwitch;
use serde::Deserialize;
use shoal_common::proto::{DispatchResponse, TaskEvent, TaskEventKind, TaskSpec};
use shoal_common::types::now_ms;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tracing::{Instrument, debug, info, info_span, warn};

/// Finished attempts remembered to recognise a duplicate dispatch.
const FINISHED_MEMORY: usize = 100_000;
/// `exit_code` of a failure that is not a process exit (bad definition, spawn error).
pub(crate) const NO_EXIT_CODE: i32 = -1;
const KNOWN_TYPES: &str = "shell, noop";

/// Where tasks write.
#[derive(Clone, Debug)]
pub(crate) struct ExecutorDirs {
    pub(crate) logs: PathBuf,
    pub(crate) work: PathBuf,
}

/// One attempt of one task instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct TaskKey {
    task_instance_id: i64,
    attempt: i32,
}

impl TaskKey {
    fn of(spec: &TaskSpec) -> Self {
        TaskKey {
            task_instance_id: spec.task_instance_id,
            attempt: spec.attempt,
        }
    }
}

/// The master a task reports to. Shared by the running task and the dispatch path, which
/// moves it to a new owner after a failover (a re-dispatch with a newer epoch).
struct Route {
    master_addr: String,
    epoch: i64,
}

type SharedRoute = Arc<Mutex<Route>>;

/// A task accepted and not yet finished.
struct RunningTask {
    kill: KillSwitch,
    route: SharedRoute,
}

struct Table {
    running: HashMap<TaskKey, Arc<RunningTask>>,
    finished: HashMap<TaskKey, SharedRoute>,
    /// Insertion order of `finished`, oldest first, to forget beyond [`FINISHED_MEMORY`].
    finished_order: VecDeque<TaskKey>,
    accepting: bool,
}

/// The part of the definition JSON the worker reads; everything else is ignored.
#[derive(Default, Deserialize)]
struct TaskBody {
    #[serde(default, rename = "type")]
    task_type: String,
    #[serde(default)]
    command: Option<String>,
}

/// How a task ended.
enum Outcome {
    Success {
        output: HashMap<String, String>,
    },
    Failure {
        exit_code: i32,
        message: String,
        output: HashMap<String, String>,
    },
    Killed {
        message: String,
    },
}

impl Outcome {
    fn failure(message: impl Into<String>) -> Self {
        Outcome::Failure {
            exit_code: NO_EXIT_CODE,
            message: message.into(),
            output: HashMap::new(),
        }
    }
}

pub(crate) struct Executor {
    slots: u32,
    dirs: ExecutorDirs,
    outbox: Outbox,
    table: Mutex<Table>,
    running_count: watch::Sender<u32>,
    /// Task futures not yet done: unlike `running_count`, it drops only after the last
    /// event is queued, which is what shutdown waits for before flushing the outbox.
    active: watch::Sender<usize>,
}

impl Executor {
    pub(crate) fn new(slots: u32, dirs: ExecutorDirs, outbox: Outbox) -> Arc<Self> {
        Arc::new(Executor {
            slots,
            dirs,
            outbox,
            table: Mutex::new(Table {
                running: HashMap::new(),
                finished: HashMap::new(),
                finished_order: VecDeque::new(),
                accepting: true,
            }),
            running_count: watch::Sender::new(0),
            active: watch::Sender::new(0),
        })
    }

    /// The number of running tasks, updated on every change.
    pub(crate) fn running(&self) -> watch::Receiver<u32> {
        self.running_count.subscribe()
    }

    /// Takes the tasks that fit in the free slots and starts them; the rest come back in
    /// `rejected`. A task already running or finished here is accepted and not run again;
    /// if the dispatch names a newer owner, its events go there from now on.
    pub(crate) fn dispatch(self: &Arc<Self>, tasks: Vec<TaskSpec>) -> DispatchResponse {
        let mut response = DispatchResponse::default();
        let mut reasons = BTreeSet::new();
        let mut start = Vec::new();
        let mut reroutes = Vec::new();
        {
            let mut table = self.table.lock().expect("task table lock");
            for spec in tasks {
                let key = TaskKey::of(&spec);
                let id = spec.task_instance_id;
                let known = match table.running.get(&key) {
                    Some(task) => Some(task.route.clone()),
                    None => table.finished.get(&key).cloned(),
                };
                if let Some(route) = known {
                    debug!(
                        task_instance_id = id,
                        attempt = spec.attempt,
                        "duplicate dispatch accepted"
                    );
                    reroutes.push((key, route, spec.master_addr, spec.owner_epoch));
                    response.accepted.push(id);
                    continue;
                }
                if !table.accepting {
                    reasons.insert("worker is shutting down".to_string());
                    response.rejected.push(id);
                    continue;
                }
                if table.running.len() >= self.slots as usize {
                    reasons.insert(format!(
                        "no free slot ({} of {} in use)",
                        table.running.len(),
                        self.slots
                    ));
                    response.rejected.push(id);
                    continue;
                }
                if let Err(e) = self.outbox.ensure(&spec.master_addr) {
                    reasons.insert(e.to_string());
                    response.rejected.push(id);
                    continue;
                }
                let task = Arc::new(RunningTask {
                    kill: KillSwitch::default(),
                    route: Arc::new(Mutex::new(Route {
                        master_addr: spec.master_addr.clone(),
                        epoch: spec.owner_epoch,
                    })),
                });
                table.running.insert(key, task.clone());
                response.accepted.push(id);
                start.push((spec, task));
            }
            if !start.is_empty() {
                self.running_count.send_replace(table.running.len() as u32);
                self.active.send_modify(|n| *n += start.len());
            }
        }
        for (key, route, master_addr, epoch) in reroutes {
            self.reroute(key, &route, master_addr, epoch);
        }
        for (spec, task) in start {
            let span = info_span!(
                "task",
                task_instance_id = spec.task_instance_id,
                workflow_instance_id = spec.workflow_instance_id,
                attempt = spec.attempt,
            );
            tokio::spawn(self.clone().run(spec, task).instrument(span));
        }
        response.reason = reasons.into_iter().collect::<Vec<_>>().join("; ");
        response
    }

    /// Points a known task at a new owning master when the dispatch carries an epoch at
    /// least as new as the one it had, and moves its unacked events there.
    fn reroute(&self, key: TaskKey, route: &SharedRoute, master_addr: String, epoch: i64) {
        // The route lock is held while the events move so that an event pushed concurrently
        // either goes to the new master or is moved along with the others.
        let mut route = route.lock().expect("route lock");
        if route.master_addr == master_addr || epoch < route.epoch {
            return;
        }
        match self
            .outbox
            .reroute(key.task_instance_id, key.attempt, &master_addr)
        {
            Ok(()) => {
                info!(
                    task_instance_id = key.task_instance_id,
                    attempt = key.attempt,
                    from = %route.master_addr,
                    to = %master_addr,
                    epoch,
                    "task owner changed, events rerouted"
                );
                route.master_addr = master_addr;
                route.epoch = epoch;
            }
            Err(e) => {
                warn!(task_instance_id = key.task_instance_id, error = %e, "cannot reroute task events")
            }
        }
    }

    /// Kills a running task attempt; false if it is not running here.
    pub(crate) fn kill(&self, task_instance_id: i64, attempt: i32) -> bool {
        let task = {
            let table = self.table.lock().expect("task table lock");
            table
                .running
                .get(&TaskKey {
                    task_instance_id,
                    attempt,
                })
                .cloned()
        };
        match task {
            Some(task) => {
                info!(task_instance_id, attempt, "task kill requested");
                task.kill.request();
                true
            }
            None => false,
        }
    }

    /// Refuses further dispatches, kills every running task and waits up to `wait` for
    /// them to finish (and push their KILLED events). True if all finished.
    pub(crate) async fn shutdown(&self, wait: Duration) -> bool {
        let tasks: Vec<_> = {
            let mut table = self.table.lock().expect("task table lock");
            table.accepting = false;
            table.running.values().cloned().collect()
        };
        if !tasks.is_empty() {
            info!(tasks = tasks.len(), "killing running tasks");
        }
        for task in &tasks {
            task.kill.request();
        }
        let mut active = self.active.subscribe();
        tokio::time::timeout(wait, active.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    async fn run(self: Arc<Self>, spec: TaskSpec, task: Arc<RunningTask>) {
        let outcome = self.execute(&spec, &task).await;
        let (kind, state) = match &outcome {
            Outcome::Success { .. } => (TaskEventKind::Success, "success"),
            Outcome::Failure { .. } => (TaskEventKind::Failure, "failure"),
            Outcome::Killed { .. } => (TaskEventKind::Killed, "killed"),
        };
        let mut event = event(&spec, kind);
        match outcome {
            Outcome::Success { output } => event.output = output,
            Outcome::Failure {
                exit_code,
                message,
                output,
            } => {
                event.exit_code = exit_code;
                event.message = message;
                event.output = output;
            }
            Outcome::Killed { message } => event.message = message,
        }
        info!(
            task_instance_id = spec.task_instance_id,
            attempt = spec.attempt,
            state,
            exit_code = event.exit_code,
            "task finished"
        );
        // The slot is freed before the last event is queued, so a master that dispatches
        // on receiving it finds the slot free. A duplicate dispatch in between finds the
        // task finished with the same shared route, so a reroute still catches this event.
        let key = TaskKey::of(&spec);
        {
            let mut table = self.table.lock().expect("task table lock");
            table.running.remove(&key);
            table.finished.insert(key, task.route.clone());
            table.finished_order.push_back(key);
            while table.finished_order.len() > FINISHED_MEMORY {
                if let Some(old) = table.finished_order.pop_front() {
                    table.finished.remove(&old);
                }
            }
            self.running_count.send_replace(table.running.len() as u32);
        }
        self.report(&task, event);
        self.active.send_modify(|n| *n -= 1);

        let work_dir = self.work_dir(&spec);
        if work_dir.exists() {
            // The work directory is scratch space of one attempt (DolphinScheduler removes
            // its execute path too); the log keeps what the task printed.
            tokio::task::spawn_blocking(move || {
                if let Err(e) = std::fs::remove_dir_all(&work_dir) {
                    warn!(path = %work_dir.display(), error = %e, "cannot remove task work directory");
                }
            });
        }
    }

    async fn execute(&self, spec: &TaskSpec, task: &RunningTask) -> Outcome {
        if task.kill.requested() {
            return Outcome::Killed {
                message: "killed before it started".into(),
            };
        }
        let body = if spec.definition_json.trim().is_empty() {
            TaskBody::default()
        } else {
            match serde_json::from_str::<TaskBody>(&spec.definition_json) {
                Ok(body) => body,
                Err(e) => return self.fail_early(spec, format!("invalid task definition: {e}")),
            }
        };
        let task_type = if spec.task_type.is_empty() {
            body.task_type.as_str()
        } else {
            spec.task_type.as_str()
        };
        match task_type {
            "noop" => {
                self.report(task, event(spec, TaskEventKind::Running));
                info!(
                    task_instance_id = spec.task_instance_id,
                    attempt = spec.attempt,
                    "task started"
                );
                Outcome::Success {
                    output: HashMap::new(),
                }
            }
            "shell" => match body.command.as_deref() {
                Some(command) if !command.trim().is_empty() => {
                    self.run_shell(spec, task, command).await
                }
                _ => self.fail_early(spec, "shell task has no command".into()),
            },
            other => self.fail_early(
                spec,
                format!("unknown task type '{other}' (this worker runs: {KNOWN_TYPES})"),
            ),
        }
    }

    async fn run_shell(&self, spec: &TaskSpec, task: &RunningTask, command: &str) -> Outcome {
        let log_path = logs::log_path(
            &self.dirs.logs,
            spec.workflow_instance_id,
            spec.task_instance_id,
            spec.attempt,
        );
        let mut log = match open_log(&log_path) {
            Ok(f) => f,
            Err(e) => {
                return Outcome::failure(format!(
                    "cannot open task log {}: {e}",
                    log_path.display()
                ));
            }
        };
        let stdout_log = match log.try_clone() {
            Ok(f) => f,
            Err(e) => {
                return Outcome::failure(format!(
                    "cannot share task log {}: {e}",
                    log_path.display()
                ));
            }
        };
        let process = match shell::spawn(&self.work_dir(spec), command, &spec.params, &log) {
            Ok(p) => p,
            Err(message) => {
                note(&mut log, &message);
                warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task could not start");
                return Outcome::failure(message);
            }
        };
        task.kill.attach(process.pgid);
        self.report(task, event(spec, TaskEventKind::Running));
        info!(
            task_instance_id = spec.task_instance_id,
            attempt = spec.attempt,
            pid = process.pgid,
            "task started"
        );

        let exit = process.wait(stdout_log).await;
        task.kill.detach();

        let mut output = exit.output;
        if exit.output_truncated {
            note(
                &mut log,
                &format!(
                    "output parameters beyond {} bytes were dropped",
                    set_value::MAX_OUTPUT
                ),
            );
        }
        let status = match exit.status {
            Ok(status) => status,
            Err(e) => {
                let message = format!("cannot wait for the task process: {e}");
                note(&mut log, &message);
                return Outcome::failure(message);
            }
        };
        if status.success() {
            return Outcome::Success { output };
        }
        if task.kill.requested() {
            note(&mut log, "task killed");
            return Outcome::Killed {
                message: "killed by request".into(),
            };
        }
        use std::os::unix::process::ExitStatusExt;
        let (exit_code, message) = match (status.code(), status.signal()) {
            (Some(code), _) => (code, format!("command exited with code {code}")),
            (None, Some(signal)) => (
                128 + signal,
                format!("command terminated by signal {signal}"),
            ),
            (None, None) => (NO_EXIT_CODE, format!("command ended with {status}")),
        };
        note(&mut log, &message);
        Outcome::Failure {
            exit_code,
            message,
            output: std::mem::take(&mut output),
        }
    }

    /// A failure before any process ran: the reason goes to the task log and the event.
    fn fail_early(&self, spec: &TaskSpec, message: String) -> Outcome {
        warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task failed before it started");
        let path = logs::log_path(
            &self.dirs.logs,
            spec.workflow_instance_id,
            spec.task_instance_id,
            spec.attempt,
        );
        if let Ok(mut log) = open_log(&path) {
            note(&mut log, &message);
        }
        Outcome::failure(message)
    }

    fn work_dir(&self, spec: &TaskSpec) -> PathBuf {
        work_dir(&self.dirs.work, spec)
    }

    /// Queues an event for the task's current master. The route lock is held across the
    /// push; see [`Executor::reroute`].
    fn report(&self, task: &RunningTask, event: TaskEvent) {
        let route = task.route.lock().expect("route lock");
        let (id, kind) = (event.task_instance_id, event.kind);
        if let Err(e) = self.outbox.push(&route.master_addr, event) {
            // Cannot happen for a master address accepted at dispatch.
            warn!(task_instance_id = id, kind, error = %e, "task event dropped");
        }
    }
}

/// `work/<workflow_instance_id>_<task_instance_id>_<attempt>`: flat, so that removing one
/// never races with creating another.
fn work_dir(work: &Path, spec: &TaskSpec) -> PathBuf {
    work.join(format!(
        "{}_{}_{}",
        spec.workflow_instance_id, spec.task_instance_id, spec.attempt
    ))
}

fn event(spec: &TaskSpec, kind: TaskEventKind) -> TaskEvent {
    TaskEvent {
        seq: 0,
        task_instance_id: spec.task_instance_id,
        attempt: spec.attempt,
        workflow_instance_id: spec.workflow_instance_id,
        kind: kind as i32,
        at_ms: now_ms(),
        ..Default::default()
    }
}

/// Opens (creating it and its directory) the log of one attempt for appending.
fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Appends a worker note to the task log; a log that cannot be written is not worth
/// failing the task for.
fn note(log: &mut File, message: &str) {
    let _ = writeln!(log, "[shoal] {message}");
}
