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
//!
//! Abandoning: when the worker's registry lease was lost, or shutdown's grace period ran
//! out, the masters treat the worker's attempts as lost and run them again elsewhere. The
//! worker then kills them and reports nothing more for them: a KILLED event would read as an
//! operator's kill, and any late event is for a superseded attempt. Their unsent events are
//! dropped from the outbox, and a later dispatch of the same attempt is refused.
//!
//! Script tasks record their process group under `data_dir/running` while they run, so that
//! a worker restarting after a crash can kill what its predecessor left ([`orphans`]).

mod fence;
mod http;
mod kill;
mod launch;
mod orphans;
mod process;
mod reuse;
mod scratch;
mod set_value;
mod sql;
mod task_log;
mod tenant;

use crate::disk::DiskCheck;
use crate::journal::Unacked;
use crate::logs;
use crate::outbox::Outbox;
use fence::Fences;
use kill::{KillSwitch, StopReason};
use orphans::Records;
use process::Program;
use scratch::Scratch;
use serde::Deserialize;
use shoal_common::definition::{HttpSpec, SqlSpec, TimeoutStrategy};
use shoal_common::mask::Mask;
use shoal_common::metrics;
use shoal_common::proto::{
    DispatchResponse, KillRequest, ProbeResponse, TaskAttempt, TaskEvent, TaskEventKind, TaskSpec,
};
use shoal_common::types::now_ms;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use task_log::TaskLog;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

/// Finished attempts remembered to recognise a duplicate dispatch.
const FINISHED_MEMORY: usize = 100_000;
/// How often a running task's grown log is sent to its master, and how much of its end.
const SHIP_LOG_EVERY: Duration = Duration::from_secs(5);
const SHIPPED_WHILE_RUNNING: u64 = 64 * 1024;
/// `exit_code` of a failure that is not a process exit (bad definition, spawn error).
pub(crate) const NO_EXIT_CODE: i32 = -1;
const KNOWN_TYPES: &str = "shell, python, http, sql, noop";

/// Where tasks write.
#[derive(Clone, Debug)]
pub(crate) struct ExecutorDirs {
    pub(crate) logs: PathBuf,
    pub(crate) work: PathBuf,
    /// Process group records of the running script tasks.
    pub(crate) running: PathBuf,
}

pub use launch::PASSED as TASK_ENV;
pub(crate) use launch::TaskEnvironment;
pub(crate) use orphans::kill_leftovers;
pub(crate) use scratch::clear as clear_work_dirs;
pub(crate) use sql::Datasources;
pub use sql::EVERY_PROJECT;
pub(crate) use tenant::Tenants;

/// How tasks run on this worker.
pub(crate) struct ExecutorConfig {
    pub(crate) slots: u32,
    pub(crate) dirs: ExecutorDirs,
    /// Interpreter of python tasks.
    pub(crate) python: String,
    /// What script tasks get of the worker's environment.
    pub(crate) task_env: TaskEnvironment,
    pub(crate) datasources: Datasources,
    /// Which OS user script tasks run as.
    pub(crate) tenants: Tenants,
    /// The data dir, and the least free space on its disk for taking a new task.
    pub(crate) data_dir: PathBuf,
    pub(crate) min_free_disk: u64,
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
    /// The registry lease generation ([`Executor::follow_lease`]) it was accepted in.
    generation: u64,
}

impl RunningTask {
    fn abandoned(&self) -> bool {
        self.kill.reason() == Some(StopReason::Abandoned)
    }
}

/// A task that ended here, remembered to recognise a duplicate dispatch.
struct Finished {
    route: SharedRoute,
    /// Given up by the worker: a dispatch of the same attempt is refused.
    abandoned: bool,
}

struct Table {
    running: HashMap<TaskKey, Arc<RunningTask>>,
    finished: HashMap<TaskKey, Finished>,
    /// Insertion order of `finished`, oldest first, to forget beyond [`FINISHED_MEMORY`].
    finished_order: VecDeque<TaskKey>,
    fences: Fences,
    accepting: bool,
}

