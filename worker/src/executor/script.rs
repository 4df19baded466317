//! Process tasks (shell, python, spark, notebook): a program in its own process group in a
//! scratch work directory, its exit turned into the task's outcome.

use super::process::{self, Program, TaskExit, TaskProcess};
use super::table::RunningTask;
use super::task_log::TaskLog;
use super::tenant::Tenant;
use super::{Executor, NO_EXIT_CODE, Outcome, set_value};
use shoal_common::proto::TaskSpec;
use std::path::Path;
use tracing::warn;

/// How a process task starts, and what it makes of its end.
pub(super) trait ProcessTask {
    /// What the failure message calls the process: "command", "spark-submit", ...
    fn what(&self) -> &str;
    /// Starts the process in the task's work directory.
    fn start(&self, work_dir: &Path, tenant: Option<&Tenant>) -> Result<TaskProcess, String>;
    /// The outcome once the process ended (its work directory still there).
    fn finish(&self, _work_dir: &Path, _tenant: Option<&Tenant>, outcome: Outcome) -> Outcome {
        outcome
    }
}

/// A shell or python task: its script run by its interpreter.
struct Script<'a> {
    program: &'a Program<'a>,
    script: &'a str,
    /// Shell lines run first, in the same bash (empty: none).
    environment: &'a str,
    params: &'a std::collections::HashMap<String, String>,
}

impl ProcessTask for Script<'_> {
    fn what(&self) -> &str {
        "command"
    }

    fn start(&self, work_dir: &Path, tenant: Option<&Tenant>) -> Result<TaskProcess, String> {
        let (script, environment) = (self.script, self.environment);
        process::spawn(
            self.program,
            work_dir,
            script,
            environment,
            self.params,
            tenant,
        )
    }
}

impl Executor {
    /// Runs a script task (shell, python).
    pub(super) async fn run_script(
        &self,
        spec: &TaskSpec,
        task: &RunningTask,
        program: &Program<'_>,
        script: &str,
        log: &TaskLog,
    ) -> Outcome {
        let script = Script {
            program,
            script,
            environment: &spec.environment,
            params: &spec.params,
        };
        self.run_process(spec, task, &script, log).await
    }

    /// Runs a process task: one code path for "a program in its own process group,
    /// writing into the task log".
    pub(super) async fn run_process(
        &self,
        spec: &TaskSpec,
        task: &RunningTask,
        how: &impl ProcessTask,
        log: &TaskLog,
    ) -> Outcome {
        let work_dir = match self.scratch.take() {
            Ok(dir) => dir,
            Err(message) => return could_not_start(spec, log, message),
        };
        let outcome = async {
            let tenant = match self.tenants.of_task(&spec.tenant) {
                Ok(tenant) => tenant,
                Err(message) => return could_not_start(spec, log, message),
            };
            let started = how.start(&work_dir, tenant.as_ref());
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

            let killed = task.kill.requested();
            let what = how.what();
            let outcome = ended(exit, log, killed, what, |code| {
                format!("{what} exited with code {code}")
            });
            how.finish(&work_dir, tenant.as_ref(), outcome)
        }
        .await;
        // Emptied for a later task: the task's group is gone (`wait` killed it).
        let scratch = self.scratch.clone();
        tokio::task::spawn_blocking(move || scratch.give_back(work_dir));
        outcome
    }
}

/// The outcome of a task process that exited (a script, a container runtime's client):
/// success on 0, else killed if it was stopped, else a failure with its exit code
/// (`code_message` says what a code means) or `128 + signal`. `what` names the process.
pub(super) fn ended(
    exit: TaskExit,
    log: &TaskLog,
    killed: bool,
    what: &str,
    code_message: impl FnOnce(i32) -> String,
) -> Outcome {
    if exit.output_truncated {
        log.note(&format!(
            "output parameters beyond {} bytes were dropped",
            set_value::MAX_OUTPUT
        ));
    }
    let status = match exit.status {
        Ok(status) => status,
        Err(e) => {
            let message = format!("cannot wait for the {what}: {e}");
            log.note(&message);
            return Outcome::failure(message);
        }
    };
    if status.success() {
        return Outcome::Success {
            output: exit.output,
        };
    }
    if killed {
        return Outcome::killed();
    }
    use std::os::unix::process::ExitStatusExt;
    let (exit_code, message) = match (status.code(), status.signal()) {
        (Some(code), _) => (code, code_message(code)),
        (None, Some(signal)) => (
            128 + signal,
            format!("{what} terminated by signal {signal}"),
        ),
        (None, None) => (NO_EXIT_CODE, format!("{what} ended with {status}")),
    };
    log.note(&message);
    Outcome::Failure {
        exit_code,
        message,
        output: exit.output,
    }
}

/// A script task whose process could not be started: the reason goes to its log and event.
fn could_not_start(spec: &TaskSpec, log: &TaskLog, message: String) -> Outcome {
    log.note(&message);
    warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task could not start");
    Outcome::failure(message)
}
