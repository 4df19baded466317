//! Script tasks (shell, python): a program in its own process group in a scratch work
//! directory, its exit turned into the task's outcome.

use super::process::{self, Program};
use super::table::RunningTask;
use super::task_log::TaskLog;
use super::{Executor, NO_EXIT_CODE, Outcome, set_value};
use shoal_common::proto::TaskSpec;
use tracing::warn;

impl Executor {
    /// Runs a script task (shell, python): one code path for "a program in its own process
    /// group, writing into the task log".
    pub(super) async fn run_script(
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
}

/// A script task whose process could not be started: the reason goes to its log and event.
fn could_not_start(spec: &TaskSpec, log: &TaskLog, message: String) -> Outcome {
    log.note(&message);
    warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "task could not start");
    Outcome::failure(message)
}