impl Table {
    /// An attempt running or finished here: its route, and whether it was abandoned.
    fn known(&self, key: &TaskKey) -> Option<(SharedRoute, bool)> {
        match self.running.get(key) {
            Some(task) => Some((task.route.clone(), task.abandoned())),
            None => self
                .finished
                .get(key)
                .map(|f| (f.route.clone(), f.abandoned)),
        }
    }
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
    /// Work directories of script tasks.
    scratch: Arc<Scratch>,
    /// Process group records of running script tasks.
    records: Records,
    python: String,
    task_env: TaskEnvironment,
    datasources: Datasources,
    tenants: Tenants,
    disk: DiskCheck,
    outbox: Outbox,
    table: Mutex<Table>,
    running_count: watch::Sender<u32>,
    /// Task futures not yet done: unlike `running_count`, it drops only after the last
    /// event is queued, which is what shutdown waits for before flushing the outbox.
    active: watch::Sender<usize>,
    /// Counts the registry leases the worker lost ([`Executor::follow_lease`]).
    lease: OnceLock<watch::Receiver<u64>>,
}

impl Executor {
    pub(crate) fn new(config: ExecutorConfig, outbox: Outbox) -> Arc<Self> {
        let ExecutorConfig {
            slots,
            dirs,
            python,
            task_env,
            datasources,
            tenants,
            data_dir,
            min_free_disk,
        } = config;
        Arc::new(Executor {
            disk: DiskCheck::new(data_dir, min_free_disk),
            slots,
            scratch: Arc::new(Scratch::new(dirs.work.clone())),
            records: Records::new(dirs.running.clone()),
            dirs,
            python,
            task_env,
            datasources,
            tenants,
            outbox,
            table: Mutex::new(Table {
                running: HashMap::new(),
                finished: HashMap::new(),
                finished_order: VecDeque::new(),
                fences: Fences::default(),
                accepting: true,
            }),
            running_count: watch::Sender::new(0),
            active: watch::Sender::new(0),
            lease: OnceLock::new(),
        })
    }

    /// Tags every task accepted from now on with the current value of `lost` (the count of
    /// lost registry leases, [`shoal_common::registry::Membership::lost`]), so that
    /// [`Executor::abandon_older`] can tell the tasks of a lost lease from those dispatched
    /// after the worker registered again. Set once, before the worker serves.
    pub(crate) fn follow_lease(&self, lost: watch::Receiver<u64>) {
        if self.lease.set(lost).is_err() {
            warn!("lease generation already followed");
        }
    }

    /// The number of running tasks, updated on every change.
    /// The attempts running now (task instance id, attempt).
    pub(crate) fn running_attempts(&self) -> std::collections::HashSet<(i64, i32)> {
        let table = self.table.lock().expect("task table lock");
        table
            .running
            .keys()
            .map(|k| (k.task_instance_id, k.attempt))
            .collect()
    }

    pub(crate) fn running(&self) -> watch::Receiver<u32> {
        self.running_count.subscribe()
    }

