//! Running tasks: admission against the slots, one tokio task per accepted task, and the
//! RUNNING / SUCCESS / FAILURE / KILLED events each one reports through the outbox.
//!
//! Task types: `noop` succeeds at once; `shell` and `python` run their script in a process
//! group of their own (see [`process`]); `http` sends a request ([`http`]); `sql` runs a
//! query against a configured datasource ([`sql`]). Any other type fails with a message
//! naming the types this worker runs.
//!
//! Timeouts: a task with a `timeout` gets a timer beside its run. With strategy `fail` the
//! timer stops the task like a kill does (process group killed, request or query dropped)
//! and the attempt ends FAILURE `timed out after <N>s`; with `warn` it writes one warning
//! line to the task log and lets the task run on.

mod http;
mod jsonpath;
mod kill;
mod process;
mod set_value;
mod sql;

use crate::logs;
use crate::outbox::Outbox;
use kill::{KillSwitch, StopReason};
use process::Program;
use serde::Deserialize;
use shoal_common::definition::{HttpSpec, SqlSpec, TimeoutStrategy};
use shoal_common::metrics;
use shoal_common::proto::{DispatchResponse, TaskEvent, TaskEventKind, TaskSpec};
use shoal_common::types::now_ms;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{Instrument, debug, info, info_span, warn};

/// Finished attempts remembered to recognise a duplicate dispatch.
const FINISHED_MEMORY: usize = 100_000;
/// `exit_code` of a failure that is not a process exit (bad definition, spawn error).
pub(crate) const NO_EXIT_CODE: i32 = -1;
const KNOWN_TYPES: &str = "shell, python, http, sql, noop";

/// Where tasks write.
#[derive(Clone, Debug)]
pub(crate) struct ExecutorDirs {
    pub(crate) logs: PathBuf,
    pub(crate) work: PathBuf,
}

pub(crate) use sql::Datasources;

/// How tasks run on this worker.
pub(crate) struct ExecutorConfig {
    pub(crate) slots: u32,
    pub(crate) dirs: ExecutorDirs,
    /// Interpreter of python tasks.
    pub(crate) python: String,
    pub(crate) datasources: Datasources,
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

/// The part of the definition JSON (a `TaskDef`) the worker reads; everything else is
/// ignored, so that the master may send fields this worker does not know yet.
#[derive(Default, Deserialize)]
struct TaskBody {
    #[serde(default, rename = "type")]
    task_type: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    script: Option<String>,
    #[serde(default)]
    http: Option<HttpSpec>,
    #[serde(default)]
    sql: Option<SqlSpec>,
    #[serde(default, with = "shoal_common::duration::option")]
    timeout: Option<Duration>,
    #[serde(default)]
    timeout_strategy: TimeoutStrategy,
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

