//! One task's run: its definition read and checked, the work started under its timeout
//! while the log is shipped, and its events (RUNNING, the end) reported to its master.

use super::kill::StopReason;
use super::notebook::Notebook;
use super::process::Program;
use super::spark::{self, Spark};
use super::table::{FINISHED_MEMORY, Finished, RunningTask, TaskKey};
use super::task_log::TaskLog;
use super::timeout::with_timeout;
use super::{Executor, Outcome, http, kubernetes, publish, sql};
use crate::logs;
use serde::Deserialize;
use shoal_common::definition::{
    ContainerSpec, HttpSpec, KubernetesSpec, NotebookSpec, PublishSpec, SparkSpec, SqlSpec,
    TimeoutStrategy,
};
use shoal_common::mask::Mask;
use shoal_common::metrics;
use shoal_common::proto::{TaskEvent, TaskEventKind, TaskSpec};
use shoal_common::types::now_ms;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// How often a running task's grown log is sent to its master, and how much of its end.
const SHIP_LOG_EVERY: Duration = Duration::from_secs(5);
const SHIPPED_WHILE_RUNNING: u64 = 64 * 1024;
const KNOWN_TYPES: &str =
    "shell, python, http, sql, spark, notebook, container, kubernetes, publish, noop";

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
    #[serde(default)]
    spark: Option<SparkSpec>,
    #[serde(default)]
    notebook: Option<NotebookSpec>,
    container: Option<ContainerSpec>,
    #[serde(default)]
    kubernetes: Option<KubernetesSpec>,
    #[serde(default)]
    publish: Option<PublishSpec>,
    #[serde(default, with = "shoal_common::duration::option")]
    timeout: Option<Duration>,
    #[serde(default)]
    timeout_strategy: TimeoutStrategy,
}

/// What a task runs, checked before anything starts.
enum Work<'a> {
    Script {
        program: Program<'a>,
        script: &'a str,
    },
    Http(&'a HttpSpec),
    Container(&'a ContainerSpec),
    Kubernetes(&'a KubernetesSpec),
    Sql(&'a SqlSpec),
    /// spark-submit's arguments.
    Spark(Vec<String>),
    Notebook(&'a NotebookSpec),
    Publish(&'a PublishSpec),
}

impl Executor {
    pub(super) async fn run(self: Arc<Self>, spec: TaskSpec, task: Arc<RunningTask>) {
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
            // fan-out of noop tasks about a fifth of its rate (bench/history/README.md).
            info!(state, exit_code = event.exit_code, "task finished");
        }
        // Counted before the slot is freed and the last event is queued: whoever sees
        // either sees the task counted.
        metrics::WORKER_TASKS_RUNNING.dec();
        metrics::WORKER_TASK_DURATION.observe(started.elapsed().as_secs_f64());
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
            "spark" => match body.spark.as_ref().map(|s| spark::arguments(s, &spec.name)) {
                Some(Ok(args)) => Work::Spark(args),
                Some(Err(e)) => return self.fail_early(spec, e),
                None => return self.fail_early(spec, "spark task has no 'spark' section".into()),
            },
            "notebook" => match &body.notebook {
                Some(notebook) => Work::Notebook(notebook),
                None => {
                    return self.fail_early(spec, "notebook task has no 'notebook' section".into());
                }
            },
            "container" => match &body.container {
                Some(c) => Work::Container(c),
                None => {
                    return self
                        .fail_early(spec, "container task has no 'container' section".into());
                }
            },
            "kubernetes" => match &body.kubernetes {
                Some(k) => Work::Kubernetes(k),
                None => {
                    return self
                        .fail_early(spec, "kubernetes task has no 'kubernetes' section".into());
                }
            },
            "publish" => match &body.publish {
                Some(p) => Work::Publish(p),
                None => {
                    return self.fail_early(spec, "publish task has no 'publish' section".into());
                }
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
                Work::Publish(p) => {
                    self.started(spec, task, None);
                    publish::run(p, spec, &log, &task.kill).await
                }
                Work::Container(c) => self.run_container(spec, task, c, &log).await,
                Work::Kubernetes(k) => {
                    let started = || self.started(spec, task, None);
                    kubernetes::run(spec, k, &log, &task.kill, started).await
                }
                Work::Sql(sql) => {
                    self.started(spec, task, None);
                    let (project, given) = (&spec.project, &spec.datasources);
                    sql::run(&self.datasources, project, given, sql, &log, &task.kill).await
                }
                Work::Spark(args) => {
                    let submit = Spark {
                        submit: &self.spark_submit,
                        args,
                        base: &self.task_env,
                        params: &spec.params,
                    };
                    self.run_process(spec, task, &submit, &log).await
                }
                Work::Notebook(notebook) => {
                    let kept = log_path.with_extension("ipynb");
                    let (python, env) = (self.python.as_str(), &self.task_env);
                    match Notebook::new(notebook, python, env, &spec.params, &log, kept) {
                        Ok(run) => self.run_process(spec, task, &run, &log).await,
                        Err(e) => {
                            log.note(&e);
                            Outcome::failure(e)
                        }
                    }
                }
            }
        };
        let run = async {
            match body.timeout {
                Some(limit) => {
                    let passed = |message| {
                        let mut ev = event(spec, TaskEventKind::Timeout);
                        ev.message = message;
                        self.report(task, ev);
                    };
                    let strategy = body.timeout_strategy;
                    with_timeout(run, limit, strategy, task, &log, spec, passed).await
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
    pub(super) fn started(&self, spec: &TaskSpec, task: &RunningTask, pid: Option<i32>) {
        self.report(task, event(spec, TaskEventKind::Running));
        debug!(pid, "task started");
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