    /// Takes the tasks that fit in the free slots and starts them; the rest come back in
    /// `rejected`. A task already running or finished here is accepted and not run again;
    /// if the dispatch names a newer owner, its events go there from now on. A dispatch
    /// from an owner older than one seen for the instance is refused ([`fence`]). With
    /// `adopt_only`, an attempt not known here is refused instead of started.
    pub(crate) fn dispatch(
        self: &Arc<Self>,
        tasks: Vec<TaskSpec>,
        adopt_only: bool,
    ) -> DispatchResponse {
        let mut response = DispatchResponse::default();
        let mut reasons = BTreeSet::new();
        let mut start = Vec::new();
        let mut reroutes = Vec::new();
        // Checked once per call, and only when a new attempt would start.
        let mut disk: Option<Option<String>> = None;
        {
            let mut table = self.table.lock().expect("task table lock");
            // Read under the table lock, which abandoning takes too: a task accepted before
            // the count moved is either seen by the abandon that follows, or tagged newer.
            let generation = self.lease.get().map_or(0, |lost| *lost.borrow());
            for spec in tasks {
                let key = TaskKey::of(&spec);
                let id = spec.task_instance_id;
                let instance = spec.workflow_instance_id;
                if !table.fences.admit(instance, spec.owner_epoch) {
                    let newest = table.fences.newest(instance).unwrap_or_default();
                    warn!(
                        task_instance_id = id,
                        workflow_instance_id = instance,
                        epoch = spec.owner_epoch,
                        newest,
                        "dispatch from a superseded owner refused"
                    );
                    reasons.insert(format!(
                        "instance {instance} has a newer owner (epoch {newest} > {})",
                        spec.owner_epoch
                    ));
                    response.rejected.push(id);
                    continue;
                }
                let known = table.known(&key);
                if let Some((_, true)) = known {
                    debug!(
                        task_instance_id = id,
                        attempt = spec.attempt,
                        "dispatch of an abandoned attempt refused"
                    );
                    reasons.insert("this worker abandoned that attempt".to_string());
                    response.rejected.push(id);
                    continue;
                }
                if let Some((route, _)) = known {
                    debug!(
                        task_instance_id = id,
                        attempt = spec.attempt,
                        "duplicate dispatch accepted"
                    );
                    reroutes.push((key, route, spec.master_addr, spec.owner_epoch));
                    response.accepted.push(id);
                    continue;
                }
                if adopt_only {
                    reasons.insert(format!(
                        "attempt {} of task {id} is not on this worker",
                        spec.attempt
                    ));
                    response.rejected.push(id);
                    continue;
                }
                if !table.accepting {
                    reasons.insert("worker is shutting down".to_string());
                    response.rejected.push(id);
                    continue;
                }
                let disk = disk.get_or_insert_with(|| self.disk.refusal());
                if let Some(why) = disk {
                    reasons.insert(why.clone());
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
                    generation,
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

    /// Takes over what a previous run of this worker finished and its masters never acked
    /// (from the journal): each attempt is known here as finished, and its event is sent
    /// again to the master it was for (or to whoever adopts the attempt since).
    pub(crate) fn resume_finished(&self, unacked: Vec<Unacked>) {
        if unacked.is_empty() {
            return;
        }
        info!(
            events = unacked.len(),
            "resending the ends of tasks a previous run of this worker finished"
        );
        for Unacked {
            master,
            epoch,
            event,
        } in unacked
        {
            let key = TaskKey {
                task_instance_id: event.task_instance_id,
                attempt: event.attempt,
            };
            {
                let mut table = self.table.lock().expect("task table lock");
                table.fences.admit(event.workflow_instance_id, epoch);
                let route = Arc::new(Mutex::new(Route {
                    master_addr: master.clone(),
                    epoch,
                }));
                let finished = Finished {
                    route,
                    abandoned: false,
                };
                if table.finished.insert(key, finished).is_none() {
                    table.finished_order.push_back(key);
                }
            }
            if let Err(e) = self.outbox.push(&master, event) {
                warn!(task_instance_id = key.task_instance_id, error = %e, "cannot resend a task's end");
            }
        }
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

    /// Which of these attempts are running here or finished here (and remembered), after
    /// raising each instance's fence to the prober's epoch: under one lock, so a dispatch
    /// from an older owner either arrived before (and the attempt is known) or is refused.
    ///
    /// Abandoned attempts are reported apart: the master runs them again as a new attempt.
    /// Were they unknown, it would queue the same attempt again, which this worker keeps
    /// refusing (with no other worker in the group, for ever).
    pub(crate) fn probe(&self, attempts: &[TaskAttempt]) -> ProbeResponse {
        let mut table = self.table.lock().expect("task table lock");
        let mut response = ProbeResponse::default();
        for a in attempts {
            table.fences.admit(a.workflow_instance_id, a.owner_epoch);
            let key = TaskKey {
                task_instance_id: a.task_instance_id,
                attempt: a.attempt,
            };
            let Some((_, abandoned)) = table.known(&key) else {
                continue;
            };
            if abandoned {
                response.abandoned.push(a.task_instance_id);
            } else {
                response.known.push(a.task_instance_id);
            }
        }
        response
    }

    /// Kills a running task attempt; false if it is not running here.
    /// A kill from an owner older than the newest seen for the instance is refused: a
    /// frozen old owner must not kill what its successor drives.
    pub(crate) fn kill(&self, kill: &KillRequest) -> bool {
        let (task_instance_id, attempt) = (kill.task_instance_id, kill.attempt);
        let task = {
            let table = self.table.lock().expect("task table lock");
            if table
                .fences
                .newest(kill.workflow_instance_id)
                .is_some_and(|newest| kill.owner_epoch < newest)
            {
                warn!(
                    task_instance_id,
                    attempt,
                    epoch = kill.owner_epoch,
                    "kill from a superseded owner refused"
                );
                return false;
            }
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

    /// Refuses dispatches of new attempts from now on (a known attempt is still recognised,
    /// so that a master taking over can adopt it).
    pub(crate) fn drain(&self) {
        self.table.lock().expect("task table lock").accepting = false;
    }

    /// Waits up to `wait` for every accepted task to finish and queue its last event. True
    /// if none is left.
    pub(crate) async fn wait_idle(&self, wait: Duration) -> bool {
        let mut active = self.active.subscribe();
        tokio::time::timeout(wait, active.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Abandons every running task (see the module docs). Returns how many.
    pub(crate) fn abandon_all(&self) -> usize {
        self.abandon(|_| true)
    }

    /// Abandons the running tasks accepted while fewer than `generation` leases were lost:
    /// those of the lease that was just lost. Returns how many.
    pub(crate) fn abandon_older(&self, generation: u64) -> usize {
        self.abandon(|t| t.generation < generation)
    }

    fn abandon(&self, which: impl Fn(&RunningTask) -> bool) -> usize {
        let tasks: Vec<(TaskKey, Arc<RunningTask>)> = {
            let table = self.table.lock().expect("task table lock");
            let tasks: Vec<_> = table
                .running
                .iter()
                .filter(|(_, t)| !t.abandoned() && which(t))
                .map(|(k, t)| (*k, t.clone()))
                .collect();
            // Marked under the table lock: a task still in the table has not yet queued its
            // terminal event, and will see the mark when it does (see `report`).
            for (_, task) in &tasks {
                task.kill.stop(StopReason::Abandoned);
            }
            tasks
        };
        for (key, task) in &tasks {
            // Under the route lock, like every push: an event queued before the mark is
            // dropped here, one after it is never queued.
            let _route = task.route.lock().expect("route lock");
            let dropped = self.outbox.discard(key.task_instance_id, key.attempt);
            warn!(
                task_instance_id = key.task_instance_id,
                attempt = key.attempt,
                events_dropped = dropped,
                "task abandoned: killed, and nothing more is reported for it"
            );
        }
        tasks.len()
    }

    /// Releases what tasks share (datasource pools); called once no task runs any more.
    pub(crate) async fn close(&self) {
        self.datasources.close().await;
    }

    async fn run(self: Arc<Self>, spec: TaskSpec, task: Arc<RunningTask>) {
        let started = Instant::now();
        metrics::WORKER_TASKS_STARTED.inc();
        metrics::WORKER_TASKS_RUNNING.inc();
        let (outcome, log) = self.execute(&spec, &task).await;
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
        // The master keeps the log's end, readable when this worker is gone.
        if let Some(log) = log {
            (event.log, event.log_size) = log.end(logs::KEPT_BYTES);
        }
        // What the master stores and the API shows must not carry the secrets either.
        let mask = Mask::new(&spec.masked);
        event.message = mask.message(&event.message);
        if !spec.masked.is_empty() {
            for value in event.output.values_mut() {
                *value = mask.text(value).into_owned();
            }
        }
        if task.abandoned() {
            info!(
                task_instance_id = spec.task_instance_id,
                attempt = spec.attempt,
                "abandoned task ended; not reported"
            );
        } else {
            // Journaled before it is queued: a worker that dies once the record is on disk
            // still reports the end when it starts again, and the attempt does not rerun.
            let route = task.route.lock().expect("route lock");
            self.outbox.keep(&route.master_addr, route.epoch, &event);
            // One line a task at info (its span names it): a start line too cost a standalone
            // fan-out of noop tasks about a fifth of its rate (BENCHMARKS.md).
            info!(state, exit_code = event.exit_code, "task finished");
        }
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
            let finished = Finished {
                route: task.route.clone(),
                abandoned: task.abandoned(),
            };
            table.finished.insert(key, finished);
            table.finished_order.push_back(key);
            while table.finished_order.len() > FINISHED_MEMORY {
                if let Some(old) = table.finished_order.pop_front() {
                    table.finished.remove(&old);
                }
            }
            self.running_count.send_replace(table.running.len() as u32);
        }
        // Not queued if the task was abandoned (checked by `report`).
        self.report(&task, event);
        self.active.send_modify(|n| *n -= 1);
    }

    /// Runs the task; returns its outcome and its log (none for a noop, which has none).
    async fn execute(&self, spec: &TaskSpec, task: &RunningTask) -> (Outcome, Option<TaskLog>) {
        if task.kill.requested() {
            let killed = Outcome::Killed {
                message: "killed before it started".into(),
            };
            return (killed, None);
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
                self.started(spec, task, None);
                let done = Outcome::Success {
                    output: HashMap::new(),
                };
                return (done, None);
            }
            "shell" => match body.command.as_deref() {
                Some(command) if !command.trim().is_empty() => Work::Script {
                    program: Program::shell(&self.task_env),
                    script: command,
                },
                _ => return self.fail_early(spec, "shell task has no command".into()),
            },
            "python" => match body.script.as_deref() {
                Some(script) if !script.trim().is_empty() => Work::Script {
                    program: Program::python(&self.python, &self.task_env),
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
        let log = TaskLog::open(&log_path, Mask::new(&spec.masked));
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
                    let (project, given) = (&spec.project, &spec.datasources);
                    sql::run(&self.datasources, project, given, sql, &log, &task.kill).await
                }
            }
        };
        let run = async {
            match body.timeout {
                Some(limit) => {
                    with_timeout(run, limit, body.timeout_strategy, task, &log, spec).await
                }
                None => run.await,
            }
        };
        let outcome = self.shipping_log(run, spec, task, &log).await;
        let outcome = match (outcome, task.kill.reason()) {
            (Outcome::Killed { .. }, Some(StopReason::TimedOut)) => {
                let limit = body.timeout.unwrap_or_default();
                Outcome::failure(format!(
                    "timed out after {}",
                    shoal_common::duration::format(limit)
                ))
            }
            (killed @ Outcome::Killed { .. }, Some(StopReason::Abandoned)) => {
                log.note(
                    "task abandoned by the worker (lost its registry lease or shut down); \
                     the attempt runs again elsewhere",
                );
                killed
            }
            (killed @ Outcome::Killed { .. }, _) => {
                log.note("task killed");
                killed
            }
            (outcome, _) => outcome,
        };
        (outcome, Some(log))
    }

    /// Runs `work`, sending the end of the log (its last [`SHIPPED_WHILE_RUNNING`] bytes)
    /// every [`SHIP_LOG_EVERY`] while it grows: the master keeps it, so the log of a task
    /// whose worker dies mid-run is not lost with it. A task shorter than that sends none.
    async fn shipping_log(
        &self,
        work: impl Future<Output = Outcome>,
        spec: &TaskSpec,
        task: &RunningTask,
        log: &TaskLog,
    ) -> Outcome {
        tokio::pin!(work);
        let start = tokio::time::Instant::now() + SHIP_LOG_EVERY;
        let mut tick = tokio::time::interval_at(start, SHIP_LOG_EVERY);
        let mut shipped = 0;
        loop {
            // Both arms are cancellation-safe: the work is pinned and polled again, and a
            // missed tick only delays a shipment.
            tokio::select! {
                outcome = &mut work => return outcome,
                _ = tick.tick() => {
                    if log.size() > shipped {
                        let mut ev = event(spec, TaskEventKind::Log);
                        (ev.log, ev.log_size) = log.end(SHIPPED_WHILE_RUNNING);
                        shipped = ev.log_size;
                        self.report(task, ev);
                    }
                }
            }
        }
    }

    /// Reports RUNNING (logged at debug: the end's line says how it went).
    fn started(&self, spec: &TaskSpec, task: &RunningTask, pid: Option<i32>) {
        self.report(task, event(spec, TaskEventKind::Running));
        debug!(pid, "task started");
    }

    /// Runs a script task (shell, python): one code path for "a program in its own process
    /// group, writing into the task log".
    async fn run_script(
        &self,
        spec: &TaskSpec,
        task: &RunningTask,
        program: &Program<'_>,
        script: &str,
        log: &TaskLog,
    ) -> Outcome {
        let work_dir = match self.scratch.take() {
            Ok(dir) => dir,
            Err(message) => return could_not_start(spec, log, message),
        };
        let outcome = async {
            let started = self.tenants.of_task(&spec.tenant).and_then(|tenant| {
                process::spawn(program, &work_dir, script, &spec.params, tenant.as_ref())
            });
            let process = match started {
                Ok(p) => p,
                Err(message) => return could_not_start(spec, log, message),
            };
            let record = self
                .records
                .record(spec.task_instance_id, spec.attempt, process.pgid);
            task.kill.attach(process.pgid);
            self.started(spec, task, Some(process.pgid));

            let exit = process.wait(log, log.mask().stream(), &task.kill).await;
            // `wait` killed what was left of the group after the task exited.
            if let Some(record) = record {
                self.records.forget(record);
            }

            let mut output = exit.output;
            if exit.output_truncated {
                log.note(&format!(
                    "output parameters beyond {} bytes were dropped",
                    set_value::MAX_OUTPUT
                ));
            }
            let status = match exit.status {
                Ok(status) => status,
                Err(e) => {
                    let message = format!("cannot wait for the task process: {e}");
                    log.note(&message);
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
            log.note(&message);
            Outcome::Failure {
                exit_code,
                message,
                output: std::mem::take(&mut output),
            }
        }
        .await;
        // Emptied for a later task: the task's group is gone (`wait` killed it).
        let scratch = self.scratch.clone();
        tokio::task::spawn_blocking(move || scratch.give_back(work_dir));
        outcome
    }

    /// A failure before any process ran: the reason goes to the task log and the event.
    fn fail_early(&self, spec: &TaskSpec, message: String) -> (Outcome, Option<TaskLog>) {
        warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task failed before it started");
        let path = logs::log_path(
            &self.dirs.logs,
            spec.workflow_instance_id,
            spec.task_instance_id,
            spec.attempt,
        );
        let log = TaskLog::open(&path, Mask::new(&spec.masked));
        log.note(&message);
        (Outcome::failure(message), Some(log))
    }

    /// Queues an event for the task's current master, unless the task was abandoned. The
    /// route lock is held across the check and the push; see [`Executor::reroute`] and
    /// [`Executor::abandon`].
    fn report(&self, task: &RunningTask, event: TaskEvent) {
        let route = task.route.lock().expect("route lock");
        if task.abandoned() {
            return;
        }
        let (id, kind) = (event.task_instance_id, event.kind);
        if let Err(e) = self.outbox.push(&route.master_addr, event) {
            // Cannot happen for a master address accepted at dispatch.
            warn!(task_instance_id = id, kind, error = %e, "task event dropped");
        }
    }
}

/// A script task whose process could not be started: the reason goes to its log and event.
fn could_not_start(spec: &TaskSpec, log: &TaskLog, message: String) -> Outcome {
    log.note(&message);
    warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task could not start");
    Outcome::failure(message)
}

/// Abandons the tasks of a lost registry lease, each time `lost` (the count of lost
/// leases, [`shoal_common::registry::Membership::lost`]) moves, until `stop` is cancelled.
///
/// The masters saw the worker leave when its lease expired and run its attempts again
/// elsewhere; the copies still running here must go, and their events are of no use.
pub(crate) async fn abandon_on_lease_loss(
    executor: Arc<Executor>,
    mut lost: watch::Receiver<u64>,
    stop: CancellationToken,
) {
    loop {
        // Cancellation-safe: `cancelled` and `watch::Receiver::changed` keep no partial
        // state; a change made meanwhile is seen by the next `changed`.
        tokio::select! {
            _ = stop.cancelled() => break,
            changed = lost.changed() => if changed.is_err() { break },
        }
        let generation = *lost.borrow_and_update();
        let running = *executor.running_count.borrow();
        error!(
            lost_leases = generation,
            running,
            "registry lease lost: the masters consider this worker's tasks gone and run them \
             again elsewhere; killing every task it was running"
        );
        let abandoned = executor.abandon_older(generation);
        error!(abandoned, "tasks of the lost lease killed");
    }
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

/// Runs `run` under the task's timeout. `fail`: at the deadline the task is stopped (the
/// runner then returns as if killed, and the caller turns that into a timeout failure).
/// `warn`: one warning line in the log, and the task runs on.
async fn with_timeout(
    run: impl Future<Output = Outcome>,
    limit: Duration,
    strategy: TimeoutStrategy,
    task: &RunningTask,
    log: &TaskLog,
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
                        log.note(&format!("warning: task exceeded its timeout of {limit_text}"));
                        warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, timeout = %limit_text, "task exceeded its timeout");
                    }
                    TimeoutStrategy::Fail => {
                        log.note(&format!("timed out after {limit_text}, stopping the task"));
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
    use std::path::Path;

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
            tenant: String::new(),
            ..Default::default()
        }
    }

    fn executor(dir: &Path, outbox: &Outbox) -> Arc<Executor> {
        let dirs = ExecutorDirs {
            logs: dir.join("logs"),
            work: dir.join("work"),
            running: dir.join("running"),
        };
        for dir in [&dirs.running, &dirs.work] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Executor::new(
            ExecutorConfig {
                slots: 4,
                dirs,
                python: crate::DEFAULT_PYTHON.into(),
                task_env: TaskEnvironment::of_worker(&[]).unwrap(),
                datasources: Datasources::new(&Default::default(), &Default::default(), true, 4)
                    .unwrap(),
                tenants: Tenants {
                    single_team: true,
                    ..Tenants::default()
                },
                data_dir: dir.to_path_buf(),
                min_free_disk: 0,
            },
            outbox.clone(),
        )
    }

    #[tokio::test]
    async fn a_probe_by_a_new_owner_refuses_the_old_owner_s_late_dispatch() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
        let executor = executor(dir.path(), &outbox);
        let probe = |id: i64, epoch: i64| TaskAttempt {
            task_instance_id: id,
            attempt: 1,
            workflow_instance_id: 1,
            owner_epoch: epoch,
        };
        // The new owner (epoch 2) asks before queueing task 5 again: nobody has it.
        assert_eq!(executor.probe(&[probe(5, 2)]), ProbeResponse::default());

        // The frozen old owner's call for that attempt arrives afterwards.
        let late = executor.dispatch(vec![spec(5, "noop", "")], false);
        assert_eq!(late.rejected, vec![5]);
        assert!(late.reason.contains("newer owner"), "{}", late.reason);
        assert_eq!(
            executor.probe(&[probe(5, 2)]),
            ProbeResponse::default(),
            "never started"
        );

        // Adopting it where it never arrived refuses it: it was lost here, not running.
        let mut adopt = spec(5, "noop", "");
        adopt.owner_epoch = 2;
        let adopted = executor.dispatch(vec![adopt], true);
        assert_eq!(adopted.rejected, vec![5], "{}", adopted.reason);

        // The new owner's own dispatch goes through.
        let mut current = spec(5, "noop", "");
        current.owner_epoch = 2;
        assert_eq!(executor.dispatch(vec![current], false).accepted, vec![5]);
        assert_eq!(executor.probe(&[probe(5, 2)]).known, vec![5]);

        // Nor can the old owner kill what the new one drives.
        let mut sleeper = spec(6, "shell", "sleep 30");
        sleeper.owner_epoch = 2;
        assert_eq!(
            executor.dispatch(vec![sleeper.clone()], false).accepted,
            vec![6]
        );
        let mut stale = kill_of(&sleeper);
        stale.owner_epoch = 1;
        assert!(!executor.kill(&stale), "the old owner's kill is refused");
        assert!(
            executor.kill(&kill_of(&sleeper)),
            "the owner's kill goes through"
        );
        assert!(executor.wait_idle(Duration::from_secs(10)).await);
    }

    fn kill_of(spec: &TaskSpec) -> KillRequest {
        KillRequest {
            task_instance_id: spec.task_instance_id,
            attempt: spec.attempt,
            workflow_instance_id: spec.workflow_instance_id,
            owner_epoch: spec.owner_epoch,
        }
    }

    #[tokio::test]
    async fn metrics_follow_tasks_from_start_to_their_final_state() {
        let _metrics = crate::tests::METRICS_LOCK.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
        let executor = executor(dir.path(), &outbox);
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
        assert_eq!(executor.dispatch(tasks, false).accepted, [1, 2, 3]);
        // A duplicate dispatch starts nothing.
        assert_eq!(
            executor
                .dispatch(vec![spec(3, "shell", "sleep 30")], false)
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

        assert!(executor.kill(&kill_of(&spec(3, "shell", ""))));
        assert!(executor.wait_idle(Duration::from_secs(10)).await);
        assert_eq!(WORKER_TASKS_RUNNING.get(), running);
        assert_eq!(WORKER_TASKS_FINISHED_KILLED.get(), killed + 1);
        assert_eq!(WORKER_TASK_DURATION.count(), observed + 3);
        assert_eq!(WORKER_TASKS_STARTED.get(), started + 3);
        // noop: RUNNING + SUCCESS; bogus: FAILURE; shell: RUNNING + KILLED.
        assert_eq!(WORKER_EVENTS_UNACKED.get(), unacked + 5);
        outbox.stop().await;
        assert_eq!(WORKER_EVENTS_UNACKED.get(), unacked);
    }

    /// Polls (bounded) until `check` holds: another process's progress signals nothing we
    /// could wait on.
    async fn eventually(what: &str, check: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn gone(pid: i32) -> bool {
        orphans::proc_stat(pid).is_none_or(|s| s.zombie)
    }

    #[tokio::test]
    async fn a_lost_lease_abandons_the_tasks_accepted_under_it() {
        let _metrics = crate::tests::METRICS_LOCK.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
        let executor = executor(dir.path(), &outbox);
        let (lost_tx, lost) = watch::channel(0u64);
        executor.follow_lease(lost.clone());
        let stop = CancellationToken::new();
        let reaction = tokio::spawn(abandon_on_lease_loss(executor.clone(), lost, stop.clone()));

        // A task that finished before the loss: its events stay queued.
        assert_eq!(
            executor.dispatch(vec![spec(1, "noop", "")], false).accepted,
            [1]
        );
        let pid_file = dir.path().join("pid");
        let sleeper = spec(
            2,
            "shell",
            &format!("sleep 30 & echo $! > '{}'; wait", pid_file.display()),
        );
        assert_eq!(
            executor.dispatch(vec![sleeper.clone()], false).accepted,
            [2]
        );
        // The first script task's record file.
        let record = dir.path().join("running/1.pgid");
        eventually("the task starts", || {
            std::fs::read_to_string(&record).is_ok_and(|r| !r.is_empty())
                && std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
        })
        .await;
        let sleep: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let rec = orphans::Record::parse(&std::fs::read_to_string(&record).unwrap()).unwrap();
        assert!(!gone(sleep) && !gone(rec.pgid));
        // noop: RUNNING + SUCCESS; shell: RUNNING.
        eventually("events queued", || outbox.pending() == 3).await;

        lost_tx.send_modify(|n| *n += 1);
        assert!(executor.wait_idle(Duration::from_secs(10)).await);
        eventually("the task's processes are killed", || {
            gone(sleep) && gone(rec.pgid)
        })
        .await;
        assert_eq!(
            std::fs::read_to_string(&record).unwrap(),
            "",
            "record emptied"
        );
        // Its RUNNING event was dropped and no KILLED event was queued.
        assert_eq!(outbox.pending(), 2);
        let log = std::fs::read_to_string(dir.path().join("logs/1/2_1.log")).unwrap();
        assert!(log.contains("abandoned"), "{log}");

        // A master asking learns it was given up (and runs it again).
        let asked = executor.probe(&[TaskAttempt {
            task_instance_id: 2,
            attempt: 1,
            workflow_instance_id: sleeper.workflow_instance_id,
            owner_epoch: sleeper.owner_epoch,
        }]);
        assert_eq!((asked.known, asked.abandoned), (vec![], vec![2]));

        // The abandoned attempt is not taken again; a new attempt is.
        let again = executor.dispatch(vec![sleeper.clone()], false);
        assert_eq!(again.rejected, [2]);
        assert!(again.reason.contains("abandoned"), "{}", again.reason);
        let mut retry = sleeper.clone();
        retry.attempt = 2;
        retry.definition_json =
            serde_json::json!({"type": "shell", "command": "sleep 30"}).to_string();
        assert_eq!(executor.dispatch(vec![retry], false).accepted, [2]);
        // It belongs to the current lease: only a later loss abandons it.
        assert_eq!(executor.abandon_older(1), 0);
        assert_eq!(executor.abandon_older(2), 1);
        assert!(executor.wait_idle(Duration::from_secs(10)).await);
        assert_eq!(outbox.pending(), 2);

        stop.cancel();
        reaction.await.unwrap();
        outbox.stop().await;
    }
}