    /// What a runner returns when its task was stopped (for whichever reason).
    fn killed() -> Self {
        Outcome::Killed {
            message: "killed by request".into(),
        }
    }
}

/// What a task runs, checked before anything starts.
enum Work<'a> {
    Script {
        program: Program<'a>,
        script: &'a str,
    },
    Http(&'a HttpSpec),
    Sql(&'a SqlSpec),
}

pub(crate) struct Executor {
    slots: u32,
    dirs: ExecutorDirs,
    python: String,
    datasources: Datasources,
    outbox: Outbox,
    table: Mutex<Table>,
    running_count: watch::Sender<u32>,
    /// Task futures not yet done: unlike `running_count`, it drops only after the last
    /// event is queued, which is what shutdown waits for before flushing the outbox.
    active: watch::Sender<usize>,
}

impl Executor {
    pub(crate) fn new(config: ExecutorConfig, outbox: Outbox) -> Arc<Self> {
        let ExecutorConfig {
            slots,
            dirs,
            python,
            datasources,
        } = config;
        Arc::new(Executor {
            slots,
            dirs,
            python,
            datasources,
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
        let finished = tokio::time::timeout(wait, active.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok());
        self.datasources.close().await;
        finished
    }

    async fn run(self: Arc<Self>, spec: TaskSpec, task: Arc<RunningTask>) {
        let started = Instant::now();
        metrics::WORKER_TASKS_STARTED.inc();
        metrics::WORKER_TASKS_RUNNING.inc();
        let outcome = self.execute(&spec, &task).await;
        let (kind, state, finished) = match &outcome {
            Outcome::Success { .. } => (
                TaskEventKind::Success,
                "success",
                &metrics::WORKER_TASKS_FINISHED_SUCCESS,
            ),
            Outcome::Failure { .. } => (
                TaskEventKind::Failure,
                "failure",
                &metrics::WORKER_TASKS_FINISHED_FAILURE,
            ),
            Outcome::Killed { .. } => (
                TaskEventKind::Killed,
                "killed",
                &metrics::WORKER_TASKS_FINISHED_KILLED,
            ),
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
        // Counted before the slot is freed and the last event is queued: whoever sees
        // either sees the task counted.
        metrics::WORKER_TASKS_RUNNING.dec();
        metrics::WORKER_TASK_DURATION.observe(started.elapsed());
        finished.inc();
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
        let work = match task_type {
            "noop" => {
                self.report(task, event(spec, TaskEventKind::Running));
                info!(
                    task_instance_id = spec.task_instance_id,
                    attempt = spec.attempt,
                    "task started"
                );
                return Outcome::Success {
                    output: HashMap::new(),
                };
            }
            "shell" => match body.command.as_deref() {
                Some(command) if !command.trim().is_empty() => Work::Script {
                    program: Program::shell(),
                    script: command,
                },
                _ => return self.fail_early(spec, "shell task has no command".into()),
            },
            "python" => match body.script.as_deref() {
                Some(script) if !script.trim().is_empty() => Work::Script {
                    program: Program::python(&self.python),
                    script,
                },
                _ => return self.fail_early(spec, "python task has no script".into()),
            },
            "http" => match &body.http {
                Some(http) => Work::Http(http),
                None => return self.fail_early(spec, "http task has no 'http' section".into()),
            },
            "sql" => match &body.sql {
                Some(sql) => Work::Sql(sql),
                None => return self.fail_early(spec, "sql task has no 'sql' section".into()),
            },
            other => {
                return self.fail_early(
                    spec,
                    format!("unknown task type '{other}' (this worker runs: {KNOWN_TYPES})"),
                );
            }
        };

        let log_path = logs::log_path(
            &self.dirs.logs,
            spec.workflow_instance_id,
            spec.task_instance_id,
            spec.attempt,
        );
        let log = match open_log(&log_path) {
            Ok(f) => f,
            Err(e) => {
                return Outcome::failure(format!(
                    "cannot open task log {}: {e}",
                    log_path.display()
                ));
            }
        };
        let run = async {
            match work {
                Work::Script { program, script } => {
                    self.run_script(spec, task, &program, script, &log).await
                }
                Work::Http(http) => {
                    self.started(spec, task, None);
                    http::run(http, &log, &task.kill).await
                }
                Work::Sql(sql) => {
                    self.started(spec, task, None);
                    sql::run(&self.datasources, sql, &log, &task.kill).await
                }
            }
        };
        let outcome = match body.timeout {
            Some(limit) => with_timeout(run, limit, body.timeout_strategy, task, &log, spec).await,
            None => run.await,
        };
        match (outcome, task.kill.reason()) {
            (Outcome::Killed { .. }, Some(StopReason::TimedOut)) => {
                let limit = body.timeout.unwrap_or_default();
                Outcome::failure(format!(
                    "timed out after {}",
                    shoal_common::duration::format(limit)
                ))
            }
            (killed @ Outcome::Killed { .. }, _) => {
                note(&log, "task killed");
                killed
            }
            (outcome, _) => outcome,
        }
    }

    /// Reports RUNNING.
    fn started(&self, spec: &TaskSpec, task: &RunningTask, pid: Option<i32>) {
        self.report(task, event(spec, TaskEventKind::Running));
        info!(
            task_instance_id = spec.task_instance_id,
            attempt = spec.attempt,
            pid,
            "task started"
        );
    }

    /// Runs a script task (shell, python): one code path for "a program in its own process
    /// group, writing into the task log".
    async fn run_script(
        &self,
        spec: &TaskSpec,
        task: &RunningTask,
        program: &Program<'_>,
        script: &str,
        log: &File,
    ) -> Outcome {
        let output_log = match log.try_clone() {
            Ok(f) => f,
            Err(e) => return Outcome::failure(format!("cannot share the task log: {e}")),
        };
        let process = match process::spawn(program, &self.work_dir(spec), script, &spec.params) {
            Ok(p) => p,
            Err(message) => {
                note(log, &message);
                warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task could not start");
                return Outcome::failure(message);
            }
        };
        task.kill.attach(process.pgid);
        self.started(spec, task, Some(process.pgid));

        let exit = process.wait(output_log).await;
        task.kill.detach();

        let mut output = exit.output;
        if exit.output_truncated {
            note(
                log,
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
                note(log, &message);
                return Outcome::failure(message);
            }
        };
        if status.success() {
            return Outcome::Success { output };
        }
        if task.kill.requested() {
            return Outcome::killed();
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
        note(log, &message);
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
        if let Ok(log) = open_log(&path) {
            note(&log, &message);
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
fn note(mut log: &File, message: &str) {
    let _ = writeln!(log, "[shoal] {message}");
}

/// Runs `run` under the task's timeout. `fail`: at the deadline the task is stopped (the
/// runner then returns as if killed, and the caller turns that into a timeout failure).
/// `warn`: one warning line in the log, and the task runs on.
async fn with_timeout(
    run: impl Future<Output = Outcome>,
    limit: Duration,
    strategy: TimeoutStrategy,
    task: &RunningTask,
    log: &File,
    spec: &TaskSpec,
) -> Outcome {
    tokio::pin!(run);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    let mut expired = false;
    let limit_text = shoal_common::duration::format(limit);
    loop {
        // Both arms are cancellation-safe: the run future and the timer are pinned here and
        // polled again on the next turn, never dropped mid-way.
        tokio::select! {
            outcome = &mut run => return outcome,
            _ = &mut deadline, if !expired => {
                expired = true;
                match strategy {
                    TimeoutStrategy::Warn => {
                        note(log, &format!("warning: task exceeded its timeout of {limit_text}"));
                        warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, timeout = %limit_text, "task exceeded its timeout");
                    }
                    TimeoutStrategy::Fail => {
                        note(log, &format!("timed out after {limit_text}, stopping the task"));
                        info!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, timeout = %limit_text, "task timed out, stopping it");
                        task.kill.stop(StopReason::TimedOut);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_common::metrics::{
        WORKER_EVENTS_UNACKED, WORKER_TASK_DURATION, WORKER_TASKS_FINISHED_FAILURE,
        WORKER_TASKS_FINISHED_KILLED, WORKER_TASKS_FINISHED_SUCCESS, WORKER_TASKS_RUNNING,
        WORKER_TASKS_STARTED,
    };

    fn spec(id: i64, task_type: &str, command: &str) -> TaskSpec {
        TaskSpec {
            task_instance_id: id,
            workflow_instance_id: 1,
            attempt: 1,
            name: format!("t{id}"),
            task_type: task_type.into(),
            definition_json: serde_json::json!({"type": task_type, "command": command}).to_string(),
            params: HashMap::new(),
            // Nothing listens there: the events stay in the outbox.
            master_addr: "127.0.0.1:9".into(),
            owner_epoch: 1,
        }
    }

    #[tokio::test]
    async fn metrics_follow_tasks_from_start_to_their_final_state() {
        let _metrics = crate::tests::METRICS_LOCK.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new("127.0.0.1:1".into());
        let executor = Executor::new(
            ExecutorConfig {
                slots: 4,
                dirs: ExecutorDirs {
                    logs: dir.path().join("logs"),
                    work: dir.path().join("work"),
                },
                python: crate::DEFAULT_PYTHON.into(),
                datasources: Datasources::new(&Default::default(), 4).unwrap(),
            },
            outbox.clone(),
        );
        let started = WORKER_TASKS_STARTED.get();
        let running = WORKER_TASKS_RUNNING.get();
        let (success, failure, killed) = (
            WORKER_TASKS_FINISHED_SUCCESS.get(),
            WORKER_TASKS_FINISHED_FAILURE.get(),
            WORKER_TASKS_FINISHED_KILLED.get(),
        );
        let observed = WORKER_TASK_DURATION.count();
        let unacked = WORKER_EVENTS_UNACKED.get();

        let tasks = vec![
            spec(1, "noop", ""),
            spec(2, "bogus", ""),
            spec(3, "shell", "sleep 30"),
        ];
        assert_eq!(executor.dispatch(tasks).accepted, [1, 2, 3]);
        // A duplicate dispatch starts nothing.
        assert_eq!(
            executor
                .dispatch(vec![spec(3, "shell", "sleep 30")])
                .accepted,
            [3]
        );
        tokio::time::timeout(Duration::from_secs(10), async {
            while WORKER_TASKS_STARTED.get() < started + 3 {
                tokio::task::yield_now().await;
            }
            executor.running().wait_for(|n| *n == 1).await.unwrap();
        })
        .await
        .expect("noop and bogus finish, shell runs");
        assert_eq!(WORKER_TASKS_STARTED.get(), started + 3);
        assert_eq!(WORKER_TASKS_RUNNING.get(), running + 1);
        assert_eq!(WORKER_TASKS_FINISHED_SUCCESS.get(), success + 1);
        assert_eq!(WORKER_TASKS_FINISHED_FAILURE.get(), failure + 1);
        assert_eq!(WORKER_TASK_DURATION.count(), observed + 2);

        assert!(executor.shutdown(Duration::from_secs(10)).await);
        assert_eq!(WORKER_TASKS_RUNNING.get(), running);
        assert_eq!(WORKER_TASKS_FINISHED_KILLED.get(), killed + 1);
        assert_eq!(WORKER_TASK_DURATION.count(), observed + 3);
        assert_eq!(WORKER_TASKS_STARTED.get(), started + 3);
        // noop: RUNNING + SUCCESS; bogus: FAILURE; shell: RUNNING + KILLED.
        assert_eq!(WORKER_EVENTS_UNACKED.get(), unacked + 5);
        outbox.stop().await;
        assert_eq!(WORKER_EVENTS_UNACKED.get(), unacked);
    }
}
